"""httpx clients as a user's code holds them (default limits: a pooled connection is kept ``keepalive_expiry``, 5 s,
after its last answer) that reuse their connection after idle gaps just under that expiry: the moment a server
closing idle connections first would meet the client's next request on the way (RFC 9112 §9.3.1). Every request
that gets no answer is listed, with the connection it went out on."""

from __future__ import annotations

import asyncio
import random
import ssl
from dataclasses import dataclass, field

import httpx

EXPIRY = httpx.Limits().keepalive_expiry or 5.0  # httpx's default, what a client that sets nothing keeps


@dataclass
class ReuseResult:
    answered: int = 0
    reused: int = 0  # requests that went out on the connection the one before had used
    unanswered: list[str] = field(default_factory=list)


async def _client(
    url: str, rounds: int, gap: tuple[float, float], *, tls: ssl.SSLContext, rng: random.Random, result: ReuseResult
) -> None:
    port: int | None = None
    async with httpx.AsyncClient(base_url=url, timeout=60, verify=tls) as client:
        await asyncio.sleep(rng.uniform(0, gap[1]))  # spread the clients' rounds over time
        for round_ in range(rounds):
            try:
                response = await client.get("/_emulator/health")
            except httpx.TransportError as exc:
                result.unanswered.append(f"round {round_}, after the connection from port {port}: {exc!r}")
                port = None
            else:
                result.answered += 1
                now = response.extensions["network_stream"].get_extra_info("client_addr")[1]
                result.reused += now == port
                port = now
            if round_ < rounds - 1:
                await asyncio.sleep(rng.uniform(*gap))


async def reuse_near_expiry(url: str, *, clients: int, rounds: int, seed: int = 49) -> ReuseResult:
    """``clients`` httpx clients, each sending ``rounds`` requests with gaps of 96-100 % of httpx's expiry."""
    result = ReuseResult()
    rng = random.Random(seed)
    gap = (EXPIRY * 0.96, EXPIRY)
    tls = ssl.create_default_context()  # one for all: each client loading the CA bundle took seconds on a busy machine
    await asyncio.gather(
        *(_client(url, rounds, gap, tls=tls, rng=random.Random(rng.random()), result=result) for _ in range(clients))
    )
    return result
