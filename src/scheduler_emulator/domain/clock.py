"""The one clock every scheduling decision reads, so tests and a virtual clock can drive time."""

from __future__ import annotations

import asyncio
import contextlib
from datetime import UTC, datetime
from typing import Protocol


class Clock(Protocol):
    """Scheduling time, as the API and the dispatcher read it. Implementations: ``WallClock`` (real time) and
    ``virtual_clock.VirtualClock`` (``--clock virtual``: time that moves only when told, kept in the database)."""

    def now(self) -> datetime:
        """The current time (UTC), as last known: never a database call."""
        ...

    async def refresh(self) -> datetime:
        """The current time after catching up with any other process sharing the clock; never blocks the loop."""
        ...

    async def sleep(self, seconds: float, stopping: asyncio.Event) -> None:
        """Return once this clock has moved ``seconds`` on, or as soon as ``stopping`` is set."""
        ...


class WallClock:
    """Real time in UTC (the ``Clock`` of ``--clock real``); tests subclass it to set ``now``."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    async def refresh(self) -> datetime:
        return self.now()

    async def sleep(self, seconds: float, stopping: asyncio.Event) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stopping.wait(), timeout=seconds)


def isoformat_z(moment: datetime) -> str:
    """ISO-8601 UTC with a ``Z``, the form of every timestamp the service writes."""
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")
