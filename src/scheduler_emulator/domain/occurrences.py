"""What an occurrence's end does to its job's schedule and state: the pure part of finishing an occurrence
(docs/reference/recurrence-and-retries.md#counters-and-state), decided from the claim and the job as it is now, with no
I/O."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from scheduler_emulator.domain import recurrence as rec
from scheduler_emulator.domain.due import Skipped, after_busy
from scheduler_emulator.domain.states import JobState

_TINY = timedelta(microseconds=1)


@dataclass(frozen=True, slots=True, kw_only=True)
class Finish:
    """An occurrence's end for its job: what came due meanwhile, its new state and next due time."""

    postponed: Skipped  # instants that came due while this occurrence was busy (recorded as one Postponed entry)
    state: JobState | None  # the job's new state, when it changed
    next_time: datetime | None  # when the job is next due (None: not scheduled)
    schedule_moves: bool  # False: an API write changed or disabled the job meanwhile, and that write stands


UNCHANGED = Finish(postponed=Skipped(), state=None, next_time=None, schedule_moves=False)


def finish_occurrence(
    *,
    timing: rec.Timing,
    origin: datetime,
    next_time: datetime | None,
    now: datetime,
    repeat_count: int,
    max_occurrences: int | None,
    manual: bool,
    faulted: bool,
    still_current: bool,
) -> Finish:
    """The job's schedule and state once the occurrence ends at ``now``. ``next_time`` is where the claim moved
    the schedule; instants that passed while the occurrence ran are skipped. A series that is over (its end, or
    the plan's occurrence cap) completes the job — a one-time job whose last attempt failed faults instead. A
    job changed meanwhile (``still_current`` False) keeps what the change wrote."""
    if not still_current:
        return UNCHANGED
    postponed, following = after_busy(timing, origin, next_time, now)
    if max_occurrences is not None and repeat_count >= max_occurrences:
        following = None
    state = None
    if following is None and not manual:
        state = JobState.Faulted if (timing.recurrence is None and faulted) else JobState.Completed
    return Finish(postponed=postponed, state=state, next_time=following, schedule_moves=True)


def is_series_instant(timing: rec.Timing, origin: datetime, moment: datetime) -> bool:
    """Whether ``moment`` is an instant of the job's series (a POST .../run usually is not)."""
    return rec.next_occurrence_after(timing, origin, moment - _TINY) == moment
