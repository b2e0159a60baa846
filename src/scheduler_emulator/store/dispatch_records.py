"""The records that cross between the dispatcher and its store port (store/dispatch_port.py): frozen and
keyword-only, so neither side passes rows, dicts or positional argument lists to the other; and, below them, the
rows the port hands its batch statements (store/dispatch_batches.py): named tuples in the order of the statements'
parameters, so that a batch reaches the driver without a dict per row.

Nothing here knows the wire models: a job's definition is parsed by a ``DefinitionReader`` that the dispatcher
gives the store (``Claim.properties`` is what that reader returns)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, NamedTuple, Protocol, TypeVar

from scheduler_emulator.domain import recurrence as rec
from scheduler_emulator.domain.due import Skipped
from scheduler_emulator.domain.states import ActionName, AttemptStatus, JobState, OccurrenceOutcome


class Definition(Protocol):
    """A job's stored definition as its reader parsed it: the store reads nothing of it but its schedule."""

    def timing(self) -> rec.Timing:
        """The schedule part of the definition, in the recurrence engine's terms."""
        ...


D = TypeVar("D", bound=Definition, covariant=True)

DefinitionReader = Callable[[dict[str, Any]], D]
"""Parses a stored definition (its ``properties`` JSON); ValueError when today's rules refuse it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Progress:
    """How far an unfinished occurrence got, as kept with it in the store: the action whose attempt comes next,
    how many of that action's attempts were made (the next one's retryCount) and when the next one is due (None:
    at once). Whoever runs the occurrence next resumes there."""

    action_name: ActionName
    attempts_made: int
    retry_at: datetime | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Resumption:
    """An unfinished occurrence a claim took over from another dispatcher (or from this one's last run)."""

    progress: Progress | None  # how far it got; None: no attempt of it was recorded
    handed_back: bool  # its dispatcher stopped and handed it back; False: that one's heartbeat ran out


@dataclass(frozen=True, slots=True, kw_only=True)
class Claim(Generic[D]):
    """One occurrence a dispatcher now owns and must run: the job as it was when claimed."""

    job_id: int
    occurrence_id: int
    version: int  # the job definition's version; a write since the claim changes it
    expected_time: datetime
    repeat_count: int
    skipped: Skipped  # instants missed during downtime, to record as one Postponed entry
    properties: D  # the definition, as the store's DefinitionReader parsed it
    timing: rec.Timing  # the schedule part of ``properties``, in the recurrence engine's terms
    job_name: str
    collection_name: str
    region: str
    sku: str
    collection_properties: dict[str, Any]
    manual: bool  # a POST .../run outside the schedule
    resumed: Resumption | None  # taken over from a dispatcher that stopped mid-occurrence; None: a new occurrence
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
    # The attempt's occurrence and how far it got with this attempt, when more is to come (a retry, or the error
    # action): kept with the occurrence in the same transaction as this entry.
    occurrence_id: int | None = None
    progress: Progress | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Completion:
    """The end of one occurrence: its last attempt (recorded with the end, in one transaction) and the
    outcome that decides the job's next state."""

    claim: Claim[Any]
    attempt: AttemptRecord | None  # the last attempt, not recorded yet; None when there was none
    count_fault: bool  # add one to faultedCount
    faulted: bool  # the occurrence failed (its last attempt failed)
    max_occurrences: int | None  # the plan's cap on a job's occurrences


@dataclass(frozen=True, slots=True, kw_only=True)
class Abandon:
    """Occurrences claimed that will not run (the job changed before they were due, or the dispatcher stops)."""

    claims: tuple[Claim[Any], ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class JobStatus:
    """What decides whether an occurrence claimed ahead may still fire."""

    version: int
    state: JobState
    collection_state: JobState


Write = AttemptRecord | Completion | Abandon


# -- the rows of the port's batch statements (store/dispatch_batches.py) --------------------------------------


class JobMove(NamedTuple):
    """Where a claim leaves a job (or a takeover that found nothing to run, a definition set aside, an occurrence
    given back): its schedule, occurrence count, pending run request and lease."""

    job_id: int
    next_time: datetime | None  # the job's next execution time (None: not scheduled)
    repeat_count: int  # occurrences of the job so far
    run_requested_at: datetime | None  # a POST .../run still to claim
    owner: str | None  # the lease: this dispatcher's name, another's (kept), or None (released)


class JobFinish(NamedTuple):
    """An occurrence's end for its job, written in one UPDATE: the counters and lease always; the schedule only
    when ``schedule_moves`` (False: an API write changed the job meanwhile, and that write stands). Flat, in the
    order of the statement's parameters: the row is the driver's parameters as it is."""

    job_id: int
    owner: str | None  # the lease after the end: None when it was this dispatcher's, else the holder's (kept)
    # What the end adds to the job's counters (execution_count, failure_count, faulted_count, last_execution_time):
    executions: int  # 1 when the last attempt was of the main action (it counts as an execution), else 0
    failures: int  # 1 when that attempt failed, else 0
    faults: int  # 1 when the occurrence faulted and no error action counted it already, else 0
    last_execution_time: datetime | None  # that attempt's start; None leaves the job's as it is
    # Where the schedule moves, when it does:
    next_time: datetime | None  # when the job is next due (None: not scheduled)
    state: str  # the job's state from now on (a JobState value)
    finished_at: datetime | None  # when the job completed or faulted; None leaves it as it is
    schedule_moves: bool


class NewOccurrence(NamedTuple):
    """An occurrence to record under its unique (job, expected time) key."""

    job_id: int
    expected_time: datetime
    repeat_count: int


class OccurrenceStep(NamedTuple):
    """How far an occurrence got (Progress's fields), by its id."""

    occurrence_id: int
    pending_action: ActionName
    attempts_made: int
    retry_at: datetime | None


class OccurrenceEnd(NamedTuple):
    """How and when an occurrence ended."""

    occurrence_id: int
    outcome: OccurrenceOutcome
    finished_at: datetime
