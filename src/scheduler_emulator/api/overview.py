"""The dashboard's overview, search and history export (docs/reference/test-support.md#the-dashboard-and-its-api):
read-only JSON under ``/_emulator/dashboard/``, same auth as the API. Every figure is computed in the database over all
collections with a fixed number of statements (store.overview), whatever the number of jobs."""

from __future__ import annotations

import csv
import io
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import JSONResponse
from sqlalchemy.orm import Session

from scheduler_emulator.api import errors
from scheduler_emulator.api.context import in_read_session, now
from scheduler_emulator.api.permissions import JOBS, readable
from scheduler_emulator.api.rendering import collection_id
from scheduler_emulator.domain.clock import isoformat_z
from scheduler_emulator.domain.describe import describe_schedule
from scheduler_emulator.service import collections, jobs
from scheduler_emulator.service.overview import AttemptCounts
from scheduler_emulator.service.refs import CollectionRef
from scheduler_emulator.store import overview as queries
from scheduler_emulator.store import repository as repo
from scheduler_emulator.store.models import JobCollectionRow, JobHistoryRow, JobRow

router = APIRouter(prefix="/_emulator/dashboard")

NEXT_RUNS = 12
FAILING = 25
SEARCH_LIMIT = 200
MAX_COLLECTIONS = 1000  # the dashboard's collections (api/dashboard.py): a filtered search looks within them
EXPORT_LIMIT = 100_000
MAX_FILTER = 200  # characters in one search field
# The chart's windows: (name, slot length, slots) — the slots end with the one holding "now".
WINDOWS = (("hour", timedelta(minutes=5), 12), ("day", timedelta(hours=1), 24))
EXPORT_COLUMNS = (
    "historyId",
    "status",
    "actionName",
    "expectedExecutionTime",
    "startTime",
    "endTime",
    "retryCount",
    "repeatCount",
    "message",
)


@router.get("/overview")
async def overview(request: Request) -> Response:
    """Totals by job state, main-action tries per slot over the last hour and day (succeeded, failed), the
    next runs of every collection, and the jobs failing now with their last message."""
    moment = now(request)
    virtual = request.app.state.settings.dispatch.virtual_clock
    tally = _attempt_counts(request)

    def work(session: Session) -> dict[str, Any]:
        collection_count, states = queries.counts(session)
        windows = {
            name: _window(session, tally, name=name, moment=moment, width=width, slots=slots)
            for name, width, slots in WINDOWS
        }
        # A job with a retry pending runs next at that retry's time, whatever its schedule says meanwhile.
        runs = [(due, job, collection) for job, collection, due in queries.pending_retries(session, NEXT_RUNS)]
        runs += [
            (job.next_execution_time, job, collection)
            for job, collection in queries.next_runs(session, NEXT_RUNS)
            if job.next_execution_time is not None
        ]
        runs.sort(key=lambda run: (run[0], run[1].id))
        upcoming = [
            {"time": isoformat_z(due), "job": _ref(collection, job), "state": job.state}
            for due, job, collection in runs[:NEXT_RUNS]
        ]
        failing = [_failing(collection, job, last) for job, collection, last in queries.failing_jobs(session, FAILING)]
        return {
            "now": isoformat_z(moment),
            "clock": "virtual" if virtual else "real",
            "collections": collection_count,
            "jobs": sum(states.values()),
            "jobStates": states,
            "attempts": windows,
            "nextRuns": upcoming,
            "failing": failing,
        }

    return JSONResponse(await in_read_session(request, work))


@router.get("/jobs")
async def search(request: Request) -> Response:
    """Jobs of every collection filtered by ``q`` (in the job, collection or resource group name), ``state``,
    ``actionType`` and ``host`` (within the target), all case-insensitive; at most 200, ``truncated`` says
    when more matched."""
    filters = {name: _filter(request, name) for name in ("q", "state", "actionType", "host")}
    visible = readable(request)  # the jobs of the collections its caller may read (docs/reference/authorization.md)

    def work(session: Session) -> dict[str, Any]:
        within = None
        if not visible.everything:
            every = repo.all_collections(session, MAX_COLLECTIONS)
            within = [row.id for row in every if visible.may(JOBS + "/read", collection_id(row))]
        found = queries.search_jobs(
            session,
            text=filters["q"],
            state=filters["state"],
            action_type=filters["actionType"],
            host=filters["host"],
            within=within,
            limit=SEARCH_LIMIT + 1,
        )
        shown = found[:SEARCH_LIMIT]
        latest = repo.latest_history(session, [job.id for job, _ in shown])
        retries = queries.retries_of(session, [job.id for job, _ in shown])
        return {
            "value": [_found(collection, job, latest.get(job.id), retries.get(job.id)) for job, collection in shown],
            "truncated": len(found) > SEARCH_LIMIT,
        }

    return JSONResponse(await in_read_session(request, work))


@router.get("/subscriptions/{subscription_id}/resourceGroups/{resource_group}/jobCollections/{name}/jobs/{job}/export")
async def export_history(
    request: Request,
    subscription_id: str,
    resource_group: str,
    name: str,
    job: str,
    chosen: str = Query("json", alias="format"),
) -> Response:
    """The job's whole history, newest first, as CSV (``format=csv``, a header row of EXPORT_COLUMNS) or JSON
    (``{"value": [{column: value}]}``): the same entries the ARM history API pages through."""
    kind = chosen.lower()
    if kind not in ("csv", "json"):
        raise errors.invalid_field("format", "must be 'csv' or 'json'")
    ref = CollectionRef(subscription_id=subscription_id, resource_group=resource_group, name=name)

    def work(session: Session) -> tuple[str, list[dict[str, Any]]]:
        collection = collections.get(session, ref)
        row = jobs.get(session, collection, job)
        return row.name, [
            _exported(entry) for entry in repo.list_history(session, row, status=None, skip=0, limit=EXPORT_LIMIT)
        ]

    job_name, entries = await in_read_session(request, work)
    filename = "".join(c if c.isascii() and (c.isalnum() or c in "-_.") else "_" for c in job_name) + "-history." + kind
    disposition = {"Content-Disposition": f'attachment; filename="{filename}"'}
    if kind == "json":
        return JSONResponse({"value": entries}, headers=disposition)
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=EXPORT_COLUMNS, lineterminator="\r\n")
    writer.writeheader()
    writer.writerows(entries)
    return Response(text.getvalue(), media_type="text/csv; charset=utf-8", headers=disposition)


def _filter(request: Request, name: str) -> str | None:
    value = request.query_params.get(name, "").strip()
    if len(value) > MAX_FILTER:
        raise errors.invalid_field(name, f"must be at most {MAX_FILTER} characters")
    return value or None


def _attempt_counts(request: Request) -> AttemptCounts:
    state = request.app.state
    counts: AttemptCounts | None = getattr(state, "attempt_counts", None)
    if counts is None:
        counts = state.attempt_counts = AttemptCounts()
    return counts


def _window(
    session: Session, tally: AttemptCounts, *, name: str, moment: datetime, width: timedelta, slots: int
) -> dict[str, Any]:
    """``slots`` slots of ``width``, aligned to whole multiples of it (UTC), the last one holding ``moment``."""
    seconds = int(width.total_seconds())
    end = moment - timedelta(seconds=int(moment.timestamp()) % seconds, microseconds=moment.microsecond) + width
    edges = [end - width * (slots - index) for index in range(slots + 1)]
    counted = tally.count(session, name, edges)
    rows = [
        {
            "start": isoformat_z(edges[index]),
            "succeeded": counted.get((index, "Completed"), 0),
            "failed": counted.get((index, "Failed"), 0),
        }
        for index in range(slots)
    ]
    return {
        "slotSeconds": seconds,
        "start": isoformat_z(edges[0]),
        "end": isoformat_z(edges[-1]),
        "succeeded": sum(row["succeeded"] for row in rows),
        "failed": sum(row["failed"] for row in rows),
        "slots": rows,
    }


def _ref(collection: JobCollectionRow, job: JobRow) -> dict[str, str]:
    return {
        "subscriptionId": collection.subscription_id,
        "resourceGroup": collection.resource_group,
        "collection": collection.name,
        "name": job.name,
    }


def _failing(collection: JobCollectionRow, job: JobRow, last: JobHistoryRow | None) -> dict[str, Any]:
    return {
        "job": _ref(collection, job),
        "state": job.state,
        "status": last.status if last is not None else None,
        "time": isoformat_z(last.start_time) if last is not None else None,
        "message": last.message if last is not None else "",
        "failureCount": job.failure_count,
    }


def _found(
    collection: JobCollectionRow, job: JobRow, last: JobHistoryRow | None, retry_at: datetime | None
) -> dict[str, Any]:
    """``retry_at``: when the retry pending for the job is due (its next run), None when none is."""
    action = job.definition.get("action") or {}
    next_run = retry_at
    if next_run is None and job.state == "Enabled" and collection.state == "Enabled":
        next_run = job.next_execution_time
    found: dict[str, Any] = {
        "job": _ref(collection, job),
        "state": job.state,
        "actionType": action.get("type"),
        "target": _target(action),
        "schedule": describe_schedule(job.definition),
        "nextRun": isoformat_z(next_run) if next_run is not None else None,
    }
    if last is not None:
        found["lastOutcome"] = {"status": last.status, "time": isoformat_z(last.start_time), "message": last.message}
    return found


def _target(action: dict[str, Any]) -> str | None:
    """Where the action goes, in one phrase: the URI without user info, query or fragment (where a token could
    hide), the storage account and queue, or the Service Bus namespace and queue or topic."""
    if isinstance(request := action.get("request"), dict) and isinstance(request.get("uri"), str):
        try:
            parts = urlsplit(request["uri"])
        except ValueError:
            return None
        return f"{parts.scheme}://{parts.netloc.rsplit('@', 1)[-1]}{parts.path}"
    for key, where in (
        ("queueMessage", "queueName"),
        ("serviceBusQueueMessage", "queueName"),
        ("serviceBusTopicMessage", "topicPath"),
    ):
        message = action.get(key)
        if isinstance(message, dict):
            account = message.get("storageAccount") or message.get("namespace")
            return f"{account}/{message.get(where, '')}"
    return None


def _exported(entry: JobHistoryRow) -> dict[str, Any]:
    return {
        "historyId": entry.history_id,
        "status": entry.status,
        "actionName": entry.action_name,
        "expectedExecutionTime": isoformat_z(entry.expected_execution_time) if entry.expected_execution_time else "",
        "startTime": isoformat_z(entry.start_time),
        "endTime": isoformat_z(entry.end_time) if entry.end_time else "",
        "retryCount": entry.retry_count,
        "repeatCount": entry.repeat_count,
        "message": entry.message,
    }
