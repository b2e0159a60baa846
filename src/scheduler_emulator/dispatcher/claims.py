"""Claiming due jobs (one transaction: schedule moved on, occurrences recorded, leases taken) and
finishing occurrences. The hot path reads and writes plain rows (SQLAlchemy Core), not ORM objects."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.orm import Session

from scheduler_emulator.domain import recurrence as rec
from scheduler_emulator.domain.due import Skipped, after_busy, due_occurrence
from scheduler_emulator.schemas.job import JobDefinitionIn, JobProperties
from scheduler_emulator.store import dispatching as store

_TINY = timedelta(microseconds=1)


@dataclass(slots=True)
class Claim:
    """One occurrence this dispatcher now owns and must run."""

    job_id: int
    occurrence_id: int
    version: int
    expected_time: datetime
    repeat_count: int
    skipped: Skipped  # instants missed during downtime, to record as one Postponed entry
    properties: JobProperties
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


class Definitions:
    """Parsed job definitions by (job id, version): a definition is parsed once, not at every fire."""

    def __init__(self, size: int = 20_000) -> None:
        self.size = size
        self._parsed: OrderedDict[tuple[int, int], JobProperties] = OrderedDict()

    def get(self, job_id: int, version: int, definition: dict[str, Any]) -> JobProperties:
        key = (job_id, version)
        parsed = self._parsed.get(key)
        if parsed is None:
            parsed = JobDefinitionIn.model_validate({"properties": definition}).properties
            self._parsed[key] = parsed
            if len(self._parsed) > self.size:
                self._parsed.popitem(last=False)
        return parsed


@dataclass
class _Decision:
    row: Any  # the job row joined with its collection (store.due_jobs)
    properties: JobProperties
    expected: datetime
    repeat: int
    skipped: Skipped
    manual: bool
    next_time: datetime | None
    run_requested_at: datetime | None
    occurrence_id: int | None = None  # set for a resumed occurrence; new ones get theirs on insert
    resumed: bool = False


def claim_due_jobs(
    session: Session,
    owner: str,
    now: datetime,
    limit: int,
    skip_locked: bool,
    definitions: Definitions,
    until: datetime | None = None,
) -> list[Claim]:
    """Lease up to ``limit`` jobs due by ``until`` (default: now) and record the occurrence each will run
    (one INSERT for the batch, which the unique (job, expected time) key turns into a no-op for an occurrence
    recorded before, and one executemany UPDATE). The caller commits before firing; an occurrence claimed
    ahead of its time waits for it."""
    until = until or now
    decisions = [
        decision
        for row in store.due_jobs(session, now, limit, skip_locked, owner, until)
        if (decision := _decide(session, row, owner, now, until, definitions)) is not None
    ]
    new = [d for d in decisions if d.occurrence_id is None]
    inserted = store.insert_occurrences(session, [(d.row.id, d.expected, d.repeat) for d in new], owner, now)
    for decision in new:
        decision.occurrence_id = inserted.get((decision.row.id, decision.expected))
    store.move_jobs_on(
        session,
        [
            {
                "job_id": d.row.id,
                "next_time": d.next_time,
                "repeat": d.repeat if not d.resumed else d.row.repeat_count,
                "run_requested_at": d.run_requested_at,
                "owner": owner if d.occurrence_id is not None else None,
            }
            for d in decisions
        ],
    )
    return [
        Claim(
            job_id=d.row.id,
            occurrence_id=d.occurrence_id,
            version=d.row.version,
            expected_time=d.expected,
            repeat_count=d.repeat,
            skipped=d.skipped,
            properties=d.properties,
            job_name=d.row.name,
            collection_name=d.row.collection_name,
            region=d.row.location,
            sku=d.row.sku,
            collection_properties=d.row.collection_properties,
            manual=d.manual,
            resumed=d.resumed,
            executions=d.row.execution_count,
            next_time=d.next_time,
            origin=d.row.series_origin,
        )
        for d in decisions
        if d.occurrence_id is not None  # else: already recorded (fired) by another dispatcher
    ]


def _decide(
    session: Session, row: Any, owner: str, now: datetime, until: datetime, definitions: Definitions
) -> _Decision | None:
    """Which occurrence the job runs now, and where its schedule moves; None when it has nothing to run."""
    properties = definitions.get(row.id, row.version, row.definition)
    if row.lease_owner is not None:  # its dispatcher's heartbeat stopped: take over what it left running
        occurrence = store.take_over_occurrence(session, row.id, owner, now)
        if occurrence is None:
            store.move_jobs_on(
                session,
                [
                    {
                        "job_id": row.id,
                        "next_time": row.next_execution_time,
                        "repeat": row.repeat_count,
                        "run_requested_at": row.run_requested_at,
                        "owner": None,
                    }
                ],
            )
            return None
        occurrence_id, expected, repeat = occurrence
        # A scheduled occurrence is an instant of the series (next_execution_time has moved past it
        # already); a POST .../run is not.
        manual = rec.next_occurrence_after(properties.timing(), row.series_origin, expected - _TINY) != expected
        return _Decision(
            row,
            properties,
            expected,
            repeat,
            Skipped(),
            manual,
            row.next_execution_time,
            row.run_requested_at,
            occurrence_id,
            resumed=True,
        )
    if (
        row.next_execution_time is not None
        and row.next_execution_time <= until
        and row.state == "Enabled"
        and row.collection_state == "Enabled"
    ):
        moment = max(now, row.next_execution_time)  # claimed ahead: the occurrence due then
        due = due_occurrence(properties.timing(), row.series_origin, row.next_execution_time, moment)
        return _Decision(
            row, properties, due.expected, row.repeat_count + 1, due.skipped, False, due.following, row.run_requested_at
        )
    if row.run_requested_at is not None:
        return _Decision(
            row, properties, row.run_requested_at, row.repeat_count + 1, Skipped(), True, row.next_execution_time, None
        )
    return None


def abandon_occurrences(session: Session, claims: Sequence[Claim], owner: str) -> None:
    """Give back occurrences claimed ahead that will not fire (the job changed before they were due, or the
    dispatcher is stopping): as if they had never been claimed — the occurrence record goes, the lease is
    released and, when the definition is unchanged, the job is due at that instant again."""
    if not claims:
        return
    store.delete_occurrences(session, [c.occurrence_id for c in claims])
    jobs = store.jobs_to_restore(session, [c.job_id for c in claims])
    restores = []
    for claim in claims:
        job = jobs.get(claim.job_id)
        if job is None:
            continue
        values: dict[str, Any] = {
            "job_id": claim.job_id,
            "owner": None if job.lease_owner == owner else job.lease_owner,
            "next_time": job.next_execution_time,
            "repeat": job.repeat_count,
            "run_requested_at": job.run_requested_at,
        }
        if claim.manual:
            values["run_requested_at"] = job.run_requested_at or claim.expected_time
        elif job.version == claim.version and not claim.resumed:
            values["next_time"] = claim.expected_time
            values["repeat"] = claim.repeat_count - 1
        restores.append(values)
    store.move_jobs_on(session, restores)


@dataclass(frozen=True)
class Finish:
    postponed: Skipped  # instants that came due while this occurrence was busy
    state: str | None  # the job's new state, when it changed
    next_time: datetime | None  # when the job is next due (None: not scheduled)


@dataclass(slots=True)
class Completion:
    """The end of one occurrence, written with others in one batch (see complete_occurrences)."""

    claim: Claim
    attempt: dict[str, Any] | None  # the last attempt's history entry, not yet recorded
    counts_as_execution: bool  # the attempt was the main action's (moves executionCount)
    failed: bool
    count_fault: bool  # add one to faultedCount
    faulted: bool
    max_occurrences: int | None


def complete_occurrences(
    session: Session, completions: Sequence[Completion], owner: str, now: datetime, history_max: int
) -> list[Finish | None]:
    """For each completion: record its last attempt, close the occurrence, skip what came due meanwhile,
    move the job to Completed or Faulted when its series is over, and release the lease — one read and a
    few executemany statements for the whole batch. None for a job deleted meanwhile."""
    jobs = store.jobs_to_finish(session, [c.claim.job_id for c in completions])
    store.add_history(
        session,
        [(c.claim.job_id, c.attempt) for c in completions if c.attempt is not None and c.claim.job_id in jobs],
    )
    store.close_occurrences(
        session, [(c.claim.occurrence_id, "Faulted" if c.faulted else "Completed") for c in completions], now
    )
    results: list[Finish | None] = []
    moved: list[dict[str, Any]] = []
    released: list[dict[str, Any]] = []
    for completion in completions:
        job = jobs.get(completion.claim.job_id)
        if job is None:
            results.append(None)
            continue
        finish, values = _finish(completion, job, owner, now)
        attempt = completion.attempt if completion.counts_as_execution else None
        values["b_exec"] = int(attempt is not None)
        values["b_fail"] = int(attempt is not None and completion.failed)
        values["b_fault"] = int(completion.count_fault)
        values["b_last"] = attempt["start_time"] if attempt is not None else None
        (moved if "next_time" in values else released).append(values)
        results.append(finish)
        if completion.claim.executions + 1 >= history_max // 2:  # only long-lived jobs can outgrow it
            store.prune_job_history(session, completion.claim.job_id, history_max)
    store.finish_jobs(session, moved, released)
    return results


def _finish(completion: Completion, job: Any, owner: str, now: datetime) -> tuple[Finish, dict[str, Any]]:
    """The job's new schedule and state after the occurrence (computed from the claim: the job's schedule is
    what the claim left, unless an API write changed its definition meanwhile — then that write stands)."""
    claim = completion.claim
    values: dict[str, Any] = {"job_id": claim.job_id, "owner": None if job.lease_owner == owner else job.lease_owner}
    if job.version != claim.version or job.state != "Enabled":
        return Finish(Skipped(), None, None), values
    postponed, next_time = after_busy(claim.properties.timing(), claim.origin, claim.next_time, now)
    if completion.max_occurrences is not None and claim.repeat_count >= completion.max_occurrences:
        next_time = None
    new_state = None
    values["next_time"] = next_time
    values["state"] = job.state
    values["finished_at"] = None
    if next_time is None and not claim.manual:
        new_state = "Faulted" if (claim.properties.recurrence is None and completion.faulted) else "Completed"
        values["state"] = new_state
        values["finished_at"] = now
    return Finish(postponed, new_state, next_time), values
