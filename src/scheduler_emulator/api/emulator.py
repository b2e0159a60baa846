"""Emulator extensions under ``/_emulator/`` (SPEC §10): health and recurrence preview."""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from pydantic import Field
from sqlalchemy import text
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from scheduler_emulator import __version__
from scheduler_emulator.api import errors
from scheduler_emulator.api.context import in_session, json_object, now, validated
from scheduler_emulator.domain import recurrence as rec
from scheduler_emulator.domain.clock import isoformat_z
from scheduler_emulator.domain.errors import FieldError
from scheduler_emulator.domain.job_rules import HORIZON
from scheduler_emulator.schemas.common import DateTime, WireModel
from scheduler_emulator.schemas.job import Recurrence, timing_of
from scheduler_emulator.store.dispatching import count_due

router = APIRouter(prefix="/_emulator")
metrics_router = APIRouter()

MAX_PREVIEW = 1000


class PreviewIn(WireModel):
    start_time: DateTime | None = None
    recurrence: Recurrence | None = None
    now: DateTime | None = None
    count: int = Field(10, ge=1, le=MAX_PREVIEW)


PREVIEW_BUDGET_SECONDS = 1.0


class PreviewBudgetExceeded(Exception):
    """The preview took more compute than ``PREVIEW_BUDGET_SECONDS``."""


def _preview(timing: rec.Timing, moment: datetime, count: int) -> tuple[list[datetime], bool]:
    """Up to ``count`` occurrences, stopping once the compute budget is spent (runs on a worker thread)."""
    deadline = time.monotonic() + PREVIEW_BUDGET_SECONDS
    found: list[datetime] = []
    for occurrence in rec.occurrences(timing, moment):
        if len(found) == count:
            return found, False
        found.append(occurrence)
        if time.monotonic() > deadline:
            raise PreviewBudgetExceeded
    return found, True


@router.post("/recurrence/preview")
async def preview_recurrence(request: Request) -> Response:
    """What a schedule would do: its first ``count`` occurrences from ``now``, the dispatcher's own code path.

    The walk runs on a worker thread with a compute budget, at most ``--max-heavy-requests`` at once
    (429 beyond), so that previews cannot stall the API or the dispatcher (SPEC §8)."""
    spec = validated(PreviewIn, await json_object(request))
    moment = spec.now or now(request)
    timing = timing_of(spec.start_time, spec.recurrence)
    try:
        horizon = moment + HORIZON
    except OverflowError:  # the 18-month window a job may look ahead must fit in years 1-9999
        raise errors.from_field_error(FieldError("now", "is less than 18 months before the end of year 9999")) from None
    if timing.start_time is not None and timing.start_time > horizon:
        raise errors.from_field_error(FieldError("startTime", "is more than 18 months in the future"))
    if timing.recurrence is not None and timing.recurrence.end_time is not None and timing.recurrence.end_time < moment:
        raise errors.from_field_error(FieldError("recurrence.endTime", "is in the past"))
    limiter: HeavyWork = request.app.state.heavy_work
    async with limiter.slot():
        try:
            found, complete = await run_in_threadpool(_preview, timing, moment, spec.count)
        except PreviewBudgetExceeded:
            raise errors.bad_request(
                f"The preview needs more than {PREVIEW_BUDGET_SECONDS:g} s of computation; ask for a smaller count "
                "or a simpler schedule.",
                "count",
            ) from None
        except OverflowError:
            raise errors.from_field_error(FieldError("now", "leads the schedule beyond year 9999")) from None
    return JSONResponse({"occurrences": [isoformat_z(t) for t in found], "complete": complete})


class HeavyWork:
    """At most ``limit`` CPU-heavy requests at once; the next is refused with 429 rather than queued."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.running = 0

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Hold one of the slots for the block; 429 ``TooManyRequests`` with ``Retry-After`` if none is free."""
        if self.running >= self.limit:
            raise errors.ArmError(
                429,
                "TooManyRequests",
                f"{self.limit} CPU-heavy requests are already being computed; retry shortly.",
                headers={"Retry-After": "1"},
            )
        self.running += 1
        try:
            yield
        finally:
            self.running -= 1


@router.get("/health")
async def health(request: Request) -> Response:
    """Liveness and what the instance runs on; 503 while the database is unreachable."""
    settings = request.app.state.settings
    dispatcher = getattr(request.app.state, "dispatcher", None)
    body: dict[str, Any] = {
        "status": "ok",
        "version": __version__,
        "database": settings.database_kind,
        "dispatcher": "running" if dispatcher is not None else "off",
    }

    def ping(session: Session) -> None:
        session.execute(text("SELECT 1"))

    try:
        await in_session(request, ping)
    except errors.ArmError as exc:
        return JSONResponse({**body, "status": "unavailable", "reason": exc.message}, status_code=503)
    except Exception as exc:  # noqa: BLE001 - any failure to reach the store is "unavailable"
        return JSONResponse({**body, "status": "unavailable", "reason": str(exc).splitlines()[0]}, status_code=503)
    return JSONResponse(body)


@metrics_router.get("/metrics")
async def metrics(request: Request) -> Response:
    """Prometheus text format; the due backlog is measured now."""
    registry = request.app.state.metrics
    moment = now(request)
    with contextlib.suppress(errors.ArmError):  # the database is away: report the rest
        registry.backlog.set(await in_session(request, lambda session: count_due(session, moment)))
    return Response(registry.render(), media_type="text/plain; version=0.0.4; charset=utf-8")
