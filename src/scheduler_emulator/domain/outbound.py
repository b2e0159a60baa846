"""The outbound target policy (docs/reference/security.md#outbound-policy): which resolved addresses a job may make the
service connect to.

Pure: it judges IP addresses; resolving names and connecting to the judged address is the HTTP action's
part (``dispatcher.actions.outbound``)."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = ipaddress.IPv4Address | ipaddress.IPv6Address

# Link-local (cloud metadata at 169.254.169.254, fe80::/10), "this network" (0.0.0.0 reaches the host itself),
# Alibaba's metadata address and AWS's IPv6 metadata address. Loopback and private ranges stay allowed: local
# targets are what an emulator is for.
DEFAULT_DENY = "169.254.0.0/16, fe80::/10, 0.0.0.0/8, 100.100.100.200/32, fd00:ec2::254/128"


def parse_networks(text: str, flag: str) -> tuple[Network, ...]:
    """Comma-separated CIDRs (a bare address is a /32 or /128); ``none`` or nothing → no networks.
    ValueError names ``flag`` and the bad item."""
    if text.strip().lower() in ("", "none"):
        return ()
    networks = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        try:
            networks.append(ipaddress.ip_network(item, strict=False))
        except ValueError:
            raise ValueError(f"{flag} takes CIDR ranges such as 169.254.0.0/16 or fd00::/8, not '{item}'") from None
    return tuple(networks)


@dataclass(frozen=True, kw_only=True)
class OutboundPolicy:
    """Denied networks, and (when ``allow`` is not None) the only networks allowed."""

    deny: tuple[Network, ...]
    allow: tuple[Network, ...] | None = None

    @classmethod
    def from_flags(cls, deny: str, allow: str) -> OutboundPolicy:
        """From ``--outbound-deny`` and ``--outbound-allow`` (empty: no allow list)."""
        allowed = parse_networks(allow, "--outbound-allow") if allow.strip() else None
        return cls(deny=parse_networks(deny, "--outbound-deny"), allow=allowed)

    def refusal(self, address: str | Address) -> str | None:
        """None when the service may connect to ``address``, else why not (for the job's history)."""
        try:
            ip = ipaddress.ip_address(address.split("%", 1)[0] if isinstance(address, str) else address)
        except ValueError:
            return f"'{address}' is not an IP address"
        # An IPv4-mapped IPv6 address (::ffff:169.254.169.254) reaches the IPv4 address: judge that one.
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        for network in self.deny:
            if ip.version == network.version and ip in network:
                return f"{ip} is in {network}, which the outbound policy denies"
        if self.allow is not None and not any(ip.version == n.version and ip in n for n in self.allow):
            return f"{ip} is not in the ranges the outbound policy allows"
        return None
