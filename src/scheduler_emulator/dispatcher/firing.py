"""Routes an action to the runner of its type (a registry), and owns the process's network clients."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from scheduler_emulator.config import Settings
from scheduler_emulator.dispatcher.actions import ActionRunner, FireContext, Outcome
from scheduler_emulator.dispatcher.actions.http import HttpAction
from scheduler_emulator.dispatcher.actions.service_bus import ServiceBusAction
from scheduler_emulator.dispatcher.actions.session import SharedSession
from scheduler_emulator.dispatcher.actions.storage_queue import StorageQueueAction
from scheduler_emulator.schemas.job import ActionBase

log = logging.getLogger("scheduler_emulator.dispatcher")


class Actions:
    """All action types of one process: each type's runner and where its payload is in the action. The
    runners share the process's one aiohttp session."""

    def __init__(self, settings: Settings) -> None:
        self.session = SharedSession(settings.outbound_policy, settings.action_timeout)
        self.http = HttpAction(settings, self.session)
        self.storage_queue = StorageQueueAction(settings.storage_endpoint_map, settings.action_timeout, self.session)
        self.service_bus = ServiceBusAction(settings.servicebus_endpoint_map, settings.action_timeout)
        self.by_type: dict[str, tuple[ActionRunner[Any], Callable[[ActionBase], Any]]] = {
            "Http": (self.http, lambda action: action.request),
            "Https": (self.http, lambda action: action.request),
            "StorageQueue": (self.storage_queue, lambda action: action.queue_message),
            "ServiceBusQueue": (self.service_bus, lambda action: action.service_bus_queue_message),
            "ServiceBusTopic": (self.service_bus, lambda action: action.service_bus_topic_message),
        }

    async def execute(self, action: ActionBase, context: FireContext) -> Outcome:
        """The attempt's outcome; an unexpected error in an action module is a failed attempt, not a crash."""
        entry = self.by_type.get(action.type)
        payload = entry[1](action) if entry is not None else None
        if entry is None or payload is None:
            return Outcome(False, f"{action.type} Action - the action has no payload")
        try:
            return await entry[0].execute(payload, context)
        except Exception as exc:
            log.exception("%s action raised unexpectedly", action.type)
            return Outcome(False, f"{action.type} Action - unexpected error: {type(exc).__name__}: {exc}")

    async def close(self) -> None:
        await self.http.close()
        await self.storage_queue.close()
        await self.service_bus.close()
        await self.session.close()
