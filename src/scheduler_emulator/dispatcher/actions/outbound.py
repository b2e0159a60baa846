"""Enforcing the outbound target policy on the HTTP action's connections (docs/reference/security.md#outbound-policy).

Names are resolved here and only the addresses the policy permits are handed to aiohttp, which then
connects to exactly those: a DNS answer that changes between the check and the connection (rebinding)
cannot slip through, because there is no second lookup. IP literals never reach a resolver (aiohttp
connects to them directly), so :func:`literal_refusal` judges them before each request."""

from __future__ import annotations

import ipaddress
import socket

from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import DefaultResolver

from scheduler_emulator.domain.outbound import OutboundPolicy


class BlockedTarget(OSError):
    """The destination is refused by the outbound policy (an OSError, so aiohttp reports it as a failed
    connection, with this as its cause)."""


def blocked_message(host: str, reason: str) -> str:
    return f"the target '{host}' is blocked by the outbound policy ({reason})"


def literal_refusal(policy: OutboundPolicy, host: str | None) -> str | None:
    """For a URL host that is an IP literal: why the policy refuses it (None: allowed, or not a literal)."""
    if not host:
        return None
    try:
        ipaddress.ip_address(host.strip("[]").split("%", 1)[0])
    except ValueError:
        return None
    reason = policy.refusal(host.strip("[]"))
    return blocked_message(host, reason) if reason else None


class PolicyResolver(AbstractResolver):
    """Resolves with aiohttp's default resolver and keeps only the addresses the policy permits."""

    def __init__(self, policy: OutboundPolicy, resolver: AbstractResolver | None = None) -> None:
        self.policy = policy
        self._resolver = resolver or DefaultResolver()

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        found = await self._resolver.resolve(host, port, family)
        permitted = [entry for entry in found if self.policy.refusal(entry["host"]) is None]
        if not permitted:
            reasons = "; ".join(dict.fromkeys(self.policy.refusal(entry["host"]) or "" for entry in found))
            raise BlockedTarget(blocked_message(host, reasons or "no address"))
        return permitted

    async def close(self) -> None:
        await self._resolver.close()
