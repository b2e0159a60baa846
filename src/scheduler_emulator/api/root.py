"""``/``: a browser is led to the dashboard; any other client gets the ARM answer for a path with no route."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from fastapi.responses import RedirectResponse

from scheduler_emulator.api import errors

router = APIRouter()

DASHBOARD_PATH = "/_emulator/ui/"  # the dashboard's page (api.dashboard)


@router.api_route("/", methods=["GET", "HEAD"], include_in_schema=False)
async def root(request: Request) -> Response:
    """307 to the dashboard for a client that takes HTML (a browser's Accept names text/html); else ARM's JSON
    404, as management.azure.com answers a path it has no route for."""
    if "text/html" in request.headers.get("accept", "").lower():
        return RedirectResponse(DASHBOARD_PATH, status_code=307)
    return errors.route_not_found(request.url.path).response()
