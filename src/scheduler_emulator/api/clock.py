"""Test support (SPEC §10): the virtual clock (``GET``/``POST /_emulator/clock``) and ``POST
/_emulator/reset``. Same auth as the rest of the API (the pipeline's)."""

from __future__ import annotations

import asyncio
import itertools
from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from pydantic import TypeAdapter, ValidationError
from sqlalchemy.orm import Session

from scheduler_emulator.api import errors
from scheduler_emulator.api.context import in_session, json_object
from scheduler_emulator.domain import recurrence as rec
from scheduler_emulator.domain.clock import isoformat_z
from scheduler_emulator.domain.durations import parse_duration
from scheduler_emulator.schemas.common import DateTime
from scheduler_emulator.service.jobs import stored_properties
from scheduler_emulator.store import repository as repo
from scheduler_emulator.virtual_clock import VirtualClock

router = APIRouter(prefix="/_emulator")

MAX_OCCURRENCES = 100_000  # in one advance; more → 400, asking for smaller steps
_LATEST = datetime(9999, 12, 31, tzinfo=UTC)
_DATETIME: TypeAdapter[datetime] = TypeAdapter(DateTime)


def _virtual(request: Request) -> VirtualClock:
    clock = request.app.state.clock
    if not isinstance(clock, VirtualClock):
        raise errors.conflict("The clock is real; start the emulator with --clock virtual to move time.")
    return clock


@router.get("/clock")
async def get_clock(request: Request) -> Response:
    clock = request.app.state.clock
    if isinstance(clock, VirtualClock):
        clock.refresh()
        return JSONResponse({"mode": "virtual", "now": isoformat_z(clock.now())})
    return JSONResponse({"mode": "real", "now": isoformat_z(clock.now())})


@router.post("/clock")
async def move_clock(request: Request) -> Response:
    """``{"advance": "PT1H"}`` or ``{"to": "...Z"}``: run everything due up to then, in time order, at its
    own virtual instant; answers once all of it has finished."""
    body = await json_object(request)
    clock = _virtual(request)
    dispatcher = getattr(request.app.state, "dispatcher", None)
    if dispatcher is None:
        raise errors.conflict("This process runs no dispatcher (--no-dispatcher): advance the clock on one that does.")
    async with _lock(request):
        start = clock.refresh()
        target = _target(body, start)
        count = await in_session(request, lambda session: _occurrences_by(session, start, target))
        if count > MAX_OCCURRENCES:
            raise errors.bad_request(
                f"{count if count <= MAX_OCCURRENCES + 1 else 'more than ' + str(MAX_OCCURRENCES)} occurrences fall "
                f"due by {isoformat_z(target)}; at most {MAX_OCCURRENCES} run in one step: advance in smaller steps."
            )
        try:
            counts = await dispatcher.advance(target)
        except TimeoutError as exc:
            raise errors.service_unavailable(f"The advance did not finish: {exc}.") from None
    return JSONResponse({"now": isoformat_z(clock.now()), **counts})


@router.post("/reset")
async def reset(request: Request) -> Response:
    """Remove every collection, job, history entry and classic cloud service."""
    await in_session(request, repo.reset_everything, wake=True)
    return Response(status_code=200)


def _lock(request: Request) -> asyncio.Lock:
    state = request.app.state
    lock: asyncio.Lock | None = getattr(state, "clock_lock", None)
    if lock is None:
        lock = state.clock_lock = asyncio.Lock()
    return lock


def _target(body: dict[str, Any], now: datetime) -> datetime:
    fields = {key for key in body if key in ("advance", "to")}
    unknown = set(body) - {"advance", "to"}
    if unknown or len(fields) != 1:
        raise errors.bad_request("Send exactly one of 'advance' (an ISO-8601 duration) or 'to' (a UTC time).")
    if "advance" in body:
        value = body["advance"]
        if not isinstance(value, str):
            raise errors.invalid_field("advance", "must be an ISO-8601 duration such as 'PT1H'")
        text = value.strip()
        if text.startswith("-"):
            raise errors.invalid_field("advance", "must not be negative: the clock only moves forward")
        try:
            length = parse_duration(text)
        except ValueError as exc:
            raise errors.invalid_field("advance", str(exc)) from None
        if not text.upper().startswith("P"):
            raise errors.invalid_field("advance", "must be an ISO-8601 duration such as 'PT1H'")
        if length > _LATEST - now:
            raise errors.invalid_field("advance", "moves the clock past the year 9999")
        return now + length
    try:
        target: datetime = _DATETIME.validate_python(body["to"])
    except ValidationError:
        raise errors.invalid_field("to", "must be a UTC time such as '2030-01-01T00:00:00Z'") from None
    if target < now:
        raise errors.invalid_field("to", f"is before the clock's time {isoformat_z(now)}: the clock only moves forward")
    return target


def _occurrences_by(session: Session, start: datetime, target: datetime) -> int:
    """How many occurrences fall due by ``target`` (counting stops past the limit)."""
    total = 0
    for job in repo.scheduled_jobs_due_by(session, target):
        try:
            timing = stored_properties(job).timing()
        except ValueError:
            continue  # set aside by the dispatcher
        due_from = job.next_execution_time or start
        series = rec.occurrences(timing, job.series_origin)
        for moment in itertools.islice(series, 10 * MAX_OCCURRENCES):
            if moment > target or total > MAX_OCCURRENCES:
                break
            if moment >= due_from:
                total += 1
        if total > MAX_OCCURRENCES:
            break
    return total
