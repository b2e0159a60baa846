"""The dispatcher's queries, one at a time: find due jobs, take an abandoned occurrence over, count attempts,
heartbeats and leases, wake-up times, clean up. Written in SQLAlchemy Core over the tables; the statements run
for a whole batch are store/dispatch_batches.py's.

Claims follow the durable-scheduler pattern: select due rows (``FOR UPDATE SKIP LOCKED`` where the
database has it), lease them and insert their occurrence under a unique (job, expected time) key, commit —
and only then does the caller make the network call. No row lock is held across network I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Text, and_, delete, func, insert, select, text, update
from sqlalchemy import cast as sql_cast
from sqlalchemy.orm import Session

from scheduler_emulator.domain.states import FINAL_STATES, JobState
from scheduler_emulator.store.dispatch_records import AttemptRecord
from scheduler_emulator.store.models import COLLECTIONS, DISPATCHERS, HISTORY, JOBS, OCCURRENCES

_CLAIM_COLUMNS = (
    JOBS.c.id,
    JOBS.c.name,
    JOBS.c.definition,
    JOBS.c.state,
    JOBS.c.version,
    JOBS.c.series_origin,
    JOBS.c.next_execution_time,
    JOBS.c.run_requested_at,
    JOBS.c.repeat_count,
    JOBS.c.lease_owner,
    JOBS.c.execution_count,
    COLLECTIONS.c.name.label("collection_name"),
    COLLECTIONS.c.location,
    COLLECTIONS.c.sku,
    # As text: every job of a collection repeats it, so the caller decodes each distinct one once per claim.
    sql_cast(COLLECTIONS.c.properties, Text()).label("collection_properties"),
    COLLECTIONS.c.state.label("collection_state"),
)


def due_jobs(
    session: Session,
    now: datetime,
    limit: int,
    *,
    owner: str,
    skip_locked: bool,
    until: datetime | None = None,
    alive_at: datetime | None = None,
    take_over: bool = True,
) -> list[Any]:
    """Rows of the jobs to claim now, earliest first: leased by a dispatcher whose heartbeat stopped (unless
    ``take_over`` is False), asked to run, or enabled and due by ``until`` (default: now). Three small
    index-backed queries rather than one OR that would scan every job. Our own leases are never "abandoned":
    those occurrences are still running here. Heartbeats are compared with ``alive_at`` (real time; default
    ``now``)."""
    alive = select(DISPATCHERS.c.owner).where(
        DISPATCHERS.c.owner == JOBS.c.lease_owner, DISPATCHERS.c.expires_at >= (alive_at or now)
    )
    conditions = (
        (and_(JOBS.c.lease_owner.is_not(None), JOBS.c.lease_owner != owner, ~alive.exists()), JOBS.c.lease_owner),
        (and_(JOBS.c.run_requested_at.is_not(None), JOBS.c.lease_owner.is_(None)), JOBS.c.run_requested_at),
        (
            and_(
                JOBS.c.next_execution_time <= (until or now),
                JOBS.c.lease_owner.is_(None),
                JOBS.c.state == JobState.Enabled,
                COLLECTIONS.c.state == JobState.Enabled,
            ),
            JOBS.c.next_execution_time,
        ),
    )
    found: dict[int, Any] = {}
    for condition, order in conditions if take_over else conditions[1:]:
        if len(found) >= limit:
            break
        query = (
            select(*_CLAIM_COLUMNS)
            .join_from(JOBS, COLLECTIONS, JOBS.c.collection_id == COLLECTIONS.c.id)
            .where(condition)
            .order_by(order)
            .limit(limit - len(found))
        )
        if skip_locked:
            query = query.with_for_update(of=JOBS, skip_locked=True)
        for row in session.execute(query).all():  # one fetchall, not a fetchone per row
            found.setdefault(row.id, row)
    return list(found.values())


def take_over_occurrence(session: Session, job_id: int, owner: str, now: datetime) -> Any:
    """Make ``owner`` the runner of the occurrence a stopped dispatcher left unfinished for this job: its row
    (id, expected_time, repeat_count; how far it got: pending_action, attempts_made, retry_at; handed_back: its
    dispatcher signed off, rather than its heartbeat running out), or None when there is none."""
    signed_off = ~select(DISPATCHERS.c.owner).where(DISPATCHERS.c.owner == OCCURRENCES.c.owner).exists()
    row = session.execute(
        select(
            OCCURRENCES.c.id,
            OCCURRENCES.c.expected_time,
            OCCURRENCES.c.repeat_count,
            OCCURRENCES.c.pending_action,
            OCCURRENCES.c.attempts_made,
            OCCURRENCES.c.retry_at,
            signed_off.label("handed_back"),
        )
        .where(OCCURRENCES.c.job_id == job_id, OCCURRENCES.c.finished_at.is_(None))
        .order_by(OCCURRENCES.c.id.desc())
        .limit(1)
    ).first()
    if row is None:
        return None
    session.execute(update(OCCURRENCES).where(OCCURRENCES.c.id == row.id).values(owner=owner, claimed_at=now))
    return row


def delete_occurrences(session: Session, occurrence_ids: list[int]) -> None:
    if occurrence_ids:
        session.execute(delete(OCCURRENCES).where(OCCURRENCES.c.id.in_(occurrence_ids)))


def still_current(session: Session, job_id: int) -> Any:
    """The job's version and states (its own, its collection's), or None when it is gone."""
    return session.execute(
        select(JOBS.c.version, JOBS.c.state, COLLECTIONS.c.state.label("collection_state"))
        .join_from(JOBS, COLLECTIONS, JOBS.c.collection_id == COLLECTIONS.c.id)
        .where(JOBS.c.id == job_id)
    ).first()


def next_due_time(session: Session) -> datetime | None:
    """The earliest next execution time of an enabled, unleased job in an enabled collection, or pending run
    request (no lease considered)."""
    times = [t for t in (_earliest_scheduled(session), _earliest_request(session)) if t is not None]
    return min(times) if times else None


def _earliest_scheduled(session: Session) -> datetime | None:
    # ORDER BY … LIMIT 1 rather than min(): both databases then walk the index and stop at the first match.
    return session.scalar(
        select(JOBS.c.next_execution_time)
        .join_from(JOBS, COLLECTIONS, JOBS.c.collection_id == COLLECTIONS.c.id)
        .where(
            JOBS.c.next_execution_time.is_not(None),
            JOBS.c.lease_owner.is_(None),
            JOBS.c.state == JobState.Enabled,
            COLLECTIONS.c.state == JobState.Enabled,
        )
        .order_by(JOBS.c.next_execution_time)
        .limit(1)
    )


def _earliest_request(session: Session) -> datetime | None:
    return session.scalar(
        select(JOBS.c.run_requested_at)
        .where(JOBS.c.run_requested_at.is_not(None), JOBS.c.lease_owner.is_(None))
        .order_by(JOBS.c.run_requested_at)
        .limit(1)
    )


def next_wake_time(session: Session, owner: str, now: datetime, ahead: timedelta = timedelta(0)) -> datetime | None:
    """The earliest instant at which a job becomes claimable (a scheduled time less ``ahead``, a run request,
    or a lease expiry)."""
    scheduled, requested = _earliest_scheduled(session), _earliest_request(session)
    # Another dispatcher's heartbeat running out is when its leases can be taken over.
    lease = session.scalar(
        select(func.min(DISPATCHERS.c.expires_at)).where(DISPATCHERS.c.owner != owner, DISPATCHERS.c.expires_at > now)
    )
    if scheduled is not None:
        scheduled -= ahead
    times = [t for t in (scheduled, requested, lease) if t is not None]
    return min(times) if times else None


def heartbeat(session: Session, owner: str, now: datetime, until: datetime) -> None:
    """Keep ``owner`` registered as alive until ``until``: this one-row UPDATE renews every lease it holds."""
    result = session.execute(update(DISPATCHERS).where(DISPATCHERS.c.owner == owner).values(expires_at=until))
    if not result.rowcount:  # type: ignore[attr-defined]
        session.execute(insert(DISPATCHERS).values(owner=owner, started_at=now, expires_at=until))


def held_occurrences(session: Session, owner: str, occurrence_ids: Sequence[int], *, lock: bool) -> set[int]:
    """Which of ``occurrence_ids`` ``owner`` still runs: the occurrence is unfinished and still its own, and so is
    its job's lease (another dispatcher that took the job over after ``owner``'s heartbeat ran out owns both).
    ``lock``: lock those jobs until the transaction ends (PostgreSQL), so that a takeover under way is waited for
    and seen rather than raced."""
    if not occurrence_ids:
        return set()
    query = (
        select(OCCURRENCES.c.id)
        .join_from(OCCURRENCES, JOBS, JOBS.c.id == OCCURRENCES.c.job_id)
        .where(
            OCCURRENCES.c.id.in_(list(occurrence_ids)),
            OCCURRENCES.c.owner == owner,
            OCCURRENCES.c.finished_at.is_(None),
            JOBS.c.lease_owner == owner,
        )
        .order_by(JOBS.c.id)
    )
    if lock:
        query = query.with_for_update(of=JOBS)
    return set(session.scalars(query))


def count_attempt(session: Session, attempt: AttemptRecord) -> bool:
    """Move the job's counters for one attempt (see AttemptRecord; its history entry is the batch writer's);
    False when the job was deleted."""
    values: dict[str, Any] = {}
    if attempt.add_fault:
        values["faulted_count"] = JOBS.c.faulted_count + 1
    if attempt.counts_as_execution:
        values["execution_count"] = JOBS.c.execution_count + 1
        values["last_execution_time"] = attempt.start_time
        if attempt.failed:
            values["failure_count"] = JOBS.c.failure_count + 1
    if values:
        return bool(session.execute(update(JOBS).where(JOBS.c.id == attempt.job_id).values(**values)).rowcount)  # type: ignore[attr-defined]
    return session.execute(select(JOBS.c.id).where(JOBS.c.id == attempt.job_id)).first() is not None


def sign_off(session: Session, owner: str) -> None:
    """Forget ``owner``: the leases it still holds can be taken over at once."""
    session.execute(delete(DISPATCHERS).where(DISPATCHERS.c.owner == owner))


def prune_history(session: Session, max_entries: int, older_than: datetime) -> int:
    """Drop history entries past the newest ``max_entries`` of each job, and those older than ``older_than``."""
    removed = session.execute(delete(HISTORY).where(HISTORY.c.start_time < older_than)).rowcount  # type: ignore[attr-defined]
    crowded = session.scalars(
        select(HISTORY.c.job_id).group_by(HISTORY.c.job_id).having(func.count() > max_entries)
    ).all()
    for job_id in crowded:
        removed += prune_job_history(session, job_id, max_entries)
    return int(removed)


def prune_job_history(session: Session, job_id: int, max_entries: int) -> int:
    """Keep only the newest ``max_entries`` history entries of one job."""
    boundary = session.scalar(
        select(HISTORY.c.id)
        .where(HISTORY.c.job_id == job_id)
        .order_by(HISTORY.c.id.desc())
        .offset(max_entries - 1)
        .limit(1)
    )
    if boundary is None:
        return 0
    result = session.execute(delete(HISTORY).where(HISTORY.c.job_id == job_id, HISTORY.c.id < boundary))
    return int(result.rowcount)  # type: ignore[attr-defined]


def prune_finished(
    session: Session, finished_before: datetime, occurrences_before: datetime, owners_before: datetime | None = None
) -> int:
    """Delete Completed/Faulted jobs that finished before ``finished_before`` (with their history), finished
    occurrence records claimed before ``occurrences_before``, and owners whose heartbeat (real time) ran out
    before ``owners_before`` (default ``occurrences_before``) holding no lease."""
    session.execute(
        delete(OCCURRENCES).where(OCCURRENCES.c.finished_at.is_not(None), OCCURRENCES.c.claimed_at < occurrences_before)
    )
    session.execute(
        delete(DISPATCHERS).where(
            DISPATCHERS.c.expires_at < (owners_before or occurrences_before),
            ~select(JOBS.c.id).where(JOBS.c.lease_owner == DISPATCHERS.c.owner).exists(),
        )
    )
    old = select(JOBS.c.id).where(JOBS.c.state.in_(FINAL_STATES), JOBS.c.finished_at < finished_before)
    ids = list(session.scalars(old))
    if not ids:
        return 0
    session.execute(delete(HISTORY).where(HISTORY.c.job_id.in_(ids)))
    session.execute(delete(OCCURRENCES).where(OCCURRENCES.c.job_id.in_(ids)))
    session.execute(delete(JOBS).where(JOBS.c.id.in_(ids)))
    return len(ids)


# The tables the dispatcher's queries read, whose planner statistics it keeps (PostgreSQL; see stale_statistics).
PLANNED_TABLES = (JOBS, COLLECTIONS, OCCURRENCES, HISTORY)
# A table is analyzed again once this many rows, plus this share of its rows, changed since it last was.
STATISTICS_FLOOR = 500
STATISTICS_SHARE = 0.2

_STALE_STATISTICS = text(
    "SELECT relname FROM pg_stat_user_tables WHERE schemaname = current_schema() AND relname = ANY(:tables) "
    "AND n_mod_since_analyze > 0 AND ((last_analyze IS NULL AND last_autoanalyze IS NULL) "
    "OR n_mod_since_analyze > :floor + :share * n_live_tup)"
)


def stale_statistics(session: Session) -> list[str]:
    """The PostgreSQL tables of PLANNED_TABLES never analyzed since rows changed, or changed by more than
    STATISTICS_FLOOR + STATISTICS_SHARE of their rows since. Autovacuum's own rule (50 rows + 10 %) never
    analyzes a table of a few dozen collections, and autovacuum may be off: a planner with no statistics joined
    every collection's jobs for each claim (bench/README.md#the-planners-statistics-and-the-indexes)."""
    names = [table.name for table in PLANNED_TABLES]
    parameters = {"tables": names, "floor": STATISTICS_FLOOR, "share": STATISTICS_SHARE}
    return [str(name) for name in session.execute(_STALE_STATISTICS, parameters).scalars()]


def analyze(session: Session, table_name: str) -> None:
    """ANALYZE one of PLANNED_TABLES (PostgreSQL): its planner statistics, from a sample of its rows."""
    (table,) = [table for table in PLANNED_TABLES if table.name == table_name]
    quoted = session.get_bind().dialect.identifier_preparer.quote(table.name)
    session.execute(text(f"ANALYZE {quoted}"))
