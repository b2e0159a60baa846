"""The queries the API and the dispatcher run. Nothing else in the service issues SQL."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import delete, func, select, text
from sqlalchemy.orm import Session

from scheduler_emulator.store.models import JobCollectionRow, JobHistoryRow, JobRow

FINAL_STATES = ("Completed", "Faulted")


def lock_subscription(session: Session, subscription: str) -> None:
    """Hold the subscription's write lock until the transaction ends (PostgreSQL advisory lock; SQLite
    already runs one session at a time), so API writes that check limits before writing never interleave."""
    if session.get_bind().dialect.name == "postgresql":
        key = f"subscription:{subscription.lower()}"
        session.execute(text("SELECT pg_advisory_xact_lock(hashtext(:key))"), {"key": key})


def find_collection(session: Session, subscription: str, resource_group: str, name: str) -> JobCollectionRow | None:
    """The collection, matching all three names case-insensitively."""
    return session.scalar(
        select(JobCollectionRow).where(
            JobCollectionRow.subscription_key == subscription.lower(),
            JobCollectionRow.resource_group_key == resource_group.lower(),
            JobCollectionRow.name_key == name.lower(),
        )
    )


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


def find_job(session: Session, collection: JobCollectionRow, name: str) -> JobRow | None:
    return session.scalar(select(JobRow).where(JobRow.collection_id == collection.id, JobRow.name_key == name.lower()))


def list_jobs(session: Session, collection: JobCollectionRow, state: str | None, skip: int, limit: int) -> list[JobRow]:
    query = select(JobRow).where(JobRow.collection_id == collection.id)
    if state is not None:
        query = query.where(JobRow.state == state)
    return list(session.scalars(query.order_by(JobRow.id).offset(skip).limit(limit)))


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
