"""Job collections: ``.../providers/Microsoft.Scheduler/jobCollections[/{jc}[/enable|/disable]]``."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from sqlalchemy.orm import Session

from scheduler_emulator.api import errors
from scheduler_emulator.api.context import in_session, json_object, now, retry_floor, validated
from scheduler_emulator.api.jobs import check_definition, collection_or_404, first_run
from scheduler_emulator.api.paging import list_body, page_of
from scheduler_emulator.api.rendering import collection_to_wire
from scheduler_emulator.domain import plans
from scheduler_emulator.domain.errors import Conflict, FieldError
from scheduler_emulator.domain.merge import merge_patch
from scheduler_emulator.domain.regions import display_location
from scheduler_emulator.schemas.job import JobDefinitionIn
from scheduler_emulator.schemas.job_collection import JobCollectionIn, stored_limits
from scheduler_emulator.store import repository as repo
from scheduler_emulator.store.models import JobCollectionRow

router = APIRouter()

SUBSCRIPTION_LIST = "/subscriptions/{subscription_id}/providers/Microsoft.Scheduler/jobCollections"
RESOURCE_GROUP_LIST = (
    "/subscriptions/{subscription_id}/resourceGroups/{resource_group}/providers/Microsoft.Scheduler/jobCollections"
)


def _check_plan_change(
    session: Session,
    collection: JobCollectionRow | None,
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
        properties = JobDefinitionIn.model_validate({"properties": job.definition}).properties
        try:
            check_definition(properties, limits, moment)
        except (Conflict, FieldError) as exc:
            reason = f"{exc.path} {exc.problem}" if isinstance(exc, FieldError) else str(exc)
            raise Conflict(f"The job '{job.name}' would break the new plan or quota: {reason}") from None


def _write(
    session: Session,
    subscription_id: str,
    resource_group: str,
    name: str,
    body: dict[str, Any],
    existing: JobCollectionRow | None,
    moment: datetime,
    floor: timedelta,
) -> JobCollectionRow:
    if existing is None:
        for kind, value in (
            ("subscription", subscription_id),
            ("resource group", resource_group),
            ("job collection", name),
        ):
            errors.check_name_length(kind, value)
    spec = validated(JobCollectionIn, body)
    properties = spec.properties
    sku = properties.sku_name if properties else plans.DEFAULT_SKU
    # explicit nulls mean "omitted": never stored, never echoed
    raw_properties: dict[str, Any] = merge_patch({}, body.get("properties") or {})
    limits = stored_limits(sku, raw_properties, floor)
    _check_plan_change(session, existing, subscription_id, sku, limits, moment)
    collection = existing or JobCollectionRow(
        subscription_id=subscription_id,
        subscription_key=subscription_id.lower(),
        resource_group=resource_group,
        resource_group_key=resource_group.lower(),
        name=name,
        name_key=name.lower(),
        created_at=moment,
    )
    collection.location = display_location(spec.location)
    collection.tags = spec.tags or None
    collection.properties = raw_properties
    collection.sku = sku
    collection.state = (properties.state if properties else None) or "Enabled"
    collection.updated_at = moment
    if existing is None:
        session.add(collection)
    session.flush()
    return collection


@router.put(RESOURCE_GROUP_LIST + "/{collection_name}")
async def create_or_replace_collection(
    request: Request, subscription_id: str, resource_group: str, collection_name: str
) -> Response:
    body = await json_object(request)
    moment, floor = now(request), retry_floor(request)

    def work(session: Session) -> tuple[int, dict[str, Any]]:
        existing = repo.find_collection(session, subscription_id, resource_group, collection_name)
        collection = _write(session, subscription_id, resource_group, collection_name, body, existing, moment, floor)
        return (200 if existing else 201), collection_to_wire(collection)

    status, wire = await in_session(request, work, wake=True)
    return JSONResponse(wire, status_code=status)


@router.patch(RESOURCE_GROUP_LIST + "/{collection_name}")
async def patch_collection(
    request: Request, subscription_id: str, resource_group: str, collection_name: str
) -> Response:
    patch = await json_object(request)
    moment, floor = now(request), retry_floor(request)

    def work(session: Session) -> dict[str, Any]:
        existing = collection_or_404(session, subscription_id, resource_group, collection_name)
        current = {"location": existing.location, "tags": existing.tags, "properties": existing.properties}
        merged = merge_patch(current, {k: v for k, v in patch.items() if k in ("location", "properties")})
        if "tags" in patch:  # tags are replaced as a whole
            merged["tags"] = patch["tags"]
        elif existing.tags:
            merged["tags"] = existing.tags
        collection = _write(
            session, existing.subscription_id, existing.resource_group, existing.name, merged, existing, moment, floor
        )
        return collection_to_wire(collection)

    return JSONResponse(await in_session(request, work, wake=True))


@router.get(RESOURCE_GROUP_LIST + "/{collection_name}")
async def get_collection(request: Request, subscription_id: str, resource_group: str, collection_name: str) -> Response:
    def work(session: Session) -> dict[str, Any]:
        return collection_to_wire(collection_or_404(session, subscription_id, resource_group, collection_name))

    return JSONResponse(await in_session(request, work))


@router.delete(RESOURCE_GROUP_LIST + "/{collection_name}")
async def delete_collection(
    request: Request, subscription_id: str, resource_group: str, collection_name: str
) -> Response:
    def work(session: Session) -> None:
        repo.delete_collection(session, collection_or_404(session, subscription_id, resource_group, collection_name))

    await in_session(request, work)
    return Response(status_code=200)


async def _set_state(
    request: Request, subscription_id: str, resource_group: str, collection_name: str, state: str
) -> Response:
    moment = now(request)

    def work(session: Session) -> None:
        collection = collection_or_404(session, subscription_id, resource_group, collection_name)
        collection.state = state
        collection.updated_at = moment
        for job in repo.set_jobs_state(session, collection, state, moment):
            job.version += 1
            if state == "Enabled":
                job.series_origin = moment  # enabling recomputes from now
                properties = JobDefinitionIn.model_validate({"properties": job.definition}).properties
                job.next_execution_time = first_run(properties, moment)
            else:
                job.next_execution_time = None

    await in_session(request, work, wake=True)
    return Response(status_code=200)


@router.post(RESOURCE_GROUP_LIST + "/{collection_name}/enable")
async def enable_collection(
    request: Request, subscription_id: str, resource_group: str, collection_name: str
) -> Response:
    return await _set_state(request, subscription_id, resource_group, collection_name, "Enabled")


@router.post(RESOURCE_GROUP_LIST + "/{collection_name}/disable")
async def disable_collection(
    request: Request, subscription_id: str, resource_group: str, collection_name: str
) -> Response:
    return await _set_state(request, subscription_id, resource_group, collection_name, "Disabled")


async def _list(request: Request, subscription_id: str, resource_group: str | None) -> Response:
    page = page_of(request)

    def work(session: Session) -> dict[str, Any]:
        rows = repo.list_collections(session, subscription_id, resource_group, page.skip, page.top + 1)
        items = [collection_to_wire(c) for c in rows[: page.top]]
        return list_body(request, items, page, has_more=len(rows) > page.top)

    return JSONResponse(await in_session(request, work))


@router.get(SUBSCRIPTION_LIST)
async def list_collections_in_subscription(request: Request, subscription_id: str) -> Response:
    return await _list(request, subscription_id, None)


@router.get(RESOURCE_GROUP_LIST)
async def list_collections_in_resource_group(request: Request, subscription_id: str, resource_group: str) -> Response:
    return await _list(request, subscription_id, resource_group)
