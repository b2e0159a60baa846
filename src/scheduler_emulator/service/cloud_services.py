"""Classic cloud services: the 2014 surface's name for a resource group
(docs/reference/classic-api.md#one-store-behind-both-surfaces).

A cloud service exists when it was created through the classic surface or when its resource group holds
job collections (created through either surface). Deleting one deletes its collections, jobs and history.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.orm import Session

from scheduler_emulator.domain.errors import Conflict, NotFound
from scheduler_emulator.service import collections
from scheduler_emulator.service.refs import CollectionRef
from scheduler_emulator.service.validation import check_name_length
from scheduler_emulator.store import classic as store
from scheduler_emulator.store import repository as repo
from scheduler_emulator.store.models import CloudServiceRow, JobCollectionRow

MAX_LABEL = 100
MAX_DESCRIPTION = 1024


@dataclass(frozen=True, kw_only=True)
class CloudService:
    """A cloud service as the classic surface shows it, with the job collections in it."""

    name: str
    label: str
    description: str
    geo_region: str
    collections: list[JobCollectionRow]


def create(
    session: Session,
    subscription_id: str,
    name: str,
    *,
    label: str,
    description: str,
    geo_region: str,
    email: str | None,
    moment: datetime,
) -> None:
    """A new cloud service; Conflict when one of that name exists (or its resource group holds collections)."""
    check_name_length("cloud service", name)
    check_name_length("subscription", subscription_id)
    if find(session, subscription_id, name) is not None:
        raise Conflict(f"The cloud service '{name}' already exists.")
    session.add(
        CloudServiceRow(
            subscription_id=subscription_id,
            subscription_key=subscription_id.lower(),
            name=name,
            name_key=name.lower(),
            label=label,
            description=description,
            geo_region=geo_region,
            email=email,
            created_at=moment,
        )
    )
    session.flush()


def find(session: Session, subscription_id: str, name: str) -> CloudService | None:
    row = store.find_cloud_service(session, subscription_id, name)
    members = store.collections_in(session, subscription_id, name)
    if row is not None:
        return CloudService(
            name=row.name,
            label=row.label,
            description=row.description,
            geo_region=row.geo_region,
            collections=members,
        )
    if members:
        group = members[0].resource_group
        return CloudService(
            name=group, label=group, description="", geo_region=members[0].location, collections=members
        )
    return None


def get(session: Session, subscription_id: str, name: str) -> CloudService:
    found = find(session, subscription_id, name)
    if found is None:
        raise NotFound("cloud service", name)
    return found


def list_all(session: Session, subscription_id: str) -> list[CloudService]:
    """Classic cloud services and resource groups holding collections, by name."""
    names = {row.name_key: row.name for row in store.cloud_services(session, subscription_id)}
    for group in store.resource_groups_with_collections(session, subscription_id):
        names.setdefault(group.lower(), group)
    found = (find(session, subscription_id, names[key]) for key in sorted(names))
    return [service for service in found if service is not None]


def delete(session: Session, subscription_id: str, name: str) -> None:
    """Remove the cloud service with its collections, their jobs and history; NotFound when missing."""
    service = get(session, subscription_id, name)
    for collection in service.collections:
        repo.delete_collection(session, collection)
    row = store.find_cloud_service(session, subscription_id, name)
    if row is not None:
        session.delete(row)


def region_of(session: Session, subscription_id: str, name: str) -> str:
    """The region collections created in this cloud service take; NotFound when it does not exist."""
    return get(session, subscription_id, name).geo_region


def collection_ref(subscription_id: str, cloud_service: str, name: str) -> CollectionRef:
    return CollectionRef(subscription_id=subscription_id, resource_group=cloud_service, name=name)


__all__ = ["CloudService", "collection_ref", "collections", "create", "delete", "find", "get", "list_all"]
