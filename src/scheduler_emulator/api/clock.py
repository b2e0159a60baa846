"""Test support (docs/reference/test-support.md#virtual-clock): the virtual clock (``GET``/``POST /_emulator/clock``)
and ``POST /_emulator/reset``. Same auth as the rest of the API (the pipeline's)."""

from __future__ import annotations

from datetime import UTC, datetime
from functools import partial
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from pydantic import TypeAdapter, ValidationError

from scheduler_emulator.api import errors
from scheduler_emulator.api.context import in_session, json_object
from scheduler_emulator.domain.clock import Clock, isoformat_z
from scheduler_emulator.domain.durations import parse_duration
from scheduler_emulator.schemas.common import DateTime
from scheduler_emulator.service import clock as clock_rules
from scheduler_emulator.stepping import ClockStepper
from scheduler_emulator.store import repository as repo

router = APIRouter(prefix="/_emulator")

MAX_OCCURRENCES = clock_rules.MAX_OCCURRENCES
_LATEST = datetime(9999, 12, 31, tzinfo=UTC)
_DATETIME: TypeAdapter[datetime] = TypeAdapter(DateTime)


@router.get("/clock")
async def get_clock(request: Request) -> Response:
    clock: Clock = request.app.state.clock
    moment = await clock.refresh()
    return JSONResponse({"mode": request.app.state.settings.dispatch.clock, "now": isoformat_z(moment)})


@router.post("/clock")
async def move_clock(request: Request) -> Response:
    """``{"advance": "PT1H"}`` or ``{"to": "...Z"}``: run everything due up to then, in time order, at its
    own virtual instant; answers once all of it has finished."""
    body = await json_object(request)
    if not request.app.state.settings.dispatch.virtual_clock:
        raise errors.conflict("The clock is real; start the emulator with --clock virtual to move time.")
    stepper: ClockStepper | None = request.app.state.stepper
    if stepper is None:
        raise errors.conflict("This process runs no dispatcher (--no-dispatcher): advance the clock on one that does.")
    async with stepper.lock:
        start = await stepper.clock.refresh()
        target = _target(body, start)
        count = await in_session(request, partial(clock_rules.occurrences_by, start=start, target=target))
        if clock_rules.too_many(count):
            raise errors.bad_request(
                f"{count if count <= MAX_OCCURRENCES + 1 else 'more than ' + str(MAX_OCCURRENCES)} occurrences fall "
                f"due by {isoformat_z(target)}; at most {MAX_OCCURRENCES} run in one step: advance in smaller steps."
            )
        try:
            counts = await stepper.advance(target)
        except TimeoutError as exc:
            raise errors.service_unavailable(f"The advance did not finish: {exc}.") from None
    return JSONResponse({"now": isoformat_z(stepper.clock.now()), **counts})


@router.post("/reset")
async def reset(request: Request) -> Response:
    """Remove every collection, job, history entry and classic cloud service."""
    await in_session(request, repo.reset_everything, wake=True)
    return Response(status_code=200)


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
