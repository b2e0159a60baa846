"""Routes an action to the runner of its type (a registry), and owns the process's network clients."""

from __future__ import annotations

import asyncio
import importlib
import logging
import time
import traceback
from collections.abc import Callable
from types import ModuleType
from typing import Any, Protocol

from scheduler_emulator.config_groups import OutboundSettings
from scheduler_emulator.dispatcher.actions import ActionRunner, FireContext, Outcome
from scheduler_emulator.dispatcher.actions.http import HttpAction
from scheduler_emulator.dispatcher.actions.session import SharedSession
from scheduler_emulator.schemas.job import ActionBase
from scheduler_emulator.schemas.job_shape import PAYLOAD_OF, scrub, secrets_of_action

log = logging.getLogger("scheduler_emulator.dispatcher")

TIMER_RESOLUTION = 0.001  # seconds: the event loop's (uvloop's) timers count whole milliseconds


class ActionSender(Protocol):
    """What the dispatcher fires through: ``Actions`` (a test may give a double that records what it sends)."""

    async def execute(self, action: ActionBase, context: FireContext) -> Outcome: ...

    async def close(self) -> None: ...


async def hold_until(moment: float) -> None:
    """Return once the wall clock reads ``moment`` (seconds since the epoch) or later. The loop's timers run on
    the monotonic clock in whole milliseconds, so a timer can go off a little early: it waits the rest."""
    for _ in range(100):
        rest = moment - time.time()
        if rest <= 0:
            return
        await asyncio.sleep(max(rest, TIMER_RESOLUTION))


class OnFirstUse:
    """An action runner whose module is imported at the first fire of its type instead of at every start: the
    Storage Queue and Service Bus runners load the Azure SDKs (~0.4 s of CPU), which most processes never use.
    The import runs on a thread, so the event loop goes on serving and firing meanwhile; ``build`` then makes
    the runner from the module, on the loop."""

    def __init__(self, module: str, build: Callable[[ModuleType], ActionRunner[Any]]) -> None:
        self.module = module
        self._build = build
        self._runner: ActionRunner[Any] | None = None
        self._loading = asyncio.Lock()

    async def runner(self) -> ActionRunner[Any]:
        if self._runner is None:
            async with self._loading:
                if self._runner is None:
                    module = await asyncio.to_thread(importlib.import_module, self.module)
                    self._runner = self._build(module)
        return self._runner

    async def execute(self, payload: Any, context: FireContext) -> Outcome:
        runner = self._runner or await self.runner()
        return await runner.execute(payload, context)

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.close()


class Actions:
    """All action types of one process: each type's runner (its payload: schemas.job_shape.PAYLOAD_OF). The
    runners share the process's one aiohttp session. Whatever an attempt reports passes here, so this is
    where the job's secrets are scrubbed from it, whichever runner wrote it."""

    def __init__(self, outbound: OutboundSettings) -> None:
        self.session = SharedSession(outbound.policy, outbound.action_timeout)
        self.http = HttpAction(outbound, self.session)
        self.storage_queue = OnFirstUse(
            "scheduler_emulator.dispatcher.actions.storage_queue",
            lambda module: module.StorageQueueAction(outbound.storage_endpoints, outbound.action_timeout, self.session),
        )
        self.service_bus = OnFirstUse(
            "scheduler_emulator.dispatcher.actions.service_bus",
            lambda module: module.ServiceBusAction(outbound.servicebus_endpoints, outbound.action_timeout),
        )
        by_payload: dict[str, ActionRunner[Any]] = {
            "request": self.http,
            "queueMessage": self.storage_queue,
            "serviceBusQueueMessage": self.service_bus,
            "serviceBusTopicMessage": self.service_bus,
        }
        self.by_type = {action_type: by_payload[payload.key] for action_type, payload in PAYLOAD_OF.items()}

    async def execute(self, action: ActionBase, context: FireContext) -> Outcome:
        """The attempt's outcome, the action's secrets scrubbed from its message; an unexpected error in an
        action module is a failed attempt, not a crash."""
        runner = self.by_type.get(action.type)
        payload = getattr(action, PAYLOAD_OF[action.type].attribute, None) if runner is not None else None
        if runner is None or payload is None:
            return Outcome(False, f"{action.type} Action - the action has no payload")
        secrets = secrets_of_action(action)
        started = None
        if context.not_before is not None:
            await hold_until(context.not_before)
            started = time.time()
        try:
            outcome = await runner.execute(payload, context)
        except Exception as exc:  # noqa: BLE001 - a failed attempt; its traceback logged with the secrets scrubbed
            reason = scrub(f"{type(exc).__name__}: {exc}", secrets)
            log.error("%s action raised unexpectedly: %s", action.type, scrub(traceback.format_exc(), secrets))
            return Outcome(False, f"{action.type} Action - unexpected error: {reason}", started)
        return Outcome(outcome.succeeded, scrub(outcome.message, secrets) if secrets else outcome.message, started)

    async def close(self) -> None:
        await self.http.close()
        await self.storage_queue.close()
        await self.service_bus.close()
        await self.session.close()
