"""Job collections: ``.../providers/Microsoft.Scheduler/jobCollections[/{jc}[/enable|/disable]]`` — parse,
call ``service.collections``, render."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from sqlalchemy.orm import Session

from scheduler_emulator.api import errors
from scheduler_emulator.api.context import (
    in_read_session,
    in_session,
    json_object,
    now,
    read_one_statement,
    retry_floor,
)
from scheduler_emulator.api.jobs import collection_ref
from scheduler_emulator.api.paging import list_body, page_of
from scheduler_emulator.api.permissions import SCHEDULER, Readable, readable
from scheduler_emulator.api.rendering import collection_id, collection_to_wire
from scheduler_emulator.domain.states import JobState
from scheduler_emulator.schemas.job_collection import JobCollectionIn
from scheduler_emulator.schemas.member_names import canonical_names
from scheduler_emulator.service import collections, resource_groups
from scheduler_emulator.store.models import JobCollectionRow

router = APIRouter()

READ = SCHEDULER + "/read"
FILTER_BATCH = 500  # collections read at a time when a list is filtered to what its caller may read

SUBSCRIPTION_LIST = "/subscriptions/{subscription_id}/providers/Microsoft.Scheduler/jobCollections"
RESOURCE_GROUP_LIST = (
    "/subscriptions/{subscription_id}/resourceGroups/{resource_group}/providers/Microsoft.Scheduler/jobCollections"
)


@router.put(RESOURCE_GROUP_LIST + "/{collection_name}")
async def create_or_replace_collection(
    request: Request, subscription_id: str, resource_group: str, collection_name: str
) -> Response:
    # member names in any case (docs/reference/arm-api.md#request-bodies)
    body = canonical_names(await json_object(request), JobCollectionIn)
    moment, floor = now(request), retry_floor(request)
    ref = collection_ref(subscription_id, resource_group, collection_name)

    strict = request.app.state.settings.arm.strict_resource_groups

    def work(session: Session) -> dict[str, Any]:
        if strict and not resource_groups.exists(session, subscription_id, resource_group):
            raise errors.resource_group_not_found(resource_group)  # docs/reference/front-door.md#resource-groups
        collection, _ = collections.put(session, ref, body, moment=moment, floor=floor)
        return collection_to_wire(collection)

    # 201 on create and on replace alike, as the service answered both (recorded;
    # docs/reference/arm-api.md#job-collections).
    return JSONResponse(await in_session(request, work, wake=True), status_code=201)


@router.patch(RESOURCE_GROUP_LIST + "/{collection_name}")
async def patch_collection(
    request: Request, subscription_id: str, resource_group: str, collection_name: str
) -> Response:
    changes = canonical_names(await json_object(request), JobCollectionIn)
    moment, floor = now(request), retry_floor(request)
    ref = collection_ref(subscription_id, resource_group, collection_name)

    def work(session: Session) -> dict[str, Any]:
        return collection_to_wire(collections.patch(session, ref, changes, moment=moment, floor=floor))

    return JSONResponse(await in_session(request, work, wake=True))


@router.get(RESOURCE_GROUP_LIST + "/{collection_name}")
async def get_collection(request: Request, subscription_id: str, resource_group: str, collection_name: str) -> Response:
    ref = collection_ref(subscription_id, resource_group, collection_name)
    return JSONResponse(
        await read_one_statement(request, lambda connection: collection_to_wire(collections.read(connection, ref)))
    )


@router.delete(RESOURCE_GROUP_LIST + "/{collection_name}")
async def delete_collection(
    request: Request, subscription_id: str, resource_group: str, collection_name: str
) -> Response:
    ref = collection_ref(subscription_id, resource_group, collection_name)
    await in_session(request, lambda session: collections.delete(session, ref))
    return Response(status_code=200)


async def _set_state(
    request: Request, subscription_id: str, resource_group: str, collection_name: str, state: JobState
) -> Response:
    moment = now(request)
    ref = collection_ref(subscription_id, resource_group, collection_name)
    await in_session(request, lambda session: collections.set_state(session, ref, state, moment), wake=True)
    return Response(status_code=200)


@router.post(RESOURCE_GROUP_LIST + "/{collection_name}/enable")
async def enable_collection(
    request: Request, subscription_id: str, resource_group: str, collection_name: str
) -> Response:
    return await _set_state(request, subscription_id, resource_group, collection_name, JobState.Enabled)


@router.post(RESOURCE_GROUP_LIST + "/{collection_name}/disable")
async def disable_collection(
    request: Request, subscription_id: str, resource_group: str, collection_name: str
) -> Response:
    return await _set_state(request, subscription_id, resource_group, collection_name, JobState.Disabled)


async def _list(request: Request, subscription_id: str, resource_group: str | None) -> Response:
    page = page_of(request)
    shown = readable(request)

    def work(session: Session) -> dict[str, Any]:
        if shown.everything:
            rows = collections.list_page(session, subscription_id, resource_group, skip=page.skip, limit=page.top + 1)
        else:
            rows = _readable_rows(session, subscription_id, resource_group, shown, wanted=page.skip + page.top + 1)
            rows = rows[page.skip :]
        items = [collection_to_wire(c) for c in rows[: page.top]]
        return list_body(request, items, page, has_more=len(rows) > page.top)

    return JSONResponse(await in_read_session(request, work))


def _readable_rows(
    session: Session, subscription_id: str, resource_group: str | None, shown: Readable, *, wanted: int
) -> list[JobCollectionRow]:
    """The first ``wanted`` collections of the scope its caller may read, in the list's order: the scope's
    collections read a batch at a time (as many batches as the scope has) and filtered
    (docs/reference/authorization.md#lists)."""
    found: list[JobCollectionRow] = []
    offset = 0
    while len(found) < wanted:
        rows = collections.list_page(session, subscription_id, resource_group, skip=offset, limit=FILTER_BATCH)
        found += [row for row in rows if shown.may(READ, collection_id(row))]
        if len(rows) < FILTER_BATCH:
            break
        offset += FILTER_BATCH
    return found[:wanted]


@router.get(SUBSCRIPTION_LIST)
async def list_collections_in_subscription(request: Request, subscription_id: str) -> Response:
    return await _list(request, subscription_id, None)


@router.get(RESOURCE_GROUP_LIST)
async def list_collections_in_resource_group(request: Request, subscription_id: str, resource_group: str) -> Response:
    return await _list(request, subscription_id, resource_group)
