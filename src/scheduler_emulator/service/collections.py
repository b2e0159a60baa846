"""Job collections: create or replace, merge-patch, enable/disable, delete, find and list."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from pydantic import ValidationError
from sqlalchemy import Connection
from sqlalchemy.orm import Session

from scheduler_emulator.domain import plans
from scheduler_emulator.domain.errors import Conflict, FieldError, NotFound
from scheduler_emulator.domain.merge import merge_patch
from scheduler_emulator.domain.regions import display_location
from scheduler_emulator.schemas.job_collection import JobCollectionIn, stored_limits
from scheduler_emulator.service import jobs as job_rules
from scheduler_emulator.service.refs import CollectionRef
from scheduler_emulator.service.validation import check_name_length, read_model
from scheduler_emulator.store import repository as repo
from scheduler_emulator.store.models import JobCollectionRow

log = logging.getLogger("scheduler_emulator.service")


def find(session: Session, ref: CollectionRef) -> JobCollectionRow | None:
    return repo.find_collection(session, ref.subscription_id, ref.resource_group, ref.name)


def read(connection: Connection, ref: CollectionRef) -> repo.CollectionRead:
    """The collection for an answer (a GET), in one statement outside a session; NotFound when there is none."""
    collection = repo.read_collection(connection, ref.subscription_id, ref.resource_group, ref.name)
    if collection is None:
        raise NotFound("job collection", ref.name)
    return collection


def get(session: Session, ref: CollectionRef) -> JobCollectionRow:
    """The collection; NotFound when there is none."""
    collection = find(session, ref)
    if collection is None:
        raise NotFound("job collection", ref.name)
    return collection


def put(
    session: Session, ref: CollectionRef, body: dict[str, Any], *, moment: datetime, floor: timedelta
) -> tuple[JobCollectionRow, bool]:
    """Create or replace the collection from its ARM body (``location``, ``tags``, ``properties``);
    returns it and whether it was created."""
    existing = find(session, ref)
    return _store(session, ref, body, existing=existing, moment=moment, floor=floor), existing is None


def patch(
    session: Session, ref: CollectionRef, changes: dict[str, Any], *, moment: datetime, floor: timedelta
) -> JobCollectionRow:
    """Merge-patch ``location`` and ``properties``; ``tags`` are replaced as a whole when sent."""
    existing = get(session, ref)
    current = {"location": existing.location, "tags": existing.tags, "properties": existing.properties}
    merged = merge_patch(current, {k: v for k, v in changes.items() if k in ("location", "properties")})
    if "tags" in changes:
        merged["tags"] = changes["tags"]
    elif existing.tags:
        merged["tags"] = existing.tags
    stored_ref = CollectionRef(
        subscription_id=existing.subscription_id, resource_group=existing.resource_group, name=existing.name
    )
    return _store(session, stored_ref, merged, existing=existing, moment=moment, floor=floor)


def delete(session: Session, ref: CollectionRef) -> None:
    """Remove the collection with its jobs and their history; NotFound when there is none."""
    repo.delete_collection(session, get(session, ref))


def set_state(session: Session, ref: CollectionRef, state: str, moment: datetime) -> JobCollectionRow:
    """Enable or disable the collection and every job in it that is not Completed or Faulted."""
    collection = get(session, ref)
    collection.state = state
    collection.updated_at = moment
    job_rules.set_all_states(session, collection, state, moment)
    return collection


def list_page(
    session: Session, subscription_id: str, resource_group: str | None, *, skip: int, limit: int
) -> list[JobCollectionRow]:
    return repo.list_collections(session, subscription_id, resource_group, skip=skip, limit=limit)


def _store(
    session: Session,
    ref: CollectionRef,
    body: dict[str, Any],
    *,
    existing: JobCollectionRow | None,
    moment: datetime,
    floor: timedelta,
) -> JobCollectionRow:
    if existing is None:
        for kind, value in (
            ("subscription", ref.subscription_id),
            ("resource group", ref.resource_group),
            ("job collection", ref.name),
        ):
            check_name_length(kind, value)
    spec = read_model(JobCollectionIn, body)
    properties = spec.properties
    sku = properties.sku_name if properties else plans.DEFAULT_SKU
    # canonical (schemas.job_collection): numbers as numbers, omitted or null members absent
    stored = properties.canonical() if properties is not None else {}
    limits = stored_limits(sku, stored, floor)
    _check_plan_change(session, existing, subscription_id=ref.subscription_id, sku=sku, limits=limits, moment=moment)
    collection = existing or JobCollectionRow(
        subscription_id=ref.subscription_id,
        subscription_key=ref.subscription_id.lower(),
        resource_group=ref.resource_group,
        resource_group_key=ref.resource_group.lower(),
        name=ref.name,
        name_key=ref.name.lower(),
        created_at=moment,
    )
    collection.location = display_location(spec.location)
    collection.tags = spec.tags or None
    collection.properties = stored
    collection.sku = sku
    collection.state = (properties.state if properties else None) or "Enabled"
    collection.updated_at = moment
    if existing is None:
        session.add(collection)
    session.flush()
    return collection


def _check_plan_change(
    session: Session,
    collection: JobCollectionRow | None,
    *,
    subscription_id: str,
    sku: str,
    limits: plans.Limits,
    moment: datetime,
) -> None:
    """Subscription-wide limits, and (for an existing collection) its jobs against the new limits."""
    if (
        collection is None
        and repo.count_collections(session, subscription_id) >= plans.MAX_COLLECTIONS_PER_SUBSCRIPTION
    ):
        raise Conflict(
            f"The subscription already has {plans.MAX_COLLECTIONS_PER_SUBSCRIPTION} job collections, the most allowed."
        )
    if (
        sku == plans.FREE
        and (collection is None or collection.sku != plans.FREE)
        and repo.count_collections(session, subscription_id, plans.FREE) >= plans.MAX_FREE_COLLECTIONS_PER_SUBSCRIPTION
    ):
        raise Conflict("The subscription already has a Free job collection; only one is allowed per subscription.")
    if collection is None:
        return
    jobs = repo.jobs_of(session, collection)
    if len(jobs) > limits.max_jobs:
        raise Conflict(
            f"The job collection holds {len(jobs)} jobs; the {sku} plan and quota allow at most {limits.max_jobs}."
        )
    for job in jobs:
        if job.state in repo.FINAL_STATES:
            continue
        try:
            properties = job_rules.stored_properties(job)
            job_rules.check_definition(properties, limits, moment)
        except (Conflict, FieldError) as exc:
            reason = f"{exc.path} {exc.problem}" if isinstance(exc, FieldError) else str(exc)
            raise Conflict(f"The job '{job.name}' would break the new plan or quota: {reason}") from None
        except ValidationError:
            # Stored before today's stricter rules: it can no longer be checked against any plan, and the
            # dispatcher already sets it aside; it does not block the collection's change.
            log.warning("job %s/%s no longer validates; plan change not checked against it", collection.name, job.name)
