"""Claiming due jobs (one transaction: lease + occurrence record) and finishing occurrences."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.orm import Session

from scheduler_emulator.domain import recurrence as rec
from scheduler_emulator.domain.due import Skipped, after_busy, due_occurrence
from scheduler_emulator.schemas.job import JobDefinitionIn, JobProperties
from scheduler_emulator.store import dispatching as store
from scheduler_emulator.store.models import JobCollectionRow, JobRow, OccurrenceRow

_TINY = timedelta(microseconds=1)


@dataclass(frozen=True)
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


@dataclass
class _Decision:
    job: JobRow
    collection: JobCollectionRow
    properties: JobProperties
    expected: datetime
    repeat: int
    skipped: Skipped
    manual: bool
    occurrence_id: int | None = None  # set for a resumed occurrence; new ones get theirs on insert
    resumed: bool = False


def claim_due_jobs(session: Session, owner: str, now: datetime, lease: timedelta, limit: int,
                   skip_locked: bool) -> list[Claim]:
    """Lease up to ``limit`` due jobs and record the occurrence each will run (one INSERT for the batch,
    which the unique (job, expected time) key turns into a no-op for an occurrence recorded before).
    The caller commits before firing."""
    decisions = [
        decision
        for job, collection in store.due_jobs(session, now, limit, skip_locked, owner)
        if (decision := _decide(session, job, collection, owner, now)) is not None
    ]
    new = [d for d in decisions if d.occurrence_id is None]
    inserted = store.insert_occurrences(session, [(d.job.id, d.expected, d.repeat) for d in new], owner, now)
    for decision in new:
        decision.occurrence_id = inserted.get((decision.job.id, decision.expected))
    claims = []
    for d in decisions:
        if d.occurrence_id is None:
            continue  # already recorded (fired) by another dispatcher
        d.job.lease_owner = owner
        claims.append(Claim(
            job_id=d.job.id,
            occurrence_id=d.occurrence_id,
            version=d.job.version,
            expected_time=d.expected,
            repeat_count=d.repeat,
            skipped=d.skipped,
            properties=d.properties,
            job_name=d.job.name,
            collection_name=d.collection.name,
            region=d.collection.location,
            sku=d.collection.sku,
            collection_properties=d.collection.properties,
            manual=d.manual,
            resumed=d.resumed,
        ))
    session.flush()
    return claims


def _decide(session: Session, job: JobRow, collection: JobCollectionRow, owner: str,
            now: datetime) -> _Decision | None:
    """Which occurrence the job runs now, moving its schedule on; None when it has nothing to run."""
    properties = JobDefinitionIn.model_validate({"properties": job.definition}).properties
    if job.lease_owner is not None:  # its dispatcher stopped renewing: take over what it left running
        occurrence = store.unfinished_occurrence(session, job.id)
        if occurrence is None:
            job.lease_owner = None
            return None
        occurrence.owner = owner
        occurrence.claimed_at = now
        expected = occurrence.expected_time
        # A scheduled occurrence is an instant of the series (next_execution_time has moved past it
        # already); a POST .../run is not.
        manual = rec.next_occurrence_after(properties.timing(), job.series_origin, expected - _TINY) != expected
        return _Decision(job, collection, properties, expected, occurrence.repeat_count, Skipped(), manual,
                         occurrence.id, resumed=True)
    if job.next_execution_time is not None and job.next_execution_time <= now and job.state == "Enabled" \
            and collection.state == "Enabled":
        due = due_occurrence(properties.timing(), job.series_origin, job.next_execution_time, now)
        job.next_execution_time = due.following
        job.repeat_count += 1
        return _Decision(job, collection, properties, due.expected, job.repeat_count, due.skipped, False)
    if job.run_requested_at is not None:
        expected = job.run_requested_at
        job.run_requested_at = None
        job.repeat_count += 1
        return _Decision(job, collection, properties, expected, job.repeat_count, Skipped(), True)
    return None


@dataclass(frozen=True)
class Finish:
    postponed: Skipped  # instants that came due while this occurrence was busy
    state: str | None  # the job's new state, when it changed


def finish_occurrence(session: Session, claim: Claim, owner: str, now: datetime, faulted: bool,
                      max_occurrences: int | None) -> Finish | None:
    """Close the occurrence, skip what came due meanwhile, move the job to Completed or Faulted when its
    series is over, and release the lease. None when the job was deleted meanwhile."""
    job = session.get(JobRow, claim.job_id)
    occurrence = session.get(OccurrenceRow, claim.occurrence_id)
    if occurrence is not None:
        occurrence.finished_at = now
        occurrence.outcome = "Faulted" if faulted else "Completed"
    if job is None:
        return None
    postponed = Skipped()
    new_state = None
    if job.lease_owner == owner:
        job.lease_owner = None
    if job.version == claim.version and job.state == "Enabled":  # the definition did not change meanwhile
        postponed, job.next_execution_time = after_busy(
            claim.properties.timing(), job.series_origin, job.next_execution_time, now
        )
        one_time = claim.properties.recurrence is None
        if max_occurrences is not None and job.repeat_count >= max_occurrences:
            job.next_execution_time = None
        if job.next_execution_time is None and not claim.manual:
            new_state = "Faulted" if (one_time and faulted) else "Completed"
            job.state = new_state
            job.finished_at = now
    return Finish(postponed, new_state)
