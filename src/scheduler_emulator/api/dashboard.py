"""The dashboard (docs/reference/test-support.md#the-dashboard-and-its-api): its page and assets under
``/_emulator/ui/`` (no data in them, so they are served without the API token: the page asks for it and sends it as a
bearer header), and the read-only JSON it needs beyond the ARM API under ``/_emulator/dashboard/`` (same auth as the
API). Every change the page makes is an ARM API call, through the same service code, validation and errors as any
client."""

from __future__ import annotations

from datetime import datetime
from importlib import resources
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse, RedirectResponse
from pydantic import ValidationError
from sqlalchemy.orm import Session

from scheduler_emulator.api.context import in_read_session, json_object, now
from scheduler_emulator.api.permissions import JOBS, SCHEDULER, permitted, readable
from scheduler_emulator.api.rendering import collection_id
from scheduler_emulator.domain import recurrence as rec
from scheduler_emulator.domain.clock import isoformat_z
from scheduler_emulator.domain.describe import describe_schedule
from scheduler_emulator.schemas.job_collection import stored_limits
from scheduler_emulator.schemas.job_shape import masked
from scheduler_emulator.service import collections, jobs
from scheduler_emulator.service.refs import CollectionRef
from scheduler_emulator.store import overview as overview_queries
from scheduler_emulator.store import repository as repo
from scheduler_emulator.store.models import JobCollectionRow, JobHistoryRow, JobRow

router = APIRouter(prefix="/_emulator")

ASSETS = {"app.js": "text/javascript; charset=utf-8", "app.css": "text/css; charset=utf-8"}
UI_PATHS = frozenset({"/_emulator/ui", "/_emulator/ui/", *(f"/_emulator/ui/{name}" for name in ASSETS)})
MASK = "********"
READ = SCHEDULER + "/read"
MAX_COLLECTIONS = 1000
MAX_JOBS = 1000
_SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


def _asset(name: str) -> str:
    return resources.files("scheduler_emulator.ui").joinpath(name).read_text(encoding="utf-8")


@router.get("/ui", include_in_schema=False)
async def ui_redirect() -> Response:
    return RedirectResponse("/_emulator/ui/", status_code=307)


@router.get("/ui/", include_in_schema=False)
async def ui_page() -> Response:
    return Response(_asset("index.html"), media_type="text/html; charset=utf-8", headers=_SECURITY_HEADERS)


@router.get("/ui/{name}", include_in_schema=False)
async def ui_asset(name: str) -> Response:
    if name not in ASSETS:
        return Response(status_code=404)
    return Response(_asset(name), media_type=ASSETS[name], headers=_SECURITY_HEADERS)


@router.get("/dashboard/collections")
async def all_collections(request: Request) -> Response:
    """Every collection of every subscription (the first 1000), with its job count against its quota."""

    shown = readable(request)  # the collections its caller may read (docs/reference/authorization.md#the-dashboard)

    def work(session: Session) -> list[dict[str, Any]]:
        rows = [row for row in repo.all_collections(session, MAX_COLLECTIONS) if shown.may(READ, collection_id(row))]
        counts = repo.job_counts(session, [row.id for row in rows])
        return [_collection_summary(row, counts.get(row.id, 0)) for row in rows]

    return JSONResponse({"value": await in_read_session(request, work)})


@router.get("/dashboard/subscriptions/{subscription_id}/resourceGroups/{resource_group}/jobCollections/{name}/jobs")
async def collection_jobs(request: Request, subscription_id: str, resource_group: str, name: str) -> Response:
    """A collection's jobs with their schedule in words, next three runs and last outcome."""
    ref = CollectionRef(subscription_id=subscription_id, resource_group=resource_group, name=name)
    moment = now(request)
    scope = f"/subscriptions/{subscription_id}/resourceGroups/{resource_group}/providers/{SCHEDULER}/{name}"
    allowed = await permitted(request, {"write": (JOBS + "/write", scope)})  # a new job of this collection

    def work(session: Session) -> dict[str, Any]:
        collection = collections.get(session, ref)
        rows = jobs.list_page(session, collection, state=None, skip=0, limit=MAX_JOBS, by_name=True)
        latest = repo.latest_history(session, [row.id for row in rows])
        retries = overview_queries.retries_of(session, [row.id for row in rows])
        return {
            "permitted": allowed,
            "collection": _collection_summary(collection, len(rows)),
            "now": isoformat_z(moment),
            "jobs": [_job_summary(collection, row, latest.get(row.id), retries.get(row.id)) for row in rows],
        }

    return JSONResponse(await in_read_session(request, work))


@router.get(
    "/dashboard/subscriptions/{subscription_id}/resourceGroups/{resource_group}/jobCollections/{name}/jobs/{job}"
)
async def job_detail(request: Request, subscription_id: str, resource_group: str, name: str, job: str) -> Response:
    """One job: its definition with every secret masked, its schedule in words and next runs, and which of the
    page's changes its caller may make (``permitted``: run, write, delete)."""
    ref = CollectionRef(subscription_id=subscription_id, resource_group=resource_group, name=name)
    scope = f"/subscriptions/{subscription_id}/resourceGroups/{resource_group}/providers/{SCHEDULER}/{name}/jobs/{job}"
    allowed = await permitted(
        request,
        {"run": (JOBS + "/run/action", scope), "write": (JOBS + "/write", scope), "delete": (JOBS + "/delete", scope)},
    )

    def work(session: Session) -> dict[str, Any]:
        collection = collections.get(session, ref)
        row = jobs.get(session, collection, job)
        retry_at = overview_queries.retries_of(session, [row.id]).get(row.id)
        summary = _job_summary(collection, row, None, retry_at)
        return {**summary, "definition": mask_secrets(row.definition), "permitted": allowed}

    return JSONResponse(await in_read_session(request, work))


@router.post("/dashboard/describe")
async def describe(request: Request) -> Response:
    """A recurrence in plain words (the schedule calculator; its occurrences come from the preview)."""
    body = await json_object(request)
    return JSONResponse({"description": describe_schedule(body)})


def mask_secrets(definition: dict[str, Any]) -> dict[str, Any]:
    """The definition with every secret's value (schemas.job_shape.SECRETS) replaced by ``********``."""
    return masked(definition, MASK)


def _collection_summary(row: JobCollectionRow, job_count: int) -> dict[str, Any]:
    try:
        max_jobs: int | None = stored_limits(row.sku, row.properties).max_jobs
    except (ValidationError, ValueError):
        max_jobs = None
    return {
        "id": collection_id(row),
        "subscriptionId": row.subscription_id,
        "resourceGroup": row.resource_group,
        "name": row.name,
        "location": row.location,
        "sku": row.sku,
        "state": row.state,
        "jobCount": job_count,
        "maxJobCount": max_jobs,
    }


def _job_summary(
    collection: JobCollectionRow, row: JobRow, last: JobHistoryRow | None, retry_at: datetime | None
) -> dict[str, Any]:
    """``retry_at``: when the retry pending for the job is due (its next run), None when none is."""
    runs: list[datetime] = [] if retry_at is None else [retry_at]
    if row.state == "Enabled" and collection.state == "Enabled" and row.next_execution_time is not None:
        # After a pending retry, the schedule's runs after it: those due before it are skipped (Postponed).
        runs += _next_runs(row, row.next_execution_time, 3 - len(runs), after=retry_at)
    summary: dict[str, Any] = {
        "name": row.name,
        "state": row.state,
        "schedule": describe_schedule(row.definition),
        "nextRuns": [isoformat_z(t) for t in runs],
        "executionCount": row.execution_count,
        "failureCount": row.failure_count,
        "faultedCount": row.faulted_count,
        "lastExecutionTime": isoformat_z(row.last_execution_time) if row.last_execution_time else None,
    }
    if last is not None:
        summary["lastOutcome"] = {"status": last.status, "time": isoformat_z(last.start_time), "message": last.message}
    return summary


def _next_runs(row: JobRow, first: datetime, count: int, *, after: datetime | None = None) -> list[datetime]:
    """The job's next ``count`` runs from ``first`` (or from its first instant after ``after``, when that is
    later), from the recurrence engine the preview and the dispatcher use."""
    try:
        timing = jobs.stored_properties(row).timing()
    except ValueError:
        return []
    if after is not None and first <= after:
        following = rec.next_occurrence_after(timing, row.series_origin, after)
        if following is None:
            return []
        first = following
    found = [first]
    for _ in range(count - 1):
        following = rec.next_occurrence_after(timing, row.series_origin, found[-1])
        if following is None:
            break
        found.append(following)
    return found
