"""The virtual clock's paths never call the database on the event loop: the service in-process (the app over
httpx.ASGITransport, ``--clock virtual``, its own dispatcher and stepper) on a real store and a real HTTP target,
with every SQL statement's thread recorded while the clock is read, refreshed and advanced. A statement run on
the loop's thread would stall every request and every fire of the process for as long as it takes."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import event
from support.databases import PostgresDatabase, require_postgres
from support.scratch_store import BACKENDS, T0
from support.target_server import TargetServer

from scheduler_emulator.app import create_app
from scheduler_emulator.config import Settings
from scheduler_emulator.store.database import Database

API = {"api-version": "2016-03-01"}
COLLECTION = "/subscriptions/s/resourceGroups/g/providers/Microsoft.Scheduler/jobCollections/c"


@pytest.fixture(params=BACKENDS)
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'scheduler.db'}"
        return
    require_postgres()
    pg = PostgresDatabase().create()
    try:
        yield pg.url
    finally:
        pg.drop()


class StatementThreads:
    """The statements the store's engine runs on a given thread (the event loop's), from ``watch`` on."""

    def __init__(self, database: Database, loop_thread: int) -> None:
        self.database, self.loop_thread = database, loop_thread
        self.on_loop: list[str] = []
        self.elsewhere = 0

    def _record(self, _conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if threading.get_ident() == self.loop_thread:
            self.on_loop.append(statement.split("\n")[0][:120])
        else:
            self.elsewhere += 1

    def __enter__(self) -> StatementThreads:
        event.listen(self.database.engine, "before_cursor_execute", self._record)
        return self

    def __exit__(self, *_: object) -> None:
        event.remove(self.database.engine, "before_cursor_execute", self._record)


def test_reading_and_advancing_the_virtual_clock_runs_no_statement_on_the_event_loop(
    database_url: str, target: TargetServer
) -> None:
    settings = Settings(database_url=database_url, clock="virtual", clock_start=T0, shutdown_grace=10)
    app = create_app(settings)
    job = {
        "properties": {
            "startTime": "2030-01-01T12:00:00Z",
            "action": {"type": "Http", "request": {"uri": target.url("/hourly"), "method": "GET"}},
            "recurrence": {"frequency": "Hour", "interval": 1},
        }
    }

    async def scenario() -> tuple[list[httpx.Response], StatementThreads]:
        async with (
            app.router.lifespan_context(app),
            httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as client,
        ):
            with StatementThreads(app.state.database, threading.get_ident()) as statements:
                answers = [
                    await client.put(COLLECTION, params=API, json={"location": "westus"}),
                    await client.put(f"{COLLECTION}/jobs/hourly", params=API, json=job),
                    await client.get("/_emulator/clock"),
                    await client.post("/_emulator/clock", json={"advance": "PT2H"}),
                    await client.get("/_emulator/clock"),
                ]
                await asyncio.sleep(0.1)  # the dispatcher's loop and writes after the advance, still watched
            return answers, statements

    answers, statements = asyncio.run(scenario())

    assert [answer.status_code for answer in answers] == [201, 201, 200, 200, 200], [a.text for a in answers]
    assert answers[2].json() == {"mode": "virtual", "now": "2030-01-01T12:00:00Z"}
    assert answers[3].json() == {"now": "2030-01-01T14:00:00Z", "occurrences": 3, "attempts": 3, "failed": 0}
    assert answers[4].json()["now"] == "2030-01-01T14:00:00Z"
    assert [request.expected_time for request in target.requests("/hourly")] == [
        T0.replace(hour=hour) for hour in (12, 13, 14)
    ]
    assert statements.elsewhere > 0, "no statement was seen at all: the watch is not attached to the store"
    assert statements.on_loop == [], f"statements run on the event loop: {statements.on_loop}"
