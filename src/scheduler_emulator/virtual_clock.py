"""The virtual clock (``--clock virtual``, docs/reference/test-support.md#virtual-clock): scheduling time that moves
only when told.

Its value lives in the database (``emulator_settings``), so every process sharing the store agrees and a
restart keeps it. Each process holds a copy, refreshed by ``refresh`` (the API does so as a request
starts, the stepping as it advances). While time is being advanced, the advancing process owns the value.
Retries wait on virtual timers (``sleep``): they fire when an advance reaches their instant. Network
time-outs and leases stay on the real clock. Every database call runs in a worker thread, never on the loop;
what moves the clock in steps is ``stepping.ClockStepper``.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from contextlib import AbstractContextManager
from datetime import UTC, datetime, timedelta

from sqlalchemy.orm import Session

from scheduler_emulator.domain.clock import isoformat_z
from scheduler_emulator.store import repository as repo
from scheduler_emulator.store.database import Database

SETTING = "clock.virtual_now"


class VirtualClock:
    """A ``Clock`` (domain.clock) whose time moves only through ``set``; ``load`` attaches it to the store."""

    def __init__(self, start: datetime | None = None) -> None:
        self.database: Database | None = None
        self._now = start or datetime.now(UTC)
        self._timers: list[tuple[datetime, int, asyncio.Future[None]]] = []
        self._order = itertools.count()
        self.sleeping: set[asyncio.Task[object]] = set()  # tasks waiting on a timer

    def now(self) -> datetime:
        return self._now

    async def load(self, database: Database) -> None:
        """At start: the stored time, or (first start) the start value, stored."""
        self.database = database
        stored = await asyncio.to_thread(self._read_or_store, isoformat_z(self._now))
        self._now = _parse(stored)

    async def refresh(self) -> datetime:
        """Re-read the stored time (another process may have advanced it)."""
        stored = await asyncio.to_thread(self._read)
        if stored is not None:
            self._now = max(self._now, _parse(stored))
        return self._now

    async def set(self, moment: datetime) -> None:
        """Move to ``moment`` (never backwards), store it, and release the timers due by then."""
        if moment > self._now:
            self._now = moment
            await asyncio.to_thread(self._write, isoformat_z(moment))
        while self._timers and self._timers[0][0] <= self._now:
            _, _, future = heapq.heappop(self._timers)
            if not future.done():
                future.set_result(None)

    def next_timer(self) -> datetime | None:
        while self._timers and self._timers[0][2].done():  # cancelled waits
            heapq.heappop(self._timers)
        return self._timers[0][0] if self._timers else None

    async def sleep(self, seconds: float, stopping: asyncio.Event) -> None:
        """Wait until virtual time has moved ``seconds`` on (or ``stopping`` is set)."""
        due = self._now + timedelta(seconds=seconds)
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._timers, (due, next(self._order), future))
        task = asyncio.current_task()
        if task is not None:
            self.sleeping.add(task)
        stop = asyncio.ensure_future(stopping.wait())
        try:
            await asyncio.wait([future, stop], return_when=asyncio.FIRST_COMPLETED)  # type: ignore[type-var]
        finally:
            stop.cancel()
            if not future.done():
                future.cancel()
            if task is not None:
                self.sleeping.discard(task)

    # -- the stored value (worker threads only) ---------------------------------------------------------

    def _session(self) -> AbstractContextManager[Session]:
        assert self.database is not None, "load() attaches the clock to its store first"
        return self.database.session()

    def _read(self) -> str | None:
        with self._session() as session:
            return repo.read_setting(session, SETTING)

    def _read_or_store(self, initial: str) -> str:
        with self._session() as session:
            stored = repo.read_setting(session, SETTING)
            if stored is None:
                repo.write_setting(session, SETTING, initial)
            return stored or initial

    def _write(self, value: str) -> None:
        with self._session() as session:
            repo.write_setting(session, SETTING, value)


def _parse(stored: str) -> datetime:
    return datetime.fromisoformat(stored.replace("Z", "+00:00"))
