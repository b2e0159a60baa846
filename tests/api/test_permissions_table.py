"""The route walk (docs/reference/authorization.md#what-each-route-needs): every route the app serves has its entry in
api/permissions.py's TABLE, and every entry names a route, so a new route cannot ship unguarded. The app refuses to
build with a route that has none."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi import APIRouter, FastAPI, Request, Response
from starlette.routing import BaseRoute

from scheduler_emulator.api.direct import DirectRoutes
from scheduler_emulator.api.identity.routes import IdentityRoute
from scheduler_emulator.api.permissions import TABLE, Kind, RouteRules, identity_entries, route_entries
from scheduler_emulator.app import create_app
from scheduler_emulator.config import Settings


def served_keys(app: FastAPI) -> set[tuple[str, str]]:
    """(method, path template) of every route the app serves, walking ``app.routes`` down into included routers."""
    keys: set[tuple[str, str]] = set()

    def walk(routes: list[BaseRoute]) -> None:
        for route in routes:
            if isinstance(route, DirectRoutes):  # the ARM routes again, served first (api/direct.py)
                walk([*route.served, *route.left_to_fastapi])
            elif isinstance(route, IdentityRoute):  # one route for the token service's shapes
                keys.update(identity_entries())
            elif (included := getattr(route, "original_router", None)) is not None:  # FastAPI's include_router
                walk(list(included.routes))
            else:
                keys.update(route_entries(route))

    walk(list(app.router.routes))
    return keys


@pytest.mark.parametrize(
    "flags", [{}, {"auth": "issued", "principals": "app:secret:tenant:sub"}], ids=["no auth", "auth issued"]
)
def test_every_route_has_an_entry_and_every_entry_a_route(flags: dict[str, Any]) -> None:
    app = create_app(Settings(**flags))
    served = served_keys(app)
    assert len(served) > 60  # the walk reached the included routers, not only the app's own routes
    assert sorted(served - TABLE.keys()) == [], "routes without an entry in api/permissions.py's TABLE"
    assert sorted(TABLE.keys() - served) == [], "entries of api/permissions.py's TABLE that no route has"


def test_the_scheduler_and_resources_routes_name_an_action_and_a_scope() -> None:
    """Each ARM route of the Scheduler and the front door is checked at a scope built from its path."""
    params = {
        "subscription_id": "s",
        "resource_group": "g",
        "collection_name": "c",
        "job_name": "j",
        "deployment_name": "d",
        "operation_id": "o",
        "namespace": "Microsoft.Web",
        "resource_path": "sites/w",
    }
    for (method, path), rule in TABLE.items():
        if not path.startswith("/subscriptions/{subscription_id}/"):
            continue
        assert rule.kind in (Kind.CHECK, Kind.LIST, Kind.MEMBER, Kind.BY_ENDPOINT), (method, path)
        if rule.kind is Kind.BY_ENDPOINT:
            continue
        assert rule.scope is not None and rule.scope(params).startswith("/subscriptions/s"), (method, path)
        assert "/" in rule.action_for(params), (method, path)


def test_a_route_without_an_entry_stops_the_app_from_being_built() -> None:
    unguarded = APIRouter()

    @unguarded.post("/_emulator/something-new")
    async def something_new(request: Request) -> Response:
        return Response(status_code=204)

    with pytest.raises(ValueError, match="something-new"):
        RouteRules.of([unguarded], [])
