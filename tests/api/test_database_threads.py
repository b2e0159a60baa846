"""Where the API's transactions run, on each store, seen from the database's side (the engines' ``begin``
events): on PostgreSQL a job's create and a job list's read run on the event loop, through SQLAlchemy's async
engine (Database.loop_engines), not on a thread: the hand-over to a worker thread and back, and the interpreter
lock passed between the workers, cost a create about a quarter of the API process's CPU
(bench/README.md#the-apis-way-into-postgresql). On a SQLite file the writes take turns on its one writer thread
and the reads run on its reader threads."""

from __future__ import annotations

import asyncio
import threading

from sqlalchemy import event
from starlette.testclient import TestClient
from support.api_calls import create_collection, create_job, expect_ok, get
from support.databases import Backend
from support.names import Names


def test_the_apis_transactions_run_where_the_store_runs_them(app: TestClient, backend: Backend) -> None:
    database = app.app.state.database  # type: ignore[attr-defined]
    names = Names()
    on_loop = backend.name == "postgresql"
    # Every engine the process has: the threads' (sync) and, on PostgreSQL, the event loop's.
    engines = {"threads": database.engine, "threads-read": database.read_engine}
    if on_loop:
        engines["loop"] = database.loop_engines().writes.sync_engine
    seen: list[tuple[str, str, bool]] = []

    def recorder(label: str):  # type: ignore[no-untyped-def]
        def record(*_: object) -> None:
            try:
                asyncio.get_running_loop()
                running = True  # the thread is running an event loop
            except RuntimeError:
                running = False
            seen.append((label, threading.current_thread().name.rsplit("_", 1)[0], running))

        return record

    listeners = {label: recorder(label) for label in engines}
    for label, engine in engines.items():
        event.listen(engine, "begin", listeners[label])
    try:
        create_collection(app, names)
        create_job(app, names, "job-0")
        listed = expect_ok(get(app, names.collection_path + "/jobs"))
    finally:
        for label, engine in engines.items():
            event.remove(engine, "begin", listeners[label])
    assert [job["name"].rsplit("/", 1)[-1] for job in listed["value"]] == ["job-0"]
    assert seen, "no transaction seen"
    if on_loop:
        # All on the loop's engine, on a thread that runs an event loop: none on a worker thread.
        assert {(label, running) for label, _, running in seen} == {("loop", True)}, seen
    else:
        assert {thread for _, thread, _ in seen} == {"sqlite-writer", "sqlite-reader"}, seen
        assert not any(running for _, _, running in seen), seen
