"""Which occurrence to run when a job comes due, and what is skipped: the catch-up and no-overlap rules
of docs/reference/recurrence-and-retries.md#overlap-and-downtime, on top of the recurrence engine."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from scheduler_emulator.domain import recurrence as rec

# Skipped instants are counted one by one up to this many; past it the count is reported as "more than".
MAX_COUNTED = 1000
_TINY = timedelta(microseconds=1)
_WINDOWS = (
    timedelta(minutes=1),
    timedelta(hours=1),
    timedelta(days=1),
    timedelta(days=32),
    timedelta(days=367),
    timedelta(days=3660),
)


@dataclass(frozen=True)
class Skipped:
    """Instants of the series that do not run. ``count`` is exact unless ``more`` (then it is a floor)."""

    count: int = 0
    first: datetime | None = None
    last: datetime | None = None
    more: bool = False


@dataclass(frozen=True)
class Due:
    expected: datetime  # the instant to run now
    skipped: Skipped  # instants before it that were missed, recorded as one Postponed entry
    following: datetime | None  # the next instant after ``expected`` (None: the series ends)


def latest_until(timing: rec.Timing, origin: datetime, first: datetime, now: datetime) -> datetime:
    """The last instant of the series in [first, now] (``first`` is one, and ≤ now), found without walking
    a long downtime instant by instant: look back over growing windows from ``now``."""
    candidate = first
    for window in _WINDOWS:
        start = now - window
        if start <= first:
            break
        found = rec.next_occurrence_after(timing, origin, start - _TINY)
        if found is not None and found <= now:
            candidate = found
            break
    steps = 0
    while steps < 100_000:
        following = rec.next_occurrence_after(timing, origin, candidate)
        if following is None or following > now:
            return candidate
        candidate = following
        steps += 1
    return candidate


def instants_between(timing: rec.Timing, origin: datetime, first: datetime, before: datetime) -> Skipped:
    """The series' instants in [first, before): how many (counted up to MAX_COUNTED), first and last."""
    count = 0
    last = None
    current: datetime | None = first
    while current is not None and current < before:
        if count >= MAX_COUNTED:
            return Skipped(count, first, None, more=True)
        count += 1
        last = current
        current = rec.next_occurrence_after(timing, origin, current)
    return Skipped(count, first if count else None, last)


def due_occurrence(timing: rec.Timing, origin: datetime, next_time: datetime, now: datetime) -> Due:
    """The job was due at ``next_time`` (≤ now): the most recent due instant runs once, late if need be;
    the earlier ones were missed (downtime) and are skipped."""
    if timing.recurrence is None:  # a one-time job: its one instant, nothing after it
        return Due(next_time, Skipped(), None)
    expected = latest_until(timing, origin, next_time, now)
    skipped = instants_between(timing, origin, next_time, expected) if expected > next_time else Skipped()
    return Due(expected, skipped, rec.next_occurrence_after(timing, origin, expected))


def after_busy(
    timing: rec.Timing, origin: datetime, next_time: datetime | None, now: datetime
) -> tuple[Skipped, datetime | None]:
    """Instants that came due (from ``next_time`` up to ``now``) while an occurrence was still running or
    waiting to retry are skipped; returns them and the next instant after ``now``."""
    if next_time is None or next_time > now:
        return Skipped(), next_time
    last = latest_until(timing, origin, next_time, now)
    skipped = instants_between(timing, origin, next_time, last + _TINY)
    return skipped, rec.next_occurrence_after(timing, origin, now)
