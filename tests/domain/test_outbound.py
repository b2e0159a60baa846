"""The outbound target policy as a pure decision (docs/reference/security.md#outbound-policy)."""

from __future__ import annotations

import pytest

from scheduler_emulator.domain.outbound import DEFAULT_DENY, OutboundPolicy, parse_networks

DEFAULT = OutboundPolicy.from_flags(DEFAULT_DENY, "")


@pytest.mark.parametrize(
    "address",
    [
        "169.254.169.254",  # AWS/Azure/GCP metadata
        "169.254.0.1",
        "169.254.255.255",
        "fe80::1",
        "fe80::1%eth0",
        "0.0.0.0",
        "0.1.2.3",
        "100.100.100.200",  # Alibaba metadata
        "fd00:ec2::254",  # AWS IPv6 metadata
        "::ffff:169.254.169.254",  # IPv4-mapped: the same destination
        "::ffff:0.0.0.0",
    ],
)
def test_default_list_denies_metadata_and_link_local(address: str) -> None:
    reason = DEFAULT.refusal(address)
    assert reason is not None and "denies" in reason


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "127.0.0.2",
        "::1",
        "10.0.0.5",
        "172.16.3.4",
        "192.168.1.1",
        "fd00::1",
        "100.100.100.201",
        "169.253.255.255",
        "169.255.0.0",
        "8.8.8.8",
        "2001:db8::1",
        "fd00:ec2::253",
    ],
)
def test_default_list_allows_loopback_private_and_public(address: str) -> None:
    assert DEFAULT.refusal(address) is None


def test_none_clears_the_deny_list() -> None:
    assert OutboundPolicy.from_flags("none", "").refusal("169.254.169.254") is None
    assert OutboundPolicy.from_flags("", "").refusal("169.254.169.254") is None


def test_allow_list_means_only_these() -> None:
    policy = OutboundPolicy.from_flags(DEFAULT_DENY, "127.0.0.0/8, ::1")
    assert policy.refusal("127.0.0.9") is None
    assert policy.refusal("::1") is None
    assert "allows" in (policy.refusal("10.0.0.1") or "")
    assert "denies" in (OutboundPolicy.from_flags("127.0.0.2/32", "127.0.0.0/8").refusal("127.0.0.2") or "")


def test_bad_ranges_name_the_flag() -> None:
    with pytest.raises(ValueError, match="--outbound-deny.*'10.0.0.0/33'"):
        parse_networks("10.0.0.0/8, 10.0.0.0/33", "--outbound-deny")
    assert DEFAULT.refusal("not-an-ip") is not None
