"""StorageQueue actions (being built: see issue 4)."""

from __future__ import annotations

from scheduler_emulator.dispatcher.actions import FireContext, Outcome
from scheduler_emulator.schemas.job import StorageQueueMessage


class StorageQueueAction:
    """Puts the job's message on a storage queue."""

    def __init__(self, endpoints: dict[str, str], timeout: float) -> None:
        self.endpoints = endpoints
        self.timeout = timeout

    async def execute(self, message: StorageQueueMessage, context: FireContext) -> Outcome:
        return Outcome(False, "StorageQueue Action - this action type is not supported by this emulator yet")

    async def close(self) -> None:
        pass
