"""Operating a running instance: health (503 while the database is away), metrics that move when a job
fires, JSON log lines carrying the request id, and a clean shutdown with a job in flight."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from support.api_client import API, create_job, history_entries, wait_history
from support.databases import PostgresDatabase, require_postgres
from support.names import Names
from support.server import EmulatorPool, ServerProcess
from support.target_server import TargetServer
from support.times import parse
from support.waiting import wait_until

PARAMS = {"api-version": API}


@pytest.fixture
def start(emulators: EmulatorPool, tmp_path: Path) -> Callable[..., ServerProcess]:
    def start_server(*args: str) -> ServerProcess:
        return emulators.start(tmp_path, "--min-retry-interval", "1", *args)

    return start_server


def _assert_clean_exit(server: ServerProcess) -> None:
    """The server finished its shutdown (uvicorn re-raises SIGTERM afterwards, so the status is 0 or -15)."""
    assert server.wait_exit(20) in (0, -signal.SIGTERM)
    time.sleep(0.2)  # let the output reader catch up
    assert "Application shutdown complete" in server.log, server.log[-3000:]


def _metric(text: str, name: str, **labels: str) -> float:
    """The sum of the samples of ``name`` with these labels, in Prometheus text format (0 when absent)."""
    total = 0.0
    for line in text.splitlines():
        if line.startswith("#") or not line.startswith(name):
            continue
        key, _, value = line.rpartition(" ")
        if key.split("{")[0] == name and all(f'{k}="{v}"' in key for k, v in labels.items()):
            total += float(value)
    return total


def test_health_is_503_while_the_database_is_away(start) -> None:
    require_postgres()
    import psycopg
    from support.databases import PG_ADMIN_DSN

    database = PostgresDatabase().create()
    try:
        server = start("--database-url", database.url)
        names = Names()
        with server.client() as client:
            assert client.get("/_emulator/health").json()["database"] == "postgresql"
            assert client.put(names.collection_path, params=PARAMS, json={"location": "westus"}).status_code == 201
            with psycopg.connect(PG_ADMIN_DSN, autocommit=True) as admin:
                admin.execute(f'ALTER DATABASE "{database.name}" ALLOW_CONNECTIONS false')
                admin.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (database.name,)
                )
            began = time.monotonic()
            health = client.get("/_emulator/health")
            api = client.get(names.collection_path, params=PARAMS)
            assert time.monotonic() - began < 15, "answers come at once, not after a hang"
            assert health.status_code == 503
            assert health.json()["status"] == "unavailable" and health.json()["reason"]
            assert api.status_code == 503
            assert api.json()["error"]["code"] == "ServiceUnavailable"
            with psycopg.connect(PG_ADMIN_DSN, autocommit=True) as admin:
                admin.execute(f'ALTER DATABASE "{database.name}" ALLOW_CONNECTIONS true')
            wait_until(lambda: client.get("/_emulator/health").status_code == 200, 15, "health to recover")
            assert client.get(names.collection_path, params=PARAMS).status_code == 200
        server.stop()
    finally:
        database.drop()


def test_metrics_move_when_a_job_fires(start, target: TargetServer) -> None:
    server = start()
    names = Names()
    with server.client() as client:
        before = client.get("/metrics")
        assert before.status_code == 200 and before.headers["content-type"].startswith("text/plain")
        create_job(client, names, "ok", {"type": "Http", "request": {"uri": target.url("/ok"), "method": "GET"}})
        create_job(
            client,
            names,
            "bad",
            {
                "type": "Http",
                "request": {"uri": target.url("/fail"), "method": "GET"},
                "retryPolicy": {"retryType": "Fixed", "retryCount": 1, "retryInterval": "PT1S"},
            },
        )
        wait_until(lambda: len(target.requests("/fail")) == 2 and len(target.requests("/ok")) == 1, 15, "the fires")
        wait_until(lambda: _metric(client.get("/metrics").text, "scheduler_occurrences_in_flight") == 0, 10, "idle")
        after = client.get("/metrics").text
    assert (
        _metric(after, "scheduler_occurrences_fired_total") - _metric(before.text, "scheduler_occurrences_fired_total")
        == 2
    )
    assert _metric(after, "scheduler_attempts_total", action_type="Http", action="MainAction", outcome="succeeded") == 1
    assert _metric(after, "scheduler_attempts_total", action_type="Http", action="MainAction", outcome="failed") == 2
    assert _metric(after, "scheduler_firing_lag_seconds_count") == 2
    # Three attempts written in batches: the retried job's first attempt and its last are a second apart, so at
    # least two transactions; the other job's completion may share one of them.
    batches = _metric(after, "scheduler_dispatcher_write_batches_total") - _metric(
        before.text, "scheduler_dispatcher_write_batches_total"
    )
    assert 2 <= batches <= 3
    assert _metric(after, "scheduler_due_backlog") == 0
    assert _metric(after, "scheduler_api_requests_total", method="PUT", status="201") >= 3


@pytest.mark.parametrize("store", ["sqlite", "postgresql"])
def test_api_writes_wake_the_dispatcher_only_for_jobs_due_soon(start, target: TargetServer, store: str) -> None:
    """With a 60 s poll interval, a job due in 3 s fires on time only because its PUT woke the dispatcher; jobs
    due tomorrow (created, then edited) cost it no look at all (on PostgreSQL: no NOTIFY to any process)."""
    database = None
    args = ["--poll-interval", "60"]
    if store == "postgresql":
        require_postgres()
        database = PostgresDatabase().create()
        args += ["--database-url", database.url]
    try:
        server = start(*args)
        names = Names()
        tomorrow = (datetime.now(UTC) + timedelta(days=1)).isoformat().replace("+00:00", "Z")
        action = {"type": "Http", "request": {"uri": target.url("/later"), "method": "GET"}}

        def cycles() -> float:
            return _metric(client.get("/metrics").text, "scheduler_dispatcher_cycles_total")

        with server.client() as client:
            create_job(client, names, "first", action, startTime=tomorrow)
            settled = [cycles()]
            for _ in range(50):  # bounded: until the wake-ups of start-up and of the collection's creation are over
                time.sleep(0.2)
                settled.append(cycles())
                if len(settled) >= 3 and settled[-1] == settled[-2] == settled[-3]:
                    break
            before = settled[-1]
            for job in range(10):
                create_job(client, names, f"later-{job}", action, ensure_collection=False, startTime=tomorrow)
            edited = client.patch(names.job_path("later-3"), params=PARAMS, json={"properties": {"state": "Disabled"}})
            assert edited.status_code == 200, edited.text
            time.sleep(0.5)
            assert cycles() == before, "a write of jobs due tomorrow woke the dispatcher"

            due = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=3)
            soon = {"type": "Http", "request": {"uri": target.url("/soon"), "method": "GET"}}
            create_job(
                client, names, "soon", soon, ensure_collection=False, startTime=due.isoformat().replace("+00:00", "Z")
            )
            [fire] = target.wait_for(1, 10, "/soon")
            assert fire.wall >= due, "fired before its time"
            [entry] = wait_history(client, names.job_path("soon"), 1, 10)
            # Fired on time (by the emulator's own record of the attempt's start) rather than at the next poll,
            # up to 60 s away; 3 s leave room for a 2-core machine running two CPU hogs beside the suite.
            assert due <= parse(entry["properties"]["startTime"]) < due + timedelta(seconds=3), entry
            assert cycles() > before
        assert target.requests("/later") == []
        server.stop()
    finally:
        if database is not None:
            database.drop()


def test_every_api_request_logs_one_json_line_with_its_request_id(start) -> None:
    server = start("--log-format", "json", "--log-level", "info")
    names = Names()
    with server.client() as client:
        created = client.put(names.collection_path, params=PARAMS, json={"location": "westus"})
        missing = client.get(names.job_path("nope"), params=PARAMS)
    server.stop()
    lines = [json.loads(line) for line in server.output if line.startswith("{")]
    for response in (created, missing):
        request_id = response.headers["x-ms-request-id"]
        matching = [line for line in lines if line.get("request_id") == request_id]
        assert len(matching) == 1, (request_id, server.log)
        line = matching[0]
        assert line["status"] == response.status_code
        assert line["route"].endswith("{collection_name}") or line["route"].endswith("{job_name}")
        assert line["duration_ms"] >= 0 and line["level"] == "info"


def test_attempts_log_job_action_outcome_and_lateness(start, target: TargetServer) -> None:
    server = start("--log-format", "json")
    names = Names()
    with server.client() as client:
        create_job(client, names, "logged", {"type": "Http", "request": {"uri": target.url("/x"), "method": "GET"}})
        target.wait_for(1, 10, "/x")
        wait_until(
            lambda: client.get(names.job_path("logged"), params=PARAMS).json()["properties"]["state"] == "completed",
            10,
            "completion",
        )
    server.stop()
    attempts = [json.loads(line) for line in server.output if line.startswith("{") and '"outcome"' in line]
    assert len(attempts) == 1
    assert attempts[0]["job"] == "logged" and attempts[0]["collection"] == names.collection
    assert attempts[0]["action_type"] == "Http" and attempts[0]["outcome"] == "succeeded"
    assert 0 <= attempts[0]["lateness_ms"] < 5000


def test_text_logs_are_readable_lines(start) -> None:
    server = start("--log-format", "text")
    with server.client() as client:
        client.get("/_emulator/health")
    server.stop()
    access = [line for line in server.output if "scheduler_emulator.access" in line]
    assert access and not access[0].startswith("{") and "GET /_emulator/health 200" in access[0]


def test_shutdown_lets_an_attempt_in_flight_finish(start, target: TargetServer) -> None:
    target.respond("/slow", delay=2)
    server = start("--shutdown-grace", "10")
    names = Names()
    with server.client() as client:
        create_job(
            client, names, "inflight", {"type": "Http", "request": {"uri": target.url("/slow"), "method": "GET"}}
        )
    target.wait_for(1, 10, "/slow")
    assert server.process is not None
    server.process.send_signal(signal.SIGTERM)
    _assert_clean_exit(server)
    restarted = start()
    with restarted.client() as client:
        entries = history_entries(client, names.job_path("inflight"))
        job = client.get(names.job_path("inflight"), params=PARAMS).json()
    assert [e["properties"]["status"] for e in entries] == ["Completed"]
    assert job["properties"]["state"] == "completed"
    time.sleep(1.5)
    assert len(target.requests("/slow")) == 1  # finished before exit, so never repeated


def test_shutdown_releases_an_occurrence_waiting_to_retry(start, target: TargetServer) -> None:
    target.respond("/flaky", fail_first=1)
    server = start("--shutdown-grace", "10")
    names = Names()
    with server.client() as client:
        create_job(
            client,
            names,
            "flaky",
            {
                "type": "Http",
                "request": {"uri": target.url("/flaky"), "method": "GET"},
                "retryPolicy": {"retryType": "Fixed", "retryCount": 2, "retryInterval": "PT10S"},
            },
        )
    target.wait_for(1, 10, "/flaky")
    time.sleep(0.5)
    assert server.process is not None
    began = time.monotonic()
    server.process.send_signal(signal.SIGTERM)
    _assert_clean_exit(server)
    assert time.monotonic() - began < 8, "a retry wait does not hold the shutdown up"
    restarted = start()
    # The released occurrence resumes with its retry at the retry's time (10 s after the first attempt ended: a
    # lower bound), not after the stopped server's lease (30 s) would have run out, nor from its first attempt.
    first, retry = target.wait_for(2, 25, "/flaky")
    with restarted.client() as client:
        entries = wait_history(client, names.job_path("flaky"), 2, 10)
    assert [(e["properties"]["status"], e["properties"]["retryCount"]) for e in entries] == [
        ("Completed", 1),
        ("Failed", 0),
    ]
    assert retry.wall >= first.wall + timedelta(seconds=10)
