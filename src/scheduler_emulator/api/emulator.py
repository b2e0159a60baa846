"""Emulator extensions under ``/_emulator/`` (docs/reference/test-support.md): health and recurrence preview."""

from __future__ import annotations

import contextlib
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from sqlalchemy import text
from sqlalchemy.orm import Session

from scheduler_emulator import __version__
from scheduler_emulator.api import errors
from scheduler_emulator.api.context import in_read_session, in_session, now, read_body
from scheduler_emulator.api.preview import HeavyWork, compute_preview
from scheduler_emulator.dispatcher.host import DispatcherHost
from scheduler_emulator.store.overview import count_due

router = APIRouter(prefix="/_emulator")
metrics_router = APIRouter()


@router.post("/recurrence/preview")
async def preview_recurrence(request: Request) -> Response:
    """What a schedule would do: its first ``count`` occurrences from ``now``, the dispatcher's own code path.

    The body is read here and everything else happens in a worker process (api.preview), at most
    ``--max-heavy-requests`` at once (429 beyond), so that previews cannot stall the API or the dispatcher."""
    raw = await read_body(request)
    heavy: HeavyWork = request.app.state.heavy_work
    async with heavy.slot():
        status, body = await heavy.run(compute_preview, raw, now(request))
    return JSONResponse(body, status_code=status)


@router.get("/health")
async def health(request: Request) -> Response:
    """Liveness and what the instance runs on; 503 while the database is unreachable."""
    settings = request.app.state.settings
    dispatcher: DispatcherHost | None = request.app.state.dispatcher
    body: dict[str, Any] = {
        "status": "ok",
        "version": __version__,
        "database": settings.store.kind,
        # "down": its process (dispatcher/child.py) has ended, and is being started again
        "dispatcher": "off" if dispatcher is None else "running" if dispatcher.running() else "down",
        "auth": settings.security.mode,
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
        registry.backlog.set(await in_read_session(request, lambda session: count_due(session, moment)))
    dispatcher: DispatcherHost | None = request.app.state.dispatcher
    # The dispatcher's families from where it runs (dispatcher/host.py); without one, this process's zeros.
    body = registry.render() if dispatcher is None else registry.render(dispatcher=False) + dispatcher.metrics()
    return Response(body, media_type="text/plain; version=0.0.4; charset=utf-8")
