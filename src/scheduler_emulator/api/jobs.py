"""Jobs: ``{root}/jobCollections/{jc}/jobs[/{job}[/run]]`` — parse, call ``service.jobs``, render."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from sqlalchemy.orm import Session

from scheduler_emulator.api import errors
from scheduler_emulator.api.client_dialects import client_dialect, durations_as_meant
from scheduler_emulator.api.context import (
    in_read_session,
    in_session,
    in_write_scope,
    json_object,
    now,
    read_one_statement,
    retry_floor,
)
from scheduler_emulator.api.paging import equality_filter, list_body, page_of
from scheduler_emulator.api.rendering import job_to_wire
from scheduler_emulator.schemas.job import JobDefinitionIn
from scheduler_emulator.schemas.member_names import canonical_names
from scheduler_emulator.service import collections, jobs
from scheduler_emulator.service.refs import CollectionRef
from scheduler_emulator.store.write_scope import WriteScope

router = APIRouter()

COLLECTION = (
    "/subscriptions/{subscription_id}/resourceGroups/{resource_group}"
    "/providers/Microsoft.Scheduler/jobCollections/{collection_name}"
)
JOB = COLLECTION + "/jobs/{job_name}"


def collection_ref(subscription_id: str, resource_group: str, collection_name: str) -> CollectionRef:
    return CollectionRef(subscription_id=subscription_id, resource_group=resource_group, name=collection_name)


@router.put(JOB)
async def create_or_replace_job(
    request: Request, subscription_id: str, resource_group: str, collection_name: str, job_name: str
) -> Response:
    # member names in any case (docs/reference/arm-api.md#request-bodies)
    body = canonical_names(await json_object(request), JobDefinitionIn)
    raw = body.get("properties")
    if not isinstance(raw, dict):
        raise errors.invalid_field("properties", "is required and must be a JSON object")
    moment, floor = now(request), retry_floor(request)
    dialect = client_dialect(request)
    raw = durations_as_meant(raw, dialect)
    ref = collection_ref(subscription_id, resource_group, collection_name)

    def work(scope: WriteScope) -> tuple[int, dict[str, Any]]:
        collection, job, created = jobs.put_locking_late(scope, ref, job_name, raw, moment=moment, floor=floor)
        return (201 if created else 200), job_to_wire(collection, job, dialect.one_job)

    # Writes into one collection queue on its lock: put takes it as late as it can.
    status, wire = await in_write_scope(request, work, wake=True)
    return JSONResponse(wire, status_code=status)


@router.patch(JOB)
async def patch_job(
    request: Request, subscription_id: str, resource_group: str, collection_name: str, job_name: str
) -> Response:
    # member names in any case (docs/reference/arm-api.md#request-bodies)
    body = canonical_names(await json_object(request), JobDefinitionIn)
    patch = body.get("properties", {})
    if patch is not None and not isinstance(patch, dict):
        raise errors.invalid_field("properties", "must be a JSON object")
    moment, floor = now(request), retry_floor(request)
    dialect = client_dialect(request)
    patch = durations_as_meant(patch or {}, dialect)
    ref = collection_ref(subscription_id, resource_group, collection_name)

    def work(session: Session) -> dict[str, Any]:
        collection = collections.get(session, ref)
        job = jobs.patch(session, collection, job_name, patch or {}, moment=moment, floor=floor)
        return job_to_wire(collection, job, dialect.one_job)

    return JSONResponse(await in_session(request, work, wake=True))


@router.get(JOB)
async def get_job(
    request: Request, subscription_id: str, resource_group: str, collection_name: str, job_name: str
) -> Response:
    style = client_dialect(request).one_job
    ref = collection_ref(subscription_id, resource_group, collection_name)

    collection, job = await read_one_statement(request, lambda connection: jobs.read_in(connection, ref, job_name))
    return JSONResponse(job_to_wire(collection, job, style))


@router.delete(JOB)
async def delete_job(
    request: Request, subscription_id: str, resource_group: str, collection_name: str, job_name: str
) -> Response:
    ref = collection_ref(subscription_id, resource_group, collection_name)
    await in_session(request, lambda session: jobs.delete(session, collections.get(session, ref), job_name))
    return Response(status_code=200)


@router.post(JOB + "/run")
async def run_job(
    request: Request, subscription_id: str, resource_group: str, collection_name: str, job_name: str
) -> Response:
    moment = now(request)
    ref = collection_ref(subscription_id, resource_group, collection_name)
    await in_session(
        request, lambda session: jobs.run_now(session, collections.get(session, ref), job_name, moment), wake=True
    )
    return Response(status_code=200)


@router.get(COLLECTION + "/jobs")
async def list_jobs(request: Request, subscription_id: str, resource_group: str, collection_name: str) -> Response:
    page = page_of(request)
    state = equality_filter(request, "state", jobs.JOB_STATES)
    style = client_dialect(request).job_list
    ref = collection_ref(subscription_id, resource_group, collection_name)

    def work(session: Session) -> dict[str, Any]:
        collection = collections.get(session, ref)
        rows = jobs.list_page(session, collection, state=state, skip=page.skip, limit=page.top + 1)
        items = [job_to_wire(collection, job, style) for job in rows[: page.top]]
        return list_body(request, items, page, has_more=len(rows) > page.top)

    return JSONResponse(await in_read_session(request, work))
