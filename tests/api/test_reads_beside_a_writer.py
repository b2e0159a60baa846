"""On a SQLite file the API's reads take no turn on the process's write lock (Database.read_session): while a
write transaction is held open in the process (as a long job write, a dispatcher's claim or a reset would hold
it), every read-only call of the ARM, classic and dashboard surfaces and the metrics still answers, with what
was committed before; a write waits for the lock and then goes through.

The API runs in-process over its own SQLite file (the session ``app`` may be on PostgreSQL, which has no such
lock); the held transaction is the process's own ``Database.session()``, taken on a thread of the test."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import event, text
from starlette.testclient import TestClient
from support.api_calls import create_collection, create_job, future, get, job_body, put
from support.classic_api import Classic, job
from support.clocks import SetClock
from support.databases import TEST_SECRET_KEY
from support.held_write import HeldWrite
from support.names import Names
from support.times import utcnow

from scheduler_emulator.app import create_app
from scheduler_emulator.config import Settings

BOUND = 30.0  # seconds: only a read that waits for the held write lock takes this long


@pytest.fixture
def api(tmp_path: Path) -> Iterator[TestClient]:
    settings = Settings(
        data_dir=tmp_path,
        database_url=f"sqlite:///{tmp_path / 'scheduler.db'}",
        dispatcher=False,
        secret_key=TEST_SECRET_KEY,
        log_level="warning",
    )
    with TestClient(
        create_app(settings, SetClock(utcnow().replace(microsecond=0))), base_url="https://127.0.0.1"
    ) as client:
        yield client


def _answers_within(calls: dict[str, Callable[[], httpx.Response]], bound: float) -> dict[str, httpx.Response | None]:
    """Each call's response, made all at once on threads of their own; None for a call that has not answered
    within ``bound`` seconds."""
    answers: dict[str, httpx.Response] = {}
    workers = [
        threading.Thread(target=lambda name=name, call=call: answers.update({name: call()}), daemon=True)
        for name, call in calls.items()
    ]
    for worker in workers:
        worker.start()
    deadline = time.monotonic() + bound
    for worker in workers:
        worker.join(max(deadline - time.monotonic(), 0))
    return {name: answers.get(name) for name in calls}


def test_reads_of_every_surface_answer_while_a_write_transaction_is_held(api: TestClient) -> None:
    classic = Classic(api)
    classic.create_collection()
    assert classic.put_job("nightly", job(future())).status_code in (200, 201)
    names = Names()
    create_collection(api, names)
    create_job(api, names, "arm-job")
    dashboard = "/_emulator/dashboard"
    job_ref = (
        f"subscriptions/{names.subscription}/resourceGroups/{names.resource_group}/jobCollections/{names.collection}"
    )
    reads: dict[str, Callable[[], httpx.Response]] = {
        "ARM GET job": lambda: get(api, names.job_path("arm-job")),
        "ARM list jobs": lambda: get(api, names.collection_path + "/jobs"),
        "ARM history": lambda: get(api, names.job_path("arm-job") + "/history"),
        "classic GET job": lambda: classic.job_call("GET", f"{classic.jobs_path}/nightly"),
        "classic list jobs": lambda: classic.job_call("GET", classic.jobs_path),
        "classic history": lambda: classic.job_call("GET", f"{classic.jobs_path}/nightly/history"),
        "classic GET collection": lambda: classic.call("GET", classic.collection_path()),
        "classic name check": lambda: classic.call(
            "GET",
            classic.collection_path().rsplit("/", 1)[0],
            params={"op": "CheckNameAvailability", "resourceName": "x"},
        ),
        "classic GET cloud service": lambda: classic.call("GET", classic.cs_path),
        "classic list cloud services": lambda: classic.call("GET", f"/{classic.subscription}/cloudservices"),
        "dashboard collections": lambda: api.get(f"{dashboard}/collections"),
        "dashboard collection jobs": lambda: api.get(f"{dashboard}/{job_ref}/jobs"),
        "dashboard job": lambda: api.get(f"{dashboard}/{job_ref}/jobs/arm-job"),
        "dashboard overview": lambda: api.get(f"{dashboard}/overview"),
        "dashboard search": lambda: api.get(f"{dashboard}/jobs", params={"q": "arm-job"}),
        "dashboard export": lambda: api.get(f"{dashboard}/{job_ref}/jobs/arm-job/export"),
        "metrics": lambda: api.get("/metrics"),
    }
    before = {name: read() for name, read in reads.items()}
    assert all(response.status_code == 200 for response in before.values()), {
        name: (response.status_code, response.text[:200])
        for name, response in before.items()
        if response.status_code != 200
    }
    writes: list[httpx.Response] = []
    writer = threading.Thread(
        target=lambda: writes.append(put(api, names.job_path("written-meanwhile"), job_body())), daemon=True
    )
    database = api.app.state.database  # type: ignore[attr-defined]
    with HeldWrite(database, text("UPDATE jobs SET execution_count = execution_count + 1000")):
        during = _answers_within(reads, BOUND)
        waiting = [name for name, response in during.items() if response is None]
        assert not waiting, f"these reads waited for the held write transaction: {waiting}"
        writer.start()
        writer.join(1.0)
        assert writer.is_alive(), "a write went through while another write transaction held the lock"
    writer.join(BOUND)
    assert [response.status_code for response in writes] == [201], "the waiting write went through after"
    for name, response in during.items():
        assert response is not None and response.status_code == 200, (name, response)
    arm = during["ARM GET job"]
    assert arm is not None and arm.json()["properties"]["status"]["executionCount"] == 0, (
        "an uncommitted write was read"
    )
    assert during["classic GET job"].content == before["classic GET job"].content  # type: ignore[union-attr]


def test_reads_run_on_the_databases_two_reader_threads(api: TestClient) -> None:
    """Each read on a worker thread of anyio's pool of forty woke an idle thread and handed the interpreter lock
    to it and back (a third more CPU per GET, bench/README); the reads of a SQLite file have two threads of
    their own that stay busy while reads keep coming."""
    names = Names()
    create_collection(api, names)
    for index in range(4):
        create_job(api, names, f"job-{index}")
    calls = {f"GET {n}": (lambda n=n: get(api, names.collection_path + "/jobs")) for n in range(12)}
    threads = _read_threads(api, calls)
    assert len(threads) == 12, threads
    assert {name.rsplit("_", 1)[0] for name in threads} == {"sqlite-reader"}, threads
    assert len(set(threads)) <= 2, threads


def test_a_job_or_a_collection_is_read_on_the_event_loop(api: TestClient) -> None:
    """GET job and GET collection read a row or two: on a SQLite file (whose readers never wait) they run on the
    event loop's own thread, in one go, rather than on a reader thread that takes the interpreter lock back after
    each call into SQLite behind the event loop and the dispatcher (bench/README, issue 33, sixth session)."""
    names = Names()
    create_collection(api, names)
    create_job(api, names, "job-0")
    calls = {
        "GET job": lambda: get(api, names.job_path("job-0")),
        "GET missing job": lambda: get(api, names.job_path("nope")),
        "GET collection": lambda: get(api, names.collection_path),
    }
    loop_thread = api.portal.call(threading.current_thread).name  # type: ignore[union-attr]
    threads = _read_threads(api, calls, statuses={"GET missing job": 404})
    assert threads == [loop_thread] * 3, (threads, loop_thread)


def _read_threads(
    api: TestClient, calls: dict[str, Callable[[], httpx.Response]], statuses: dict[str, int] | None = None
) -> list[str]:
    """The names of the threads on which ``calls``' read transactions began, once all have answered (200, or
    the status ``statuses`` names)."""
    database = api.app.state.database  # type: ignore[attr-defined]
    threads: list[str] = []
    record = lambda *_: threads.append(threading.current_thread().name)  # noqa: E731
    event.listen(database.read_engine, "begin", record)
    try:
        answers = _answers_within(calls, BOUND)
    finally:
        event.remove(database.read_engine, "begin", record)
    for name, answer in answers.items():
        assert answer is not None and answer.status_code == (statuses or {}).get(name, 200), (name, answer)
    return threads
