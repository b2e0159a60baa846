"""Routes an action to the module of its type; owns the process's network clients."""

from __future__ import annotations

import logging

from scheduler_emulator.config import Settings
from scheduler_emulator.dispatcher.actions import FireContext, Outcome
from scheduler_emulator.dispatcher.actions.http import HttpAction
from scheduler_emulator.dispatcher.actions.service_bus import ServiceBusAction
from scheduler_emulator.dispatcher.actions.storage_queue import StorageQueueAction
from scheduler_emulator.schemas.job import ActionBase

log = logging.getLogger("scheduler_emulator.dispatcher")


class Actions:
    """All action types of one process, sharing its network clients."""

    def __init__(self, settings: Settings) -> None:
        self.http = HttpAction(settings)
        self.storage_queue = StorageQueueAction(settings.storage_endpoint_map, settings.action_timeout)
        self.service_bus = ServiceBusAction(settings.servicebus_endpoint_map, settings.action_timeout)

    async def execute(self, action: ActionBase, context: FireContext) -> Outcome:
        """The attempt's outcome; an unexpected error in an action module is a failed attempt, not a crash."""
        try:
            return await self._execute(action, context)
        except Exception as exc:
            log.exception("%s action raised unexpectedly", action.type)
            return Outcome(False, f"{action.type} Action - unexpected error: {type(exc).__name__}: {exc}")

    async def _execute(self, action: ActionBase, context: FireContext) -> Outcome:
        if action.request is not None:
            return await self.http.execute(action.request, context)
        if action.queue_message is not None:
            return await self.storage_queue.execute(action.queue_message, context)
        message = action.service_bus_queue_message or action.service_bus_topic_message
        if message is not None:
            return await self.service_bus.execute(message, context)
        return Outcome(False, f"{action.type} Action - the action has no payload")

    async def close(self) -> None:
        await self.http.close()
        await self.storage_queue.close()
        await self.service_bus.close()
