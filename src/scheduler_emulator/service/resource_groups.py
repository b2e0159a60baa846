"""Resource groups (docs/reference/front-door.md#resource-groups): created explicitly (PUT) or implicitly (a collection
created in one), read, tagged, listed with what is in them, and deleted with everything in them."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from scheduler_emulator.domain.errors import FieldError, NotFound
from scheduler_emulator.service.validation import check_name_length
from scheduler_emulator.store import resources as store
from scheduler_emulator.store.models import ResourceGroupRow

GROUP_KIND = "resource group"


@dataclass(frozen=True, kw_only=True)
class ResourceGroup:
    """A group as every surface shows it; ``explicit``: created or changed by a client (else implicit)."""

    subscription_id: str
    name: str
    location: str
    tags: dict[str, Any] | None
    explicit: bool


@dataclass(frozen=True, kw_only=True)
class GroupResource:
    """One resource in a group, as ``GET …/resources`` lists it."""

    id: str
    name: str
    type: str
    location: str | None
    tags: dict[str, Any] | None = None


def short_location(location: str) -> str:
    """``West US`` → ``westus``: the form ARM answers a group's location in."""
    return location.replace(" ", "").lower()


def _from_row(row: ResourceGroupRow) -> ResourceGroup:
    return ResourceGroup(
        subscription_id=row.subscription_id, name=row.name, location=row.location, tags=row.tags, explicit=True
    )


def find(session: Session, subscription: str, name: str) -> ResourceGroup | None:
    """The group, explicit or implicit; None when neither."""
    row = store.find_group(session, subscription, name)
    if row is not None:
        return _from_row(row)
    implicit = store.implicit_groups(session, subscription, name)
    if not implicit:
        return None
    group, location = implicit[0]
    return ResourceGroup(
        subscription_id=subscription, name=group, location=short_location(location), tags=None, explicit=False
    )


def get(session: Session, subscription: str, name: str) -> ResourceGroup:
    group = find(session, subscription, name)
    if group is None:
        raise NotFound(GROUP_KIND, name)
    return group


def exists(session: Session, subscription: str, name: str) -> bool:
    return find(session, subscription, name) is not None


def list_all(session: Session, subscription: str) -> list[ResourceGroup]:
    """Every group of the subscription: explicit ones in creation order, then implicit ones."""
    groups = [_from_row(row) for row in store.groups_of(session, subscription)]
    known = {group.name.lower() for group in groups}
    for name, location in store.implicit_groups(session, subscription):
        if name.lower() not in known:
            groups.append(_implicit(subscription, name, location))
    return groups


def _implicit(subscription: str, name: str, location: str) -> ResourceGroup:
    """A group nobody created: it exists because a collection was put into it, located where that collection is."""
    return ResourceGroup(
        subscription_id=subscription, name=name, location=short_location(location), tags=None, explicit=False
    )


def every_group(session: Session, limit: int = 200) -> list[ResourceGroup]:
    """Groups of every subscription, explicit ones first then implicit ones (for the dashboard)."""
    groups = [_from_row(row) for row in store.all_groups(session, limit)]
    known = {(group.subscription_id.lower(), group.name.lower()) for group in groups}
    for subscription, name, location in store.implicit_groups_everywhere(session, limit):
        if (subscription.lower(), name.lower()) not in known and len(groups) < limit:
            groups.append(_implicit(subscription, name, location))
    return groups


def put(
    session: Session, subscription: str, name: str, body: dict[str, Any], *, moment: datetime
) -> tuple[ResourceGroup, bool]:
    """Create or update the group from ``{location, tags?}``; returns it and whether it was created (an
    implicit group counts as existing). A group's location cannot change."""
    location = body.get("location")
    if not isinstance(location, str) or not location.strip():
        raise FieldError("location", "is required and must be a non-empty string")
    tags = _tags(body.get("tags"))
    existing = find(session, subscription, name)
    if existing is not None and short_location(existing.location) != short_location(location):
        raise FieldError(
            "location",
            f"the resource group '{existing.name}' already exists in location '{existing.location}'; "
            "a group's location cannot change",
        )
    row = _materialize(session, subscription, name, existing=existing, location=short_location(location), moment=moment)
    if "tags" in body:
        row.tags = tags
    session.flush()
    return _from_row(row), existing is None


def patch(session: Session, subscription: str, name: str, body: dict[str, Any], *, moment: datetime) -> ResourceGroup:
    """Replace the group's tags when sent (other members are ignored, as ARM does for managedBy etc.)."""
    existing = get(session, subscription, name)
    location = body.get("location")
    if location is not None and (
        not isinstance(location, str) or short_location(location) != short_location(existing.location)
    ):
        raise FieldError("location", "a group's location cannot change")
    row = _materialize(session, subscription, name, existing=existing, location=existing.location, moment=moment)
    if "tags" in body:
        row.tags = _tags(body["tags"])
    session.flush()
    return _from_row(row)


def delete(session: Session, subscription: str, name: str) -> None:
    """Remove the group with every collection, job, history entry, deployment and inert resource in it."""
    get(session, subscription, name)
    store.delete_group_contents(session, subscription, name)


def resources_in(session: Session, subscription: str, name: str | None) -> list[GroupResource]:
    """What a group holds (every group of the subscription when ``name`` is None): its job collections, their
    jobs and its inert resources."""
    from scheduler_emulator.store import repository as repo

    found: list[GroupResource] = []
    groups = [name] if name is not None else [group.name for group in list_all(session, subscription)]
    for group in groups:
        for collection in store.collections_in_group(session, subscription, group):
            collection_id = (
                f"/subscriptions/{collection.subscription_id}/resourceGroups/{collection.resource_group}"
                f"/providers/Microsoft.Scheduler/jobCollections/{collection.name}"
            )
            found.append(
                GroupResource(
                    id=collection_id,
                    name=collection.name,
                    type="Microsoft.Scheduler/jobCollections",
                    location=short_location(collection.location),
                    tags=collection.tags,
                )
            )
            for job in repo.jobs_of(session, collection):
                found.append(
                    GroupResource(
                        id=f"{collection_id}/jobs/{job.name}",
                        name=f"{collection.name}/{job.name}",
                        type="Microsoft.Scheduler/jobCollections/jobs",
                        location=None,
                    )
                )
        for resource in store.generic_in_group(session, subscription, group):
            found.append(
                GroupResource(
                    id=generic_id(resource.subscription_id, resource.resource_group, resource.type, resource.name),
                    name=resource.name,
                    type=resource.type,
                    location=resource.location,
                    tags=resource.tags,
                )
            )
    return found


def inert_resource(
    session: Session, subscription: str, group: str, resource_type: str, name: str
) -> dict[str, Any] | None:
    """An inert resource as ARM shows it (id, name, type, location, tags, sku, kind, properties as sent)."""
    row = store.find_generic(session, subscription, group, resource_type, name)
    if row is None:
        return None
    body = {k: v for k, v in row.body.items() if k not in ("id", "name", "type")}
    properties = body.pop("properties", None)
    return {
        "id": generic_id(row.subscription_id, row.resource_group, row.type, row.name),
        "name": row.name,
        "type": row.type,
        **body,
        "properties": {**(properties if isinstance(properties, dict) else {}), "provisioningState": "Succeeded"},
    }


def generic_id(subscription: str, group: str, type_: str, name: str) -> str:
    """The ARM id of a resource of type ``Namespace/a/b`` named ``x/y``."""
    namespace, *types = type_.split("/")
    names = name.split("/")
    tail = "/".join(f"{t}/{n}" for t, n in zip(types, names, strict=False))
    return f"/subscriptions/{subscription}/resourceGroups/{group}/providers/{namespace}/{tail}"


def _materialize(
    session: Session, subscription: str, name: str, *, existing: ResourceGroup | None, location: str, moment: datetime
) -> ResourceGroupRow:
    """The group's row, created when the group is new or was only implicit."""
    row = store.find_group(session, subscription, name)
    if row is not None:
        return row
    check_name_length("resource group", name)
    row = ResourceGroupRow(
        subscription_id=subscription,
        subscription_key=subscription.lower(),
        name=existing.name if existing is not None else name,
        name_key=name.lower(),
        location=location,
        created_at=moment,
    )
    session.add(row)
    return row


def _tags(value: object) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise FieldError("tags", "must be an object of string values")
    if len(value) > 50:
        raise FieldError("tags", "at most 50 tags are allowed")
    return dict(value)
