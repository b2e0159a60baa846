"""Classic jobs (docs/reference/classic-api.md#jobs): flat JSON, bare arrays for lists and history, unquoted OData
filters. Every write is also an operation its client may poll (``GET /{s}/operations/{x-ms-request-id}``): the classic
Python client polls job PUT, PATCH and DELETE too (recorded), answered Succeeded."""

from __future__ import annotations

import uuid
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse, Response
from sqlalchemy import Connection
from sqlalchemy.orm import Session

from scheduler_emulator.api.classic import wire
from scheduler_emulator.api.classic.cloud_services import accepted
from scheduler_emulator.api.context import (
    in_read_session,
    in_session,
    now,
    parse_json_object,
    read_body,
    read_one_statement,
    retry_floor,
)
from scheduler_emulator.api.paging import page_of
from scheduler_emulator.api.rendering import CollectionFacts, JobFacts, job_to_wire
from scheduler_emulator.domain.clock import isoformat_z
from scheduler_emulator.domain.states import JobState
from scheduler_emulator.schemas.job import service_spelling
from scheduler_emulator.service import cloud_services, collections, jobs
from scheduler_emulator.service.refs import CollectionRef
from scheduler_emulator.store.models import JobHistoryRow, JobRow

# The fields of a classic job a client may send; "id" and "status" (read-only) are dropped, as is the
# state PATCH's "stateDetails" (a free-text reason the emulator does not keep).
_WRITABLE = ("startTime", "action", "recurrence", "state")
_IGNORED = ("id", "status", "stateDetails")


def to_classic(collection: CollectionFacts, job: JobFacts) -> dict[str, Any]:
    """A job as the classic surface shows it: ARM's properties, flat, with the bare job id."""
    return {"id": job.name, **job_to_wire(collection, job)["properties"]}


def history_to_classic(job: JobRow, entry: JobHistoryRow) -> dict[str, Any]:
    item: dict[str, Any] = {
        "jobId": job.name,
        "timestamp": isoformat_z(entry.end_time or entry.start_time),
        "startTime": isoformat_z(entry.start_time),
    }
    if entry.end_time is not None:
        item["endTime"] = isoformat_z(entry.end_time)
    item.update(
        # as the job's own state is answered (docs/reference/arm-api.md#enumerations)
        state=service_spelling(job.state),
        status=entry.status,
        message=entry.message,
        actionName=entry.action_name,
        retryCount=entry.retry_count,
        repeatCount=entry.repeat_count,
    )
    return item


async def _definition(request: Request) -> dict[str, Any]:
    """The flat job body: its writable fields; unknown ones are left for validation to name."""
    body = parse_json_object(await read_body(request))
    return {key: value for key, value in body.items() if key not in _IGNORED}


async def put(request: Request, subscription: str, cloud_service: str, collection_name: str, name: str) -> Response:
    definition = await _definition(request)
    ref = cloud_services.collection_ref(subscription, cloud_service, collection_name)
    return await _write(request, ref, name, definition=definition)


async def post(request: Request, subscription: str, cloud_service: str, collection_name: str) -> Response:
    """Create with a generated id → exactly 201 (the npm client requires it)."""
    definition = await _definition(request)
    name = uuid.uuid4().hex
    ref = cloud_services.collection_ref(subscription, cloud_service, collection_name)
    return await _write(request, ref, name, definition=definition)


async def _write(request: Request, ref: CollectionRef, name: str, *, definition: dict[str, Any]) -> Response:
    """Create (201) or replace (200) the job ``name`` from its flat ``definition``."""
    moment, floor = now(request), retry_floor(request)

    def work(session: Session) -> tuple[bool, dict[str, Any]]:
        collection, job, created = jobs.put(session, ref, name, definition, moment=moment, floor=floor)
        accepted(session, request, ref.subscription_id)
        return created, to_classic(collection, job)

    created, body = await in_session(request, work, wake=True)
    return JSONResponse(body, status_code=201 if created else 200)


async def get(request: Request, subscription: str, cloud_service: str, collection_name: str, name: str) -> Response:
    ref = cloud_services.collection_ref(subscription, cloud_service, collection_name)

    def work(connection: Connection) -> dict[str, Any]:
        return to_classic(*jobs.read_in(connection, ref, name))  # one statement for both, as the ARM GET

    return JSONResponse(await read_one_statement(request, work))


async def patch(request: Request, subscription: str, cloud_service: str, collection_name: str, name: str) -> Response:
    """A merge of the top-level fields sent; ``state`` only Enabled or Disabled."""
    changes = await _definition(request)
    if "state" in changes:
        changes["state"] = _enabled_or_disabled(changes["state"])
    moment, floor = now(request), retry_floor(request)
    ref = cloud_services.collection_ref(subscription, cloud_service, collection_name)

    def work(session: Session) -> dict[str, Any]:
        collection = collections.get(session, ref)
        job = jobs.patch(session, collection, name, changes, moment=moment, floor=floor)
        accepted(session, request, subscription)
        return to_classic(collection, job)

    return JSONResponse(await in_session(request, work, wake=True))


async def patch_all(request: Request, subscription: str, cloud_service: str, collection_name: str) -> Response:
    """``PATCH .../jobs`` with ``{"state": ...}``: every enabled or disabled job takes it; the jobs after."""
    body = parse_json_object(await read_body(request))
    if "state" not in body:
        raise wire.bad_request("The value of 'state' is required.")
    state = _enabled_or_disabled(body["state"])
    moment = now(request)
    ref = cloud_services.collection_ref(subscription, cloud_service, collection_name)

    def work(session: Session) -> list[dict[str, Any]]:
        collection = collections.get(session, ref)
        jobs.set_all_states(session, collection, state, moment)
        accepted(session, request, subscription)
        session.flush()
        return [
            to_classic(collection, job)
            for job in jobs.list_page(session, collection, state=None, skip=0, limit=10_000, by_name=True)
        ]

    return JSONResponse(await in_session(request, work, wake=True))


async def delete(request: Request, subscription: str, cloud_service: str, collection_name: str, name: str) -> Response:
    ref = cloud_services.collection_ref(subscription, cloud_service, collection_name)

    def work(session: Session) -> None:
        jobs.delete(session, collections.get(session, ref), name)
        accepted(session, request, subscription)

    await in_session(request, work)
    return Response(status_code=200)  # not 204: the npm client treats 204 as an error


async def list_page(request: Request, subscription: str, cloud_service: str, collection_name: str) -> Response:
    page = page_of(request)
    state = wire.equality_filter(request, ("state",), jobs.JOB_STATES)
    ref = cloud_services.collection_ref(subscription, cloud_service, collection_name)

    def work(session: Session) -> list[dict[str, Any]]:
        collection = collections.get(session, ref)
        rows = jobs.list_page(session, collection, state=state, skip=page.skip, limit=page.top, by_name=True)
        return [to_classic(collection, job) for job in rows]

    return JSONResponse(await in_read_session(request, work))


async def history(request: Request, subscription: str, cloud_service: str, collection_name: str, name: str) -> Response:
    page = page_of(request)
    status = wire.equality_filter(request, ("status", "state"), jobs.HISTORY_STATUSES)
    ref = cloud_services.collection_ref(subscription, cloud_service, collection_name)

    def work(session: Session) -> list[dict[str, Any]]:
        collection = collections.get(session, ref)
        job, rows = jobs.history_page(session, collection, name, status=status, skip=page.skip, limit=page.top)
        return [history_to_classic(job, entry) for entry in rows]

    return JSONResponse(await in_read_session(request, work))


def _enabled_or_disabled(value: object) -> str:
    for state in (JobState.Enabled, JobState.Disabled):
        if isinstance(value, str) and value.lower() == state.lower():
            return state.value
    raise wire.bad_request("The value of 'state' is invalid: it must be Enabled or Disabled.")
