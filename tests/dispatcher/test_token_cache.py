"""The OAuth token cache of Http actions (ActiveDirectoryOAuth) against a real token endpoint on loopback: a
token is fetched once and reused, and the cache keeps only the most recently used ones (it is bounded)."""

from __future__ import annotations

import asyncio
import json

from support.target_server import TargetServer

from scheduler_emulator.config import Settings
from scheduler_emulator.dispatcher.actions.http import TokenCache
from scheduler_emulator.dispatcher.actions.session import SharedSession


def test_tokens_are_reused_and_the_least_recently_used_is_dropped(target: TargetServer) -> None:
    target.respond("/tenant/oauth2/token", body=json.dumps({"access_token": "t", "expires_in": 3600}))
    settings = Settings()
    cache = TokenCache(target.base_url, settings.outbound.policy)
    cache.MAX_TOKENS = 2

    async def fetch_in_order(clients: list[str]) -> None:
        shared = SharedSession(settings.outbound.policy, 10)
        try:
            for client in clients:
                assert (
                    await cache.token(
                        shared.get(), tenant="tenant", client_id=client, secret="secret", audience="https://audience"
                    )
                    == "t"
                )
        finally:
            await shared.close()

    asyncio.run(fetch_in_order(["a", "b", "a", "c"]))  # "a" reused; "c" pushes out "b", the least recently used
    assert len(target.requests("/tenant/oauth2/token")) == 3

    asyncio.run(fetch_in_order(["a", "c", "b"]))  # "a" and "c" still cached; "b" fetched again
    fetched = [dict(pair.split("=") for pair in r.text.split("&"))["client_id"] for r in target.requests()]
    assert fetched == ["a", "b", "c", "b"]
