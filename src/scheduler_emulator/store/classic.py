"""The queries of the classic (2014) surface: cloud services and asynchronous operation records."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import delete, distinct, select
from sqlalchemy.orm import Session

from scheduler_emulator.store.models import ClassicOperationRow, CloudServiceRow, JobCollectionRow

OPERATIONS_KEPT = timedelta(hours=24)


def find_cloud_service(session: Session, subscription: str, name: str) -> CloudServiceRow | None:
    return session.scalar(
        select(CloudServiceRow).where(
            CloudServiceRow.subscription_key == subscription.lower(), CloudServiceRow.name_key == name.lower()
        )
    )


def cloud_services(session: Session, subscription: str) -> list[CloudServiceRow]:
    """The subscription's classic cloud services, by name."""
    query = select(CloudServiceRow).where(CloudServiceRow.subscription_key == subscription.lower())
    return list(session.scalars(query.order_by(CloudServiceRow.name_key)))


def resource_groups_with_collections(session: Session, subscription: str) -> list[str]:
    """The resource groups of the subscription that hold at least one job collection (their stored casing)."""
    query = (
        select(JobCollectionRow.resource_group_key, JobCollectionRow.resource_group)
        .where(JobCollectionRow.subscription_key == subscription.lower())
        .order_by(JobCollectionRow.resource_group_key, JobCollectionRow.id)
    )
    seen: dict[str, str] = {}
    for key, name in session.execute(query):
        seen.setdefault(key, name)
    return list(seen.values())


def collections_in(session: Session, subscription: str, resource_group: str) -> list[JobCollectionRow]:
    query = select(JobCollectionRow).where(
        JobCollectionRow.subscription_key == subscription.lower(),
        JobCollectionRow.resource_group_key == resource_group.lower(),
    )
    return list(session.scalars(query.order_by(JobCollectionRow.name_key)))


def count_resource_groups(session: Session, subscription: str) -> int:
    query = select(distinct(JobCollectionRow.resource_group_key)).where(
        JobCollectionRow.subscription_key == subscription.lower()
    )
    return len(list(session.scalars(query)))


def record_operation(
    session: Session, operation_id: str, subscription: str, *, http_status: int, now: datetime
) -> None:
    """Remember a finished asynchronous operation (kept ``OPERATIONS_KEPT``; older ones are dropped here)."""
    session.execute(delete(ClassicOperationRow).where(ClassicOperationRow.created_at < now - OPERATIONS_KEPT))
    session.add(
        ClassicOperationRow(
            id=operation_id, subscription_key=subscription.lower(), http_status=http_status, created_at=now
        )
    )


def find_operation(session: Session, subscription: str, operation_id: str) -> ClassicOperationRow | None:
    row = session.get(ClassicOperationRow, operation_id)
    return row if row is not None and row.subscription_key == subscription.lower() else None
