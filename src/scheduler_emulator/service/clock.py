"""The virtual clock's rule (docs/reference/test-support.md#virtual-clock): how much one advance may run."""

from __future__ import annotations

import itertools
from datetime import datetime

from sqlalchemy.orm import Session

from scheduler_emulator.domain import recurrence as rec
from scheduler_emulator.service.jobs import stored_properties
from scheduler_emulator.store import repository as repo

MAX_OCCURRENCES = 100_000  # in one advance; more → refused, asking for smaller steps


def occurrences_by(session: Session, *, start: datetime, target: datetime) -> int:
    """How many occurrences of scheduled jobs fall due from ``start`` (or a job's next time) to ``target``;
    counting stops just past MAX_OCCURRENCES (a job whose stored definition no longer reads counts none: the
    dispatcher sets it aside)."""
    total = 0
    for job in repo.scheduled_jobs_due_by(session, target):
        try:
            timing = stored_properties(job).timing()
        except ValueError:
            continue
        due_from = job.next_execution_time or start
        series = rec.occurrences(timing, job.series_origin)
        for moment in itertools.islice(series, 10 * MAX_OCCURRENCES):
            if moment > target or total > MAX_OCCURRENCES:
                break
            if moment >= due_from:
                total += 1
        if total > MAX_OCCURRENCES:
            break
    return total


def too_many(count: int) -> bool:
    """Whether an advance over ``count`` occurrences is refused."""
    return count > MAX_OCCURRENCES
