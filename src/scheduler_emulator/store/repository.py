"""The queries the API and the dispatcher run. Nothing else in the service issues SQL."""

from __future__ import annotations

from datetime import datetime
from functools import cache

from sqlalchemy import ColumnElement, Select, bindparam, delete, func, select, text
from sqlalchemy.orm import Session, aliased

from scheduler_emulator.store.models import (
    ClassicOperationRow,
    CloudServiceRow,
    EmulatorSettingRow,
    JobCollectionRow,
    JobHistoryRow,
    JobRow,
    OccurrenceRow,
)

FINAL_STATES = ("Completed", "Faulted")


def lock(session: Session, key: str) -> None:
    """Hold the write lock named ``key`` until the transaction ends (PostgreSQL advisory lock; SQLite already
    runs one session at a time), so that API writes checking limits before writing never interleave."""
    if session.get_bind().dialect.name == "postgresql":
        session.execute(text("SELECT pg_advisory_xact_lock(hashtext(:key))"), {"key": key})


# The statements nearly every request runs are built once, with bound parameters: building one costs more
# than executing it (SQLAlchemy constructs the clauses and then computes their cache key at every call).


def _named_collection() -> tuple[ColumnElement[bool], ...]:
    """The collection matching the bound names ``subscription``, ``resource_group`` and ``name`` (lowercased)."""
    return (
        JobCollectionRow.subscription_key == bindparam("subscription"),
        JobCollectionRow.resource_group_key == bindparam("resource_group"),
        JobCollectionRow.name_key == bindparam("name"),
    )


def _names(subscription: str, resource_group: str, name: str, job_name: str | None = None) -> dict[str, str]:
    """The bound parameters of the statements above: the names as their keys (lowercase)."""
    names = {"subscription": subscription.lower(), "resource_group": resource_group.lower(), "name": name.lower()}
    if job_name is not None:
        names["job"] = job_name.lower()
    return names


@cache
def _collection_by_names() -> Select[JobCollectionRow]:
    return select(JobCollectionRow).where(*_named_collection())


@cache
def _collection_and_job() -> Select[JobCollectionRow, JobRow]:
    """The named collection with its job named by the bound ``job`` (None when it has none)."""
    return (
        select(JobCollectionRow, JobRow)
        .outerjoin(JobRow, (JobRow.collection_id == JobCollectionRow.id) & (JobRow.name_key == bindparam("job")))
        .where(*_named_collection())
    )


@cache
def _collection_job_and_count() -> Select[JobCollectionRow, JobRow, int]:
    """As _collection_and_job, with the collection's job count."""
    counted = aliased(JobRow)
    count = select(func.count()).where(counted.collection_id == JobCollectionRow.id).scalar_subquery()
    return _collection_and_job().add_columns(count)


@cache
def _job_by_name() -> Select[JobRow]:
    return select(JobRow).where(JobRow.collection_id == bindparam("collection"), JobRow.name_key == bindparam("name"))


def find_collection(session: Session, subscription: str, resource_group: str, name: str) -> JobCollectionRow | None:
    """The collection, matching all three names case-insensitively."""
    return session.scalar(_collection_by_names(), _names(subscription, resource_group, name))


def list_collections(
    session: Session, subscription: str, resource_group: str | None, skip: int, limit: int
) -> list[JobCollectionRow]:
    """A page of a subscription's (or resource group's) collections, in a stable order."""
    query = select(JobCollectionRow).where(JobCollectionRow.subscription_key == subscription.lower())
    if resource_group is not None:
        query = query.where(JobCollectionRow.resource_group_key == resource_group.lower())
    return list(session.scalars(query.order_by(JobCollectionRow.id).offset(skip).limit(limit)))


def count_collections(session: Session, subscription: str, sku: str | None = None) -> int:
    query = (
        select(func.count())
        .select_from(JobCollectionRow)
        .where(JobCollectionRow.subscription_key == subscription.lower())
    )
    if sku is not None:
        query = query.where(JobCollectionRow.sku == sku)
    return session.scalar(query) or 0


def find_collection_and_job(
    session: Session, subscription: str, resource_group: str, name: str, job_name: str
) -> tuple[JobCollectionRow, JobRow | None, int] | None:
    """The collection (as find_collection), its job named ``job_name`` if any, and its job count, in one
    statement (what a job write needs to know; None when there is no such collection)."""
    row = session.execute(_collection_job_and_count(), _names(subscription, resource_group, name, job_name)).first()
    return None if row is None else (row[0], row[1], int(row[2]))


def find_collection_with_job(
    session: Session, subscription: str, resource_group: str, name: str, job_name: str
) -> tuple[JobCollectionRow, JobRow | None] | None:
    """The collection (as find_collection) and its job named ``job_name`` if any, in one statement (what a
    job read needs; None when there is no such collection)."""
    row = session.execute(_collection_and_job(), _names(subscription, resource_group, name, job_name)).first()
    return None if row is None else (row[0], row[1])


def find_job(session: Session, collection: JobCollectionRow, name: str) -> JobRow | None:
    return session.scalar(_job_by_name(), {"collection": collection.id, "name": name.lower()})


def list_jobs(
    session: Session, collection: JobCollectionRow, state: str | None, skip: int, limit: int, by_name: bool = False
) -> list[JobRow]:
    query = select(JobRow).where(JobRow.collection_id == collection.id)
    if state is not None:
        query = query.where(JobRow.state == state)
    order = JobRow.name_key if by_name else JobRow.id
    return list(session.scalars(query.order_by(order).offset(skip).limit(limit)))


def jobs_of(session: Session, collection: JobCollectionRow) -> list[JobRow]:
    return list(session.scalars(select(JobRow).where(JobRow.collection_id == collection.id)))


def count_jobs(session: Session, collection: JobCollectionRow) -> int:
    return session.scalar(select(func.count()).select_from(JobRow).where(JobRow.collection_id == collection.id)) or 0


def set_jobs_state(session: Session, collection: JobCollectionRow, state: str, now: datetime) -> list[JobRow]:
    """Set every job of the collection that is not Completed or Faulted to ``state``; returns those jobs."""
    jobs = list(
        session.scalars(select(JobRow).where(JobRow.collection_id == collection.id, JobRow.state.not_in(FINAL_STATES)))
    )
    for job in jobs:
        job.state = state
        job.updated_at = now
    return jobs


def delete_collection(session: Session, collection: JobCollectionRow) -> None:
    """Remove the collection with its jobs and their history."""
    job_ids = select(JobRow.id).where(JobRow.collection_id == collection.id).scalar_subquery()
    session.execute(delete(JobHistoryRow).where(JobHistoryRow.job_id.in_(job_ids)))
    session.execute(delete(JobRow).where(JobRow.collection_id == collection.id))
    session.delete(collection)


def delete_job(session: Session, job: JobRow) -> None:
    session.execute(delete(JobHistoryRow).where(JobHistoryRow.job_id == job.id))
    session.delete(job)


def request_run(session: Session, job: JobRow, now: datetime) -> None:
    """Ask for one extra occurrence of the job now, outside its schedule."""
    job.run_requested_at = now
    job.updated_at = now


def list_history(session: Session, job: JobRow, status: str | None, skip: int, limit: int) -> list[JobHistoryRow]:
    """A page of the job's history, newest first."""
    query = select(JobHistoryRow).where(JobHistoryRow.job_id == job.id)
    if status is not None:
        query = query.where(JobHistoryRow.status == status)
    return list(session.scalars(query.order_by(JobHistoryRow.id.desc()).offset(skip).limit(limit)))


def record_history(session: Session, job_id: int, entry: JobHistoryRow) -> JobHistoryRow:
    """Store one history entry of the job."""
    entry.job_id = job_id
    session.add(entry)
    return entry


def read_setting(session: Session, name: str) -> str | None:
    row = session.get(EmulatorSettingRow, name)
    return None if row is None else row.value


def write_setting(session: Session, name: str, value: str) -> None:
    row = session.get(EmulatorSettingRow, name)
    if row is None:
        session.add(EmulatorSettingRow(name=name, value=value))
    else:
        row.value = value


def reset_everything(session: Session) -> None:
    """Remove every collection, job, history entry, occurrence record, classic cloud service and operation
    (the emulator's settings, its dispatchers and its clock stay)."""
    for table in (JobHistoryRow, OccurrenceRow, JobRow, JobCollectionRow, CloudServiceRow, ClassicOperationRow):
        session.execute(delete(table))


def scheduled_jobs_due_by(session: Session, until: datetime) -> list[JobRow]:
    """Enabled jobs of enabled collections with a next execution time by ``until``."""
    query = (
        select(JobRow)
        .join(JobCollectionRow, JobRow.collection_id == JobCollectionRow.id)
        .where(
            JobRow.next_execution_time.is_not(None),
            JobRow.next_execution_time <= until,
            JobRow.state == "Enabled",
            JobCollectionRow.state == "Enabled",
        )
    )
    return list(session.scalars(query))


def all_collections(session: Session, limit: int) -> list[JobCollectionRow]:
    """Every subscription's collections (the first ``limit``), by subscription, resource group and name."""
    query = select(JobCollectionRow).order_by(
        JobCollectionRow.subscription_key, JobCollectionRow.resource_group_key, JobCollectionRow.name_key
    )
    return list(session.scalars(query.limit(limit)))


def job_counts(session: Session, collection_ids: list[int]) -> dict[int, int]:
    """How many jobs each of these collections holds (absent: none)."""
    if not collection_ids:
        return {}
    query = (
        select(JobRow.collection_id, func.count())
        .where(JobRow.collection_id.in_(collection_ids))
        .group_by(JobRow.collection_id)
    )
    return {collection_id: count for collection_id, count in session.execute(query).all()}


def latest_history(session: Session, job_ids: list[int]) -> dict[int, JobHistoryRow]:
    """Each job's newest history entry (absent: never run)."""
    if not job_ids:
        return {}
    newest = select(func.max(JobHistoryRow.id)).where(JobHistoryRow.job_id.in_(job_ids)).group_by(JobHistoryRow.job_id)
    return {entry.job_id: entry for entry in session.scalars(select(JobHistoryRow).where(JobHistoryRow.id.in_(newest)))}
