"""Where the API's transactions run, on each store, seen from the database's side (the engine's ``begin``
events): on PostgreSQL a job's create and a job list's read run on the database's own worker threads
(Database.workers), side by side on its pool, not on anyio's threads behind Starlette's ``run_in_threadpool``,
whose hand-over cost a PUT a tenth of its event-loop time (bench/README, issue 33, ninth session); on a SQLite file
the writes take turns on its one writer thread and the reads run on its reader threads."""

from __future__ import annotations

import threading

from sqlalchemy import event
from starlette.testclient import TestClient
from support.api_calls import create_collection, create_job, expect_ok, get
from support.databases import Backend
from support.names import Names


def test_the_apis_transactions_run_on_the_databases_own_threads(app: TestClient, backend: Backend) -> None:
    database = app.app.state.database  # type: ignore[attr-defined]
    names = Names()
    engines = {database.engine, database.read_engine}
    threads: list[str] = []
    record = lambda *_: threads.append(threading.current_thread().name.rsplit("_", 1)[0])  # noqa: E731
    for engine in engines:
        event.listen(engine, "begin", record)
    try:
        create_collection(app, names)
        create_job(app, names, "job-0")
        listed = expect_ok(get(app, names.collection_path + "/jobs"))
    finally:
        for engine in engines:
            event.remove(engine, "begin", record)
    assert [job["name"].rsplit("/", 1)[-1] for job in listed["value"]] == ["job-0"]
    expected = {"db-worker"} if backend.name == "postgresql" else {"sqlite-writer", "sqlite-reader"}
    assert threads and set(threads) == expected, threads
