"""Routes an action to the module of its type."""

from __future__ import annotations

import httpx

from scheduler_emulator.dispatcher.actions import FireContext, Outcome
from scheduler_emulator.dispatcher.actions.http import HttpAction, new_client
from scheduler_emulator.schemas.job import ActionBase


class Actions:
    """All action types of one process, sharing its network clients."""

    def __init__(self, timeout: float) -> None:
        self.http_client: httpx.AsyncClient = new_client(timeout)
        self.http = HttpAction(self.http_client)

    async def execute(self, action: ActionBase, context: FireContext) -> Outcome:
        if action.type in ("Http", "Https") and action.request is not None:
            return await self.http.execute(action.request, context)
        return Outcome(False, f"{action.type} Action - this action type is not supported by this emulator yet")

    async def close(self) -> None:
        await self.http_client.aclose()
