"""Both roles in one process (dispatcher/here.py: the dispatcher on the API's event loop): the service in-process
(the app over httpx.ASGITransport, the wall clock, its dispatcher) on a real store and a real HTTP target. A job
created through the API fires at once although the dispatcher, with nothing due, would not look again for a
minute (the API wakes its own dispatcher; on PostgreSQL its NOTIFY does too); an attempt in flight at shutdown
finishes within the grace and is recorded."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import httpx
import pytest
from support.databases import fresh_database
from support.scratch_store import BACKENDS
from support.target_server import TargetServer

from scheduler_emulator.app import create_app
from scheduler_emulator.config import Settings

API = {"api-version": "2016-03-01"}
COLLECTION = "/subscriptions/s/resourceGroups/g/providers/Microsoft.Scheduler/jobCollections/c"
BOUND = 30.0  # seconds: only a fire that never comes waits this long


@pytest.fixture(params=BACKENDS)
def database_url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with fresh_database(request.param, tmp_path_factory) as url:
        yield url


def test_a_job_made_through_the_api_fires_at_once_and_its_attempt_in_flight_ends_within_the_grace(
    database_url: str, target: TargetServer
) -> None:
    settings = Settings(database_url=database_url, poll_interval=60, shutdown_grace=20)
    app = create_app(settings)
    target.respond("/slow", delay=1.0)
    job = {"properties": {"action": {"type": "Http", "request": {"uri": target.url("/slow"), "method": "GET"}}}}
    first = {"properties": {"action": {"type": "Http", "request": {"uri": target.url("/first"), "method": "GET"}}}}

    async def scenario() -> tuple[list[int], float]:
        async with (
            app.router.lifespan_context(app),
            httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as client,
        ):
            statuses = [
                (await client.put(COLLECTION, params=API, json={"location": "westus"})).status_code,
                (await client.put(f"{COLLECTION}/jobs/first", params=API, json=first)).status_code,
            ]
            # Once the first has fired, the dispatcher has nothing due: it sleeps for its poll interval (60 s).
            await asyncio.to_thread(target.wait_for, 1, BOUND, "/first")
            await asyncio.sleep(0.5)  # past the cycle that claimed the first (the wait below is the assertion)
            statuses.append((await client.put(f"{COLLECTION}/jobs/now", params=API, json=job)).status_code)
            started = time.monotonic()
            await asyncio.to_thread(target.wait_for, 1, BOUND, "/slow")  # the request reached the target
            waited = time.monotonic() - started
        return statuses, waited  # the lifespan's end waited for the attempt (grace 20 s)

    statuses, waited = asyncio.run(scenario())
    assert statuses == [201, 201, 201]
    assert waited < BOUND and len(target.requests("/slow")) == 1

    # The attempt that was in flight when the app stopped was recorded as completed (read by a new app).
    async def history() -> httpx.Response:
        again = create_app(Settings(database_url=database_url, dispatcher=False))
        async with (
            again.router.lifespan_context(again),
            httpx.AsyncClient(transport=httpx.ASGITransport(app=again), base_url="http://127.0.0.1") as client,
        ):
            return await client.get(f"{COLLECTION}/jobs/now/history", params=API)

    answer = asyncio.run(history())
    assert answer.status_code == 200, answer.text
    entries = answer.json()["value"]
    assert [entry["properties"]["status"] for entry in entries] == ["Completed"], entries
