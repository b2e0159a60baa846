"""The one clock every scheduling decision reads, so tests and a virtual clock can drive time."""

from __future__ import annotations

from datetime import UTC, datetime


class Clock:
    """Wall-clock time in UTC. Subclass (or replace ``now``) to drive time from elsewhere."""

    def now(self) -> datetime:
        return datetime.now(UTC)


def isoformat_z(moment: datetime) -> str:
    """ISO-8601 UTC with a ``Z``, the form of every timestamp the service writes."""
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")
