"""The ARM routes are served without FastAPI's per-request routing and dependency work (api/direct.py): the
same answers as FastAPI gives for every kind of request, errors and fall-throughs included; the route a
request took in the metrics; every Scheduler route served that way."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import ExitStack
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi import APIRouter, Depends, Request, Response
from starlette.testclient import TestClient
from support.clocks import SetClock
from support.databases import TEST_SECRET_KEY, fresh_database

from scheduler_emulator.api import history, job_collections, jobs
from scheduler_emulator.api import resources as resources_api
from scheduler_emulator.api.direct import DirectRoutes, served_directly
from scheduler_emulator.app import create_app
from scheduler_emulator.config import Settings

SUB = "/subscriptions/00000000-0000-0000-0000-00000000d1ec"
GROUP = f"{SUB}/resourceGroups/direct-rg"
COLLECTION = f"{GROUP}/providers/Microsoft.Scheduler/jobCollections/direct-jc"
JOB = f"{COLLECTION}/jobs/direct-job"
V = "api-version=2016-03-01"
FRONT = "api-version=2021-04-01"
START = datetime(2031, 1, 2, 3, 4, 5, tzinfo=UTC)

JOB_BODY = {
    "properties": {
        "startTime": START.isoformat(),
        "action": {"type": "Http", "request": {"uri": "http://127.0.0.1:9/direct", "method": "GET"}},
        "recurrence": {"frequency": "Hour", "interval": 1},
    }
}

# (method, path and query, JSON body or None, raw body or None): every surface and outcome the table touches.
REQUESTS: list[tuple[str, str, Any, bytes | None]] = [
    ("PUT", f"{COLLECTION}?{V}", {"location": "westus", "properties": {"sku": {"name": "Standard"}}}, None),
    ("PUT", f"{JOB}?{V}", JOB_BODY, None),
    ("GET", f"{JOB}?{V}", None, None),
    ("GET", f"{JOB.upper().replace('DIRECT-', 'direct-')}?{V}", None, None),  # literal segments in any case
    ("GET", f"{COLLECTION}/jobs/nope?{V}", None, None),  # 404
    ("PUT", f"{COLLECTION}/jobs/bad?{V}", {"properties": {"action": {"type": "Http"}}}, None),  # 400, field path
    ("PUT", f"{COLLECTION}/jobs/bad?{V}", None, b"[1, 2"),  # not JSON
    ("PUT", f"{COLLECTION}/jobs/bad?{V}", None, b"[1, 2]"),  # JSON, not an object
    ("PATCH", f"{JOB}?{V}", {"properties": {"state": "Disabled"}}, None),
    ("GET", f"{COLLECTION}/jobs?{V}&$top=5", None, None),
    ("GET", f"{JOB}/history?{V}", None, None),
    ("POST", f"{JOB}/run?{V}", None, None),
    ("GET", f"{JOB}?api-version=2099-01-01", None, None),  # the pipeline's refusal, before any route
    ("HEAD", f"{JOB}?{V}", None, None),  # no HEAD route: FastAPI's 405
    ("POST", f"{JOB}?{V}", None, None),  # the path has no POST: FastAPI's 405 with Allow
    ("GET", f"{JOB}/?{V}", None, None),  # a trailing slash: FastAPI's answer
    ("GET", f"{COLLECTION}?{V}", None, None),
    ("GET", f"{GROUP}/providers/Microsoft.Scheduler/jobCollections?{V}", None, None),
    ("PUT", f"{SUB}/resourcegroups/direct-rg2?{FRONT}", {"location": "westus"}, None),
    ("HEAD", f"{SUB}/resourcegroups/direct-rg2?{FRONT}", None, None),
    ("GET", f"{SUB}/resourcegroups?{FRONT}", None, None),
    ("GET", f"{SUB}/providers/Microsoft.Scheduler?{FRONT}", None, None),
    ("GET", f"{GROUP}/providers/Microsoft.Web/sites/app1?{FRONT}", None, None),  # the catch-all route (a blocker)
    ("DELETE", f"{JOB}?{V}", None, None),
    ("DELETE", f"{SUB}/resourcegroups/direct-rg2?{FRONT}", None, None),  # 202 with a Location (url_for)
    ("GET", f"{JOB}?{V}", None, None),  # gone
]

OPERATION = re.compile(r"operationresults/[0-9a-f]+")  # a new operation's id
VOLATILE_HEADERS = {"date", "x-ms-request-id", "x-ms-correlation-request-id", "content-length"}


def answers(client: TestClient) -> list[tuple[Any, ...]]:
    """What a client sees of each request: status, headers but the per-request ones, body."""
    seen = []
    for method, url, body, raw in REQUESTS:
        content = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        headers = {"Content-Type": "application/json"} if content is not None else {}
        response = client.request(method, url, content=content, headers=headers, follow_redirects=False)
        kept = sorted(
            (k, OPERATION.sub("operationresults/*", v))
            for k, v in response.headers.items()
            if k not in VOLATILE_HEADERS
        )
        seen.append((method, url, response.status_code, kept, response.text))
    return seen


def settings_for(database_url: str, data_dir: Any) -> Settings:
    return Settings(
        data_dir=data_dir,
        database_url=database_url,
        dispatcher=False,
        secret_key=TEST_SECRET_KEY,
        log_level="warning",
    )


@pytest.fixture
def two_apps(backend: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestClient, TestClient]]:
    """The app as built, and the same app without its direct routes, each on a store of its own and one clock."""
    clock = SetClock(START - timedelta(days=1))
    with ExitStack() as stack:
        clients = []
        for direct in (True, False):
            url = stack.enter_context(fresh_database(backend.name, tmp_path_factory))
            app = create_app(settings_for(url, tmp_path_factory.mktemp("direct")), clock)
            if not direct:
                app.router.routes[:] = [r for r in app.router.routes if not isinstance(r, DirectRoutes)]
            clients.append(stack.enter_context(TestClient(app, base_url="https://127.0.0.1")))
        yield clients[0], clients[1]


def test_direct_routes_answer_every_request_as_fastapi_does(two_apps: tuple[TestClient, TestClient]) -> None:
    direct, framework = two_apps
    with_direct, without = answers(direct), answers(framework)
    for one, other in zip(with_direct, without, strict=True):
        assert one == other
    statuses = [status for _, _, status, _, _ in with_direct]
    # The list covers what it means to: successes, errors of each kind, and FastAPI's own answers.
    assert {200, 201, 202, 400, 404, 405}.issubset(statuses), statuses


def test_a_request_served_directly_is_counted_under_its_route(app: TestClient) -> None:
    """The access log and the metrics name the route's template, as for a route FastAPI served."""
    app.put(f"{COLLECTION}?{V}", json={"location": "westus", "properties": {"sku": {"name": "Standard"}}})
    assert app.get(f"{COLLECTION}/jobs/nope?{V}").status_code == 404
    metrics = app.get("/metrics").text
    template = jobs.JOB
    assert f'route="{template}"' in metrics and 'status="404"' in metrics, metrics[:2000]


def test_every_scheduler_route_is_served_directly(tmp_path: Any) -> None:
    """A handler changed so that FastAPI must serve it (a typed or query parameter, a dependency) would fall
    back to the slow path without a word: the app's table is checked here."""
    app = create_app(settings_for(f"sqlite:///{tmp_path / 'scheduler.db'}", tmp_path))
    (table,) = [route for route in app.router.routes if isinstance(route, DirectRoutes)]
    assert app.router.routes[0] is table  # first: ahead of FastAPI's own routes
    routers = (job_collections.router, jobs.router, history.router, *resources_api.routers)
    every_route = [route for router in routers for route in router.routes]
    assert sorted(map(id, [*table.served, *table.left_to_fastapi])) == sorted(map(id, every_route))
    # The one exception: the front door's catch-all for other providers' resources takes a path convertor.
    assert [f"{sorted(route.methods)} {route.path}" for route in table.left_to_fastapi] == [  # type: ignore[attr-defined]
        "['GET'] /subscriptions/{subscription_id}/resourceGroups/{resource_group}/providers/"
        "{namespace:arm_foreign_namespace}/{resource_path:path}"
    ]


def test_routes_that_need_fastapi_are_not_served_directly() -> None:
    router = APIRouter()

    @router.get("/a/{x}")
    async def typed(request: Request, x: int) -> Response:  # a convertor-free but typed parameter
        return Response()

    @router.get("/b/{x}")
    async def queried(request: Request, x: str, q: str = "") -> Response:  # a query parameter
        return Response()

    @router.get("/c/{x}", dependencies=[Depends(lambda: None)])
    async def depending(request: Request, x: str) -> Response:
        return Response()

    @router.get("/d/{x}")
    def blocking(request: Request, x: str) -> Response:  # not async: FastAPI runs it on a thread
        return Response()

    @router.get("/e/{x}")
    async def plain(request: Request, x: str) -> Response:
        return Response()

    assert [served_directly(route) for route in router.routes] == [False, False, False, False, True]


def test_a_route_fastapi_must_serve_keeps_its_place_in_the_order() -> None:
    """FastAPI answers with the first route matching path and method: a route served directly that comes after
    one FastAPI must serve does not take that one's requests."""
    from starlette.routing import Match

    router = APIRouter()

    @router.get("/x/{n:int}")
    async def numbered(request: Request, n: int) -> Response:
        return Response()

    @router.get("/x/{name}")
    async def named(request: Request, name: str) -> Response:
        return Response()

    table = DirectRoutes([router])

    def match(method: str, path: str) -> tuple[Match, Any]:
        found, child = table.matches({"type": "http", "method": method, "path": path})
        return found, child.get("endpoint")

    assert match("GET", "/x/12") == (Match.NONE, None)  # numbered's: FastAPI's routing serves it
    assert match("GET", "/x/twelve") == (Match.FULL, named)
    assert match("PUT", "/x/twelve") == (Match.NONE, None)  # FastAPI's 405
    assert match("GET", "/y") == (Match.NONE, None)
