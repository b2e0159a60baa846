"""The queries of the ARM front door (Microsoft.Resources): resource groups, provider registrations,
deployments with their operations, inert resources of other providers, long-running operations."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from scheduler_emulator.store import repository as repo
from scheduler_emulator.store.models import (
    ArmOperationRow,
    DeploymentOperationRow,
    DeploymentRow,
    GenericResourceRow,
    JobCollectionRow,
    ProviderRegistrationRow,
    ResourceGroupRow,
)


def find_group(session: Session, subscription: str, name: str) -> ResourceGroupRow | None:
    """The group's row (created or changed explicitly), matching names case-insensitively."""
    return session.scalar(
        select(ResourceGroupRow).where(
            ResourceGroupRow.subscription_key == subscription.lower(), ResourceGroupRow.name_key == name.lower()
        )
    )


def groups_of(session: Session, subscription: str) -> list[ResourceGroupRow]:
    return list(
        session.scalars(
            select(ResourceGroupRow)
            .where(ResourceGroupRow.subscription_key == subscription.lower())
            .order_by(ResourceGroupRow.id)
        )
    )


def implicit_groups(session: Session, subscription: str, name: str | None = None) -> list[tuple[str, str]]:
    """(name, location) of each group that holds a collection, first collection first (name: only that group)."""
    query = select(JobCollectionRow.resource_group, JobCollectionRow.location).where(
        JobCollectionRow.subscription_key == subscription.lower()
    )
    if name is not None:
        query = query.where(JobCollectionRow.resource_group_key == name.lower())
    seen: dict[str, tuple[str, str]] = {}
    for group, location in session.execute(query.order_by(JobCollectionRow.id)):
        seen.setdefault(group.lower(), (group, location))
    return list(seen.values())


def implicit_groups_everywhere(session: Session, limit: int) -> list[tuple[str, str, str]]:
    """(subscription, group, location) of each group holding a collection, in every subscription."""
    seen: dict[tuple[str, str], tuple[str, str, str]] = {}
    query = select(JobCollectionRow.subscription_id, JobCollectionRow.resource_group, JobCollectionRow.location)
    for subscription, group, location in session.execute(query.order_by(JobCollectionRow.id)):
        seen.setdefault((subscription.lower(), group.lower()), (subscription, group, location))
        if len(seen) >= limit:
            break
    return list(seen.values())


def collections_in_group(session: Session, subscription: str, group: str) -> list[JobCollectionRow]:
    return list(
        session.scalars(
            select(JobCollectionRow)
            .where(
                JobCollectionRow.subscription_key == subscription.lower(),
                JobCollectionRow.resource_group_key == group.lower(),
            )
            .order_by(JobCollectionRow.id)
        )
    )


def generic_in_group(session: Session, subscription: str, group: str | None) -> list[GenericResourceRow]:
    query = select(GenericResourceRow).where(GenericResourceRow.subscription_key == subscription.lower())
    if group is not None:
        query = query.where(GenericResourceRow.resource_group_key == group.lower())
    return list(session.scalars(query.order_by(GenericResourceRow.id)))


def find_generic(session: Session, subscription: str, group: str, type_: str, name: str) -> GenericResourceRow | None:
    return session.scalar(
        select(GenericResourceRow).where(
            GenericResourceRow.subscription_key == subscription.lower(),
            GenericResourceRow.resource_group_key == group.lower(),
            GenericResourceRow.type_key == type_.lower(),
            GenericResourceRow.name_key == name.lower(),
        )
    )


def delete_group_contents(session: Session, subscription: str, group: str) -> None:
    """Remove every collection (with jobs and history), deployment (with operations) and inert resource of the
    group, the role assignments at the group and below it, and its row."""
    repo.delete_role_assignments_below(session, repo.group_scope(subscription, group))
    for collection in collections_in_group(session, subscription, group):
        repo.delete_collection(session, collection)
    for deployment in deployments_of(session, subscription, group):
        delete_deployment(session, deployment)
    session.execute(
        delete(GenericResourceRow).where(
            GenericResourceRow.subscription_key == subscription.lower(),
            GenericResourceRow.resource_group_key == group.lower(),
        )
    )
    row = find_group(session, subscription, group)
    if row is not None:
        session.delete(row)


def registration(session: Session, subscription: str, namespace: str) -> ProviderRegistrationRow | None:
    return session.scalar(
        select(ProviderRegistrationRow).where(
            ProviderRegistrationRow.subscription_key == subscription.lower(),
            ProviderRegistrationRow.namespace_key == namespace.lower(),
        )
    )


def set_registration(session: Session, subscription: str, namespace: str, state: str) -> None:
    row = registration(session, subscription, namespace)
    if row is None:
        session.add(
            ProviderRegistrationRow(subscription_key=subscription.lower(), namespace_key=namespace.lower(), state=state)
        )
    else:
        row.state = state
    session.flush()


def find_deployment(session: Session, subscription: str, group: str, name: str) -> DeploymentRow | None:
    return session.scalar(
        select(DeploymentRow).where(
            DeploymentRow.subscription_key == subscription.lower(),
            DeploymentRow.resource_group_key == group.lower(),
            DeploymentRow.name_key == name.lower(),
        )
    )


def deployment_by_operation(session: Session, operation_id: str) -> DeploymentRow | None:
    return session.scalar(select(DeploymentRow).where(DeploymentRow.operation_id == operation_id))


def deployments_of(session: Session, subscription: str, group: str | None) -> list[DeploymentRow]:
    query = select(DeploymentRow).where(DeploymentRow.subscription_key == subscription.lower())
    if group is not None:
        query = query.where(DeploymentRow.resource_group_key == group.lower())
    return list(session.scalars(query.order_by(DeploymentRow.id)))


def all_deployments(session: Session, limit: int) -> list[DeploymentRow]:
    """The most recent deployments of every subscription, newest first."""
    return list(session.scalars(select(DeploymentRow).order_by(DeploymentRow.id.desc()).limit(limit)))


def all_groups(session: Session, limit: int) -> list[ResourceGroupRow]:
    return list(session.scalars(select(ResourceGroupRow).order_by(ResourceGroupRow.id).limit(limit)))


def operations_of(session: Session, deployment: DeploymentRow) -> list[DeploymentOperationRow]:
    return list(
        session.scalars(
            select(DeploymentOperationRow)
            .where(DeploymentOperationRow.deployment_id == deployment.id)
            .order_by(DeploymentOperationRow.id)
        )
    )


def clear_operations(session: Session, deployment: DeploymentRow) -> None:
    session.execute(delete(DeploymentOperationRow).where(DeploymentOperationRow.deployment_id == deployment.id))


def delete_deployment(session: Session, deployment: DeploymentRow) -> None:
    clear_operations(session, deployment)
    session.delete(deployment)


def add_operation(session: Session, operation: DeploymentOperationRow) -> None:
    session.add(operation)
    session.flush()


def record_arm_operation(session: Session, operation_id: str, subscription: str, *, status: str, now: datetime) -> None:
    session.add(ArmOperationRow(id=operation_id, subscription_key=subscription.lower(), status=status, created_at=now))


def arm_operation(session: Session, operation_id: str) -> ArmOperationRow | None:
    return session.get(ArmOperationRow, operation_id)
