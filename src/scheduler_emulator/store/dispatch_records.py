"""The records that cross between the dispatcher and its store port (store/dispatch_port.py): frozen and
keyword-only, so neither side passes rows, dicts or positional argument lists to the other."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from scheduler_emulator.domain import recurrence as rec
from scheduler_emulator.domain.due import Skipped
from scheduler_emulator.domain.states import ActionName, AttemptStatus, JobState
from scheduler_emulator.schemas.job import JobProperties


@dataclass(frozen=True, slots=True, kw_only=True)
class Claim:
    """One occurrence a dispatcher now owns and must run: the job as it was when claimed."""

    job_id: int
    occurrence_id: int
    version: int  # the job definition's version; a write since the claim changes it
    expected_time: datetime
    repeat_count: int
    skipped: Skipped  # instants missed during downtime, to record as one Postponed entry
    properties: JobProperties
    timing: rec.Timing  # the schedule part of ``properties``, in the recurrence engine's terms
    job_name: str
    collection_name: str
    region: str
    sku: str
    collection_properties: dict[str, Any]
    manual: bool  # a POST .../run outside the schedule
    resumed: bool  # taken over from a dispatcher that stopped mid-occurrence
    executions: int  # the job's executionCount when claimed
    next_time: datetime | None  # where the claim moved the job's next due time
    origin: datetime  # the job's series origin


@dataclass(frozen=True, slots=True, kw_only=True)
class AttemptRecord:
    """One history entry and how it moves its job's counters."""

    job_id: int
    history_id: str
    start_time: datetime
    end_time: datetime
    expected_time: datetime | None
    action_name: ActionName
    status: AttemptStatus
    message: str
    retry_count: int
    repeat_count: int
    counts_as_execution: bool = False  # a main-action attempt: executionCount and lastExecutionTime move
    failed: bool = False  # with counts_as_execution: failureCount moves
    add_fault: bool = False  # the main action gave up (the error action follows): faultedCount moves

    def columns(self) -> dict[str, Any]:
        """The entry as the history table's columns (for the store's statements only)."""
        return {
            "history_id": self.history_id,
            "start_time": self.start_time,
            "end_time": self.end_time,
            "expected_execution_time": self.expected_time,
            "action_name": self.action_name,
            "status": self.status,
            "message": self.message,
            "retry_count": self.retry_count,
            "repeat_count": self.repeat_count,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Completion:
    """The end of one occurrence: its last attempt (recorded with the end, in one transaction) and the
    outcome that decides the job's next state."""

    claim: Claim
    attempt: AttemptRecord | None  # the last attempt, not recorded yet; None when there was none
    count_fault: bool  # add one to faultedCount
    faulted: bool  # the occurrence failed (its last attempt failed)
    max_occurrences: int | None  # the plan's cap on a job's occurrences


@dataclass(frozen=True, slots=True, kw_only=True)
class Abandon:
    """Occurrences claimed that will not run (the job changed before they were due, or the dispatcher stops)."""

    claims: tuple[Claim, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class JobStatus:
    """What decides whether an occurrence claimed ahead may still fire."""

    version: int
    state: JobState
    collection_state: JobState


Write = AttemptRecord | Completion | Abandon
