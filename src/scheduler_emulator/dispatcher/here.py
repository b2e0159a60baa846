"""The dispatcher on this process's event loop: in a process that serves both roles (one CPU, a store in memory,
``--clock virtual`` or ``--dispatcher-process off``), in a ``--no-api`` process, and in the dispatcher role's
process that ``serve`` supervises (dispatcher/child.py, dispatcher/role.py). Building a dispatcher lives here."""

from __future__ import annotations

import asyncio
import threading
from datetime import datetime

from scheduler_emulator.config_groups import DispatchSettings, OutboundSettings, StoreSettings
from scheduler_emulator.dispatcher.firing import Actions
from scheduler_emulator.dispatcher.loop import Dispatcher, Pacing
from scheduler_emulator.domain.clock import Clock
from scheduler_emulator.metrics import Metrics
from scheduler_emulator.store.database import ConnectionBounds, Database


def connection_bounds(store: StoreSettings) -> ConnectionBounds:
    """The time bounds of the process's PostgreSQL connections: the flags given, the rest from the lease."""
    return ConnectionBounds.for_lease(
        store.lease_seconds,
        statement=store.statement_timeout,
        lock=store.lock_timeout,
        idle_in_transaction=store.idle_in_transaction_timeout,
        keepalive=store.keepalive,
    )


class DispatcherHere:
    """A dispatcher over ``database`` run on the event loop that starts it, with this process's own actions
    (dispatcher/firing.Actions); a DispatcherHost. ``pacing``: stepping.PACING under the virtual clock, else
    Pacing.of(dispatch). ``watch_file``: see Dispatcher."""

    def __init__(
        self,
        database: Database,
        *,
        dispatch: DispatchSettings,
        outbound: OutboundSettings,
        clock: Clock,
        metrics: Metrics,
        pacing: Pacing,
        watch_file: bool = False,
    ) -> None:
        self._dispatch = dispatch
        self._outbound = outbound
        self._watch_file = watch_file
        self._database = database
        self._clock = clock
        self._metrics = metrics
        self._pacing = pacing
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread = 0  # the loop's thread (wake is callable from any thread)
        self._actions: Actions | None = None
        self._dispatcher: Dispatcher | None = None

    @property
    def dispatcher(self) -> Dispatcher:
        """The started dispatcher (for stepping.ClockStepper under the virtual clock)."""
        assert self._dispatcher is not None, "started"
        return self._dispatcher

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._thread = threading.get_ident()
        self._actions = Actions(self._outbound)
        self._dispatcher = Dispatcher(
            self._database,
            clock=self._clock,
            dispatch=self._dispatch,
            actions=self._actions,
            metrics=self._metrics,
            pacing=self._pacing,
            watch_file=self._watch_file,
        )
        self._dispatcher.start()

    def wake(self, not_before: datetime | None = None) -> None:
        dispatcher, loop = self._dispatcher, self._loop
        if dispatcher is None or loop is None:
            return
        if threading.get_ident() == self._thread:
            dispatcher.wake(not_before)
        elif not loop.is_closed():  # a worker thread's write (a template deployment's job)
            loop.call_soon_threadsafe(dispatcher.wake, not_before)

    async def stop(self, grace: float) -> None:
        dispatcher, self._dispatcher = self._dispatcher, None
        try:
            if dispatcher is not None:
                await dispatcher.stop(grace)
        finally:
            if self._actions is not None:
                await self._actions.close()

    def metrics(self) -> bytes:
        return self._metrics.render(dispatcher=True)

    def running(self) -> bool:
        return self._dispatcher is not None
