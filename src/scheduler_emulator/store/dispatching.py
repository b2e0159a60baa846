"""The dispatcher's queries: find and lease due jobs, record attempts, release, clean up.

Claims follow the durable-scheduler pattern: select due rows (``FOR UPDATE SKIP LOCKED`` where the
database has it), lease them and insert their occurrence under a unique (job, expected time) key, commit —
and only then does the caller make the network call. No row lock is held across network I/O.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import and_, delete, func, select, text, update
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session

from scheduler_emulator.store.models import DispatcherRow, JobCollectionRow, JobHistoryRow, JobRow, OccurrenceRow

FINAL_STATES = ("Completed", "Faulted")


def due_jobs(session: Session, now: datetime, limit: int, skip_locked: bool,
             owner: str) -> list[tuple[JobRow, JobCollectionRow]]:
    """Jobs to claim now, earliest first: leased by another dispatcher that stopped renewing, asked to run,
    or due and enabled. Three small index-backed queries rather than one OR that would scan every job.
    Our own expired leases are not taken over: those occurrences are still running here (the database may
    have been away while we tried to renew)."""
    alive = select(DispatcherRow.owner).where(DispatcherRow.owner == JobRow.lease_owner, DispatcherRow.expires_at >= now)
    conditions = (
        and_(JobRow.lease_owner.is_not(None), JobRow.lease_owner != owner, ~alive.exists()),
        and_(JobRow.run_requested_at.is_not(None), JobRow.lease_owner.is_(None)),
        and_(JobRow.next_execution_time <= now, JobRow.lease_owner.is_(None), JobRow.state == "Enabled",
             JobCollectionRow.state == "Enabled"),
    )
    order = (JobRow.id, JobRow.run_requested_at, JobRow.next_execution_time)
    found: dict[int, tuple[JobRow, JobCollectionRow]] = {}
    for condition, column in zip(conditions, order, strict=True):
        if len(found) >= limit:
            break
        query = (
            select(JobRow, JobCollectionRow)
            .join(JobCollectionRow, JobRow.collection_id == JobCollectionRow.id)
            .where(condition)
            .order_by(column)
            .limit(limit - len(found))
        )
        if skip_locked:
            query = query.with_for_update(of=JobRow, skip_locked=True)
        for job, collection in session.execute(query).tuples():
            found.setdefault(job.id, (job, collection))
    return list(found.values())


WAKE_CHANNEL = "scheduler_emulator_wake"


def announce_change(session: Session) -> None:
    """Tell every dispatcher process sharing this PostgreSQL database to look for due work (delivered at
    commit). SQLite has one process, whose dispatcher is woken in-process instead."""
    if session.get_bind().dialect.name == "postgresql":
        session.execute(text(f"NOTIFY {WAKE_CHANNEL}"))


def count_due(session: Session, now: datetime) -> int:
    """How many jobs are due (scheduled at or before ``now``, enabled) and not claimed yet."""
    return session.scalar(
        select(func.count()).select_from(JobRow)
        .join(JobCollectionRow, JobRow.collection_id == JobCollectionRow.id)
        .where(JobRow.lease_owner.is_(None), JobRow.state == "Enabled", JobCollectionRow.state == "Enabled",
               JobRow.next_execution_time <= now)
    ) or 0


def next_wake_time(session: Session, owner: str, now: datetime) -> datetime | None:
    """The earliest instant at which a job becomes claimable (a scheduled time or a lease expiry)."""
    scheduled = session.scalar(
        select(func.min(JobRow.next_execution_time))
        .join(JobCollectionRow, JobRow.collection_id == JobCollectionRow.id)
        .where(JobRow.lease_owner.is_(None), JobRow.state == "Enabled", JobCollectionRow.state == "Enabled")
    )
    requested = session.scalar(
        select(func.min(JobRow.run_requested_at)).where(JobRow.lease_owner.is_(None))
    )
    # Another dispatcher's heartbeat running out is when its leases can be taken over.
    lease = session.scalar(
        select(func.min(DispatcherRow.expires_at)).where(DispatcherRow.owner != owner, DispatcherRow.expires_at > now)
    )
    times = [t for t in (scheduled, requested, lease) if t is not None]
    return min(times) if times else None


def unfinished_occurrence(session: Session, job_id: int) -> OccurrenceRow | None:
    """The occurrence a stopped dispatcher left running for this job, if any."""
    return session.scalar(
        select(OccurrenceRow)
        .where(OccurrenceRow.job_id == job_id, OccurrenceRow.finished_at.is_(None))
        .order_by(OccurrenceRow.id.desc())
        .limit(1)
    )


def insert_occurrences(session: Session, occurrences: list[tuple[int, datetime, int]], owner: str,
                       now: datetime) -> dict[tuple[int, datetime], int]:
    """Record (job id, expected time, repeat count) occurrences in one statement; one already recorded is
    skipped by the unique key. Returns the new ones' ids by (job id, expected time)."""
    if not occurrences:
        return {}
    dialect = session.get_bind().dialect.name
    insert = postgresql_insert if dialect == "postgresql" else sqlite_insert
    statement = (
        insert(OccurrenceRow)
        .values([
            {"job_id": job_id, "expected_time": expected, "repeat_count": repeat, "owner": owner,
             "first_owner": owner, "claimed_at": now}
            for job_id, expected, repeat in occurrences
        ])
        .on_conflict_do_nothing(index_elements=["job_id", "expected_time"])
        .returning(OccurrenceRow.id, OccurrenceRow.job_id, OccurrenceRow.expected_time)
    )
    return {(job_id, expected): row_id for row_id, job_id, expected in session.execute(statement).tuples()}


def heartbeat(session: Session, owner: str, now: datetime, until: datetime) -> None:
    """Keep ``owner`` registered as alive until ``until``: this one-row UPDATE renews every lease it holds."""
    result = session.execute(update(DispatcherRow).where(DispatcherRow.owner == owner).values(expires_at=until))
    if not result.rowcount:  # type: ignore[attr-defined]
        session.add(DispatcherRow(owner=owner, started_at=now, expires_at=until))


def record_attempt(
    session: Session,
    job_id: int,
    entry: JobHistoryRow,
    counts_as_execution: bool,
    failed: bool,
) -> bool:
    """Store one attempt's history entry and move the job's counters; False when the job was deleted."""
    values: dict[str, object] = {}
    if counts_as_execution:
        values["execution_count"] = JobRow.execution_count + 1
        values["last_execution_time"] = entry.start_time
        if failed:
            values["failure_count"] = JobRow.failure_count + 1
    if values:
        result = session.execute(update(JobRow).where(JobRow.id == job_id).values(**values))
        if not result.rowcount:  # type: ignore[attr-defined]
            return False
    elif session.get(JobRow, job_id) is None:
        return False
    entry.job_id = job_id
    session.add(entry)
    return True


def add_faulted(session: Session, job_id: int) -> None:
    session.execute(update(JobRow).where(JobRow.id == job_id).values(faulted_count=JobRow.faulted_count + 1))


def sign_off(session: Session, owner: str) -> None:
    """Forget ``owner``: the leases it still holds can be taken over at once."""
    session.execute(delete(DispatcherRow).where(DispatcherRow.owner == owner))


def prune_history(session: Session, max_entries: int, older_than: datetime) -> int:
    """Drop history entries past the newest ``max_entries`` of each job, and those older than ``older_than``."""
    removed = session.execute(delete(JobHistoryRow).where(JobHistoryRow.start_time < older_than)).rowcount  # type: ignore[attr-defined]
    crowded = session.scalars(
        select(JobHistoryRow.job_id).group_by(JobHistoryRow.job_id).having(func.count() > max_entries)
    ).all()
    for job_id in crowded:
        removed += prune_job_history(session, job_id, max_entries)
    return int(removed)


def prune_job_history(session: Session, job_id: int, max_entries: int) -> int:
    """Keep only the newest ``max_entries`` history entries of one job."""
    boundary = session.scalar(
        select(JobHistoryRow.id).where(JobHistoryRow.job_id == job_id)
        .order_by(JobHistoryRow.id.desc()).offset(max_entries - 1).limit(1)
    )
    if boundary is None:
        return 0
    result = session.execute(delete(JobHistoryRow).where(JobHistoryRow.job_id == job_id, JobHistoryRow.id < boundary))
    return int(result.rowcount)  # type: ignore[attr-defined]


def prune_finished(session: Session, finished_before: datetime, occurrences_before: datetime) -> int:
    """Delete Completed/Faulted jobs that finished before ``finished_before`` (with their history), and
    finished occurrence records claimed before ``occurrences_before``."""
    session.execute(
        delete(OccurrenceRow).where(OccurrenceRow.finished_at.is_not(None), OccurrenceRow.claimed_at < occurrences_before)
    )
    session.execute(delete(DispatcherRow).where(
        DispatcherRow.expires_at < occurrences_before,
        ~select(JobRow.id).where(JobRow.lease_owner == DispatcherRow.owner).exists(),
    ))
    old = select(JobRow.id).where(JobRow.state.in_(FINAL_STATES), JobRow.finished_at < finished_before)
    ids = list(session.scalars(old))
    if not ids:
        return 0
    session.execute(delete(JobHistoryRow).where(JobHistoryRow.job_id.in_(ids)))
    session.execute(delete(OccurrenceRow).where(OccurrenceRow.job_id.in_(ids)))
    session.execute(delete(JobRow).where(JobRow.id.in_(ids)))
    return len(ids)
