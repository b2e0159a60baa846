"""The dashboard's overview and search queries (docs/reference/test-support.md#the-dashboard-and-its-api), and the
backlog /metrics reports: each is one SQL statement over every collection, aggregated or limited in the database (never
a query per job), on SQLite and PostgreSQL alike."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import ColumnElement, case, func, or_, select
from sqlalchemy.orm import Session

from scheduler_emulator.store.models import JobCollectionRow, JobHistoryRow, JobRow, OccurrenceRow

MAIN_ACTION = "MainAction"
ATTEMPT_STATUSES = ("Completed", "Failed")  # a try of the main action; Postponed entries are skips, not tries
# Where a job's target host is written, by action type (the definition as the client sent it; secrets are
# sealed in other keys only).
_TARGET_PATHS = (
    ("action", "request", "uri"),
    ("action", "queueMessage", "storageAccount"),
    ("action", "serviceBusQueueMessage", "namespace"),
    ("action", "serviceBusTopicMessage", "namespace"),
)


def counts(session: Session) -> tuple[int, dict[str, int]]:
    """How many collections there are, and how many jobs are in each state (as stored)."""
    collections = session.scalar(select(func.count()).select_from(JobCollectionRow)) or 0
    states = session.execute(select(JobRow.state, func.count()).group_by(JobRow.state)).all()
    return collections, {state: count for state, count in states}


def count_due(session: Session, now: datetime) -> int:
    """How many jobs are due (scheduled at or before ``now``, enabled) and not claimed yet."""
    return (
        session.scalar(
            select(func.count())
            .select_from(JobRow)
            .join(JobCollectionRow, JobRow.collection_id == JobCollectionRow.id)
            .where(
                JobRow.lease_owner.is_(None),
                JobRow.state == "Enabled",
                JobCollectionRow.state == "Enabled",
                JobRow.next_execution_time <= now,
            )
        )
        or 0
    )


def history_mark(session: Session) -> tuple[int, int]:
    """How many history entries there are, and the highest id (0 when none): an index-only count and the end
    of the primary key, cheap beside reading the entries."""
    # Two statements: SQLite counts a table fast only when the count is alone in its statement.
    count = session.scalar(select(func.count()).select_from(JobHistoryRow))
    top = session.scalar(select(func.max(JobHistoryRow.id)))
    return int(count or 0), int(top or 0)


def entries_between(session: Session, after_id: int, up_to_id: int) -> int:
    """How many history entries have an id in ``(after_id, up_to_id]`` (a primary-key range)."""
    query = select(func.count()).where(JobHistoryRow.id > after_id, JobHistoryRow.id <= up_to_id)
    return int(session.scalar(query) or 0)


def attempts_by_bucket(
    session: Session, edges: Sequence[datetime], *, after_id: int = 0, up_to_id: int | None = None
) -> dict[tuple[int, str], int]:
    """Main-action tries that started in ``[edges[i], edges[i+1])``, by ``(i, status)`` for each status of
    ATTEMPT_STATUSES (absent: none), among the entries with an id in ``(after_id, up_to_id]`` (default: all).
    ``edges`` ascend; one grouped statement (a CASE picks the bucket)."""
    if len(edges) < 2:
        return {}
    started = JobHistoryRow.start_time
    bucket = case(*((started < edge, index) for index, edge in enumerate(edges[1:-1])), else_=len(edges) - 2)
    query = (
        select(bucket.label("bucket"), JobHistoryRow.status, func.count())
        .where(
            started >= edges[0],
            started < edges[-1],
            JobHistoryRow.action_name == MAIN_ACTION,
            JobHistoryRow.status.in_(ATTEMPT_STATUSES),
            JobHistoryRow.id > after_id,
        )
        .group_by(bucket, JobHistoryRow.status)
    )
    if up_to_id is not None:
        query = query.where(JobHistoryRow.id <= up_to_id)
    return {(int(index), status): count for index, status, count in session.execute(query).all()}


def next_runs(session: Session, limit: int) -> list[tuple[JobRow, JobCollectionRow]]:
    """The ``limit`` soonest scheduled runs of enabled jobs in enabled collections with no retry pending (their
    next run is that retry: pending_retries), soonest first (walks the due-time index)."""
    retrying = select(OccurrenceRow.id).where(OccurrenceRow.job_id == JobRow.id, OccurrenceRow.retry_at.is_not(None))
    query = (
        select(JobRow, JobCollectionRow)
        .join(JobCollectionRow, JobRow.collection_id == JobCollectionRow.id)
        .where(
            JobRow.next_execution_time.is_not(None),
            JobRow.state == "Enabled",
            JobCollectionRow.state == "Enabled",
            ~retrying.exists(),
        )
        .order_by(JobRow.next_execution_time, JobRow.id)
        .limit(limit)
    )
    return [(job, collection) for job, collection in session.execute(query).all()]


def pending_retries(session: Session, limit: int) -> list[tuple[JobRow, JobCollectionRow, datetime]]:
    """The ``limit`` soonest retries pending, soonest first: (job, its collection, when the retry is due); walks
    the index of pending retries (an occurrence's end clears its retry's time)."""
    query = (
        select(JobRow, JobCollectionRow, OccurrenceRow.retry_at)
        .join(JobRow, OccurrenceRow.job_id == JobRow.id)
        .join(JobCollectionRow, JobRow.collection_id == JobCollectionRow.id)
        .where(OccurrenceRow.retry_at.is_not(None))
        .order_by(OccurrenceRow.retry_at, JobRow.id)
        .limit(limit)
    )
    return [(job, collection, due) for job, collection, due in session.execute(query).all() if due is not None]


def retries_of(session: Session, job_ids: Sequence[int]) -> dict[int, datetime]:
    """When the retry pending for each of these jobs is due, by job id (jobs with none are absent)."""
    if not job_ids:
        return {}
    query = select(OccurrenceRow.job_id, func.min(OccurrenceRow.retry_at)).where(
        OccurrenceRow.job_id.in_(list(job_ids)), OccurrenceRow.retry_at.is_not(None)
    )
    rows = session.execute(query.group_by(OccurrenceRow.job_id)).all()
    return {job_id: due for job_id, due in rows if due is not None}


def failing_jobs(session: Session, limit: int) -> list[tuple[JobRow, JobCollectionRow, JobHistoryRow | None]]:
    """Jobs failing now: Faulted, or whose newest main-action try failed; newest failure first, at most
    ``limit``. Entries that are not tries (Postponed, the error action's) never hide that try's outcome. Only
    jobs that ever failed are looked at (``failure_count``), each newest try found in the same statement by
    walking the (job_id, id) index back from the job's newest entry."""
    newest = (
        select(func.max(JobHistoryRow.id))
        .where(
            JobHistoryRow.job_id == JobRow.id,
            JobHistoryRow.action_name == MAIN_ACTION,
            JobHistoryRow.status.in_(ATTEMPT_STATUSES),
        )
        .correlate(JobRow)
        .scalar_subquery()
    )
    query = (
        select(JobRow, JobCollectionRow, JobHistoryRow)
        .join(JobCollectionRow, JobRow.collection_id == JobCollectionRow.id)
        .outerjoin(JobHistoryRow, JobHistoryRow.id == newest)
        .where(
            or_(JobRow.failure_count > 0, JobRow.state == "Faulted"),
            or_(JobRow.state == "Faulted", JobHistoryRow.status == "Failed"),
        )
        .order_by(func.coalesce(JobHistoryRow.start_time, JobRow.updated_at).desc(), JobRow.id)
        .limit(limit)
    )
    return [(job, collection, last) for job, collection, last in session.execute(query).all()]


def search_jobs(
    session: Session,
    *,
    text: str | None = None,
    state: str | None = None,
    action_type: str | None = None,
    host: str | None = None,
    within: Sequence[int] | None = None,
    limit: int,
) -> list[tuple[JobRow, JobCollectionRow]]:
    """Jobs of every collection (or of the collections ``within`` lists, by id) matching all the given filters,
    case-insensitively: ``text`` in the job's, collection's or resource group's name, ``state`` equal,
    ``action_type`` equal, ``host`` within the target (URI, storage account or Service Bus namespace). By
    subscription, group, collection and job name; at most ``limit``."""
    query = select(JobRow, JobCollectionRow).join(JobCollectionRow, JobRow.collection_id == JobCollectionRow.id)
    if within is not None:
        query = query.where(JobRow.collection_id.in_(list(within)))
    if text:
        needle = text.lower()
        query = query.where(
            or_(
                JobRow.name_key.contains(needle, autoescape=True),
                JobCollectionRow.name_key.contains(needle, autoescape=True),
                JobCollectionRow.resource_group_key.contains(needle, autoescape=True),
            )
        )
    if state:
        query = query.where(func.lower(JobRow.state) == state.lower())
    if action_type:
        query = query.where(func.lower(_definition_text(("action", "type"))) == action_type.lower())
    if host:
        needle = host.lower()
        query = query.where(
            or_(*(func.lower(_definition_text(path)).contains(needle, autoescape=True) for path in _TARGET_PATHS))
        )
    query = query.order_by(
        JobCollectionRow.subscription_key,
        JobCollectionRow.resource_group_key,
        JobCollectionRow.name_key,
        JobRow.name_key,
    )
    return [(job, collection) for job, collection in session.execute(query.limit(limit)).all()]


def _definition_text(path: tuple[str, ...]) -> ColumnElement[str]:
    """The definition's value at ``path`` as text (JSON_EXTRACT on SQLite, ``#>>`` on PostgreSQL)."""
    value: ColumnElement[str] = JobRow.definition[path].as_string()
    return value
