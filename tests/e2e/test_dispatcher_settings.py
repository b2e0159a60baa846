"""The dispatcher's operator settings, each observed on a started server firing at a real target:
--no-dispatcher, --action-timeout, --history-max-entries, --history-max-age-days, --finished-job-retention-days
(with --housekeeping-interval), --poll-interval and --lease-seconds (takeover after a crash)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from conftest import API, Names, ServerProcess, create_job, wait_until
from target_server import TargetServer

from scheduler_emulator.store.database import Database
from scheduler_emulator.store.models import JobRow

PARAMS = {"api-version": API}


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Callable[..., ServerProcess]]:
    servers: list[ServerProcess] = []

    def start_server(*args: str, database: Path | None = None) -> ServerProcess:
        db = database or tmp_path / "scheduler.db"
        server = ServerProcess(
            [
                "--port",
                "0",
                "--data-dir",
                str(tmp_path),
                "--database-url",
                f"sqlite:///{db}",
                "--min-retry-interval",
                "1",
                *args,
            ]
        ).start()
        servers.append(server)
        return server

    yield start_server
    for server in servers:
        server.stop()


def _history(client: httpx.Client, names: Names, job: str) -> list[dict]:
    response = client.get(names.job_path(job) + "/history", params=PARAMS)
    assert response.status_code == 200, response.text
    return [entry["properties"] for entry in response.json()["value"]]


def test_no_dispatcher_serves_the_api_but_fires_nothing(start, target: TargetServer) -> None:
    server = start("--no-dispatcher")
    names = Names()
    with server.client() as client:
        assert client.get("/_emulator/health").json()["dispatcher"] == "off"
        create_job(client, names, "now", {"type": "Http", "request": {"uri": target.url("/now"), "method": "POST"}})
        time.sleep(3)
        job = client.get(names.job_path("now"), params=PARAMS).json()
    assert target.requests() == []
    assert job["properties"]["state"] == "Enabled"
    assert job["properties"]["status"]["executionCount"] == 0


def test_action_timeout_fails_a_slow_attempt(start, target: TargetServer) -> None:
    server = start("--action-timeout", "1")
    target.respond("/slow", delay=3)
    names = Names()
    with server.client() as client:
        create_job(
            client,
            names,
            "slow",
            {
                "type": "Http",
                "request": {"uri": target.url("/slow"), "method": "GET"},
                "retryPolicy": {"retryType": "None"},
            },
        )
        wait_until(lambda: len(_history(client, names, "slow")) == 1, 10, "the timed-out attempt")
        entry = _history(client, names, "slow")[0]
    assert entry["status"] == "Failed"
    assert "timed out" in entry["message"]
    started = datetime.fromisoformat(entry["startTime"].replace("Z", "+00:00"))
    ended = datetime.fromisoformat(entry["endTime"].replace("Z", "+00:00"))
    assert timedelta(seconds=0.9) <= ended - started < timedelta(seconds=2.5)


def test_history_keeps_at_most_the_configured_entries(start, target: TargetServer) -> None:
    server = start("--history-max-entries", "3")
    names = Names()
    with server.client() as client:
        create_job(
            client,
            names,
            "noisy",
            {
                "type": "Http",
                "request": {"uri": target.url("/fail"), "method": "GET"},
                "retryPolicy": {"retryType": "Fixed", "retryCount": 5, "retryInterval": "PT1S"},
            },
        )
        wait_until(
            lambda: client.get(names.job_path("noisy"), params=PARAMS).json()["properties"]["state"] == "Faulted",
            20,
            "the job to fault",
        )
        entries = _history(client, names, "noisy")
        job = client.get(names.job_path("noisy"), params=PARAMS).json()
    assert len(target.requests("/fail")) == 6
    assert [e["retryCount"] for e in entries] == [5, 4, 3]  # the newest three
    assert job["properties"]["status"]["executionCount"] == 6  # counters are not trimmed


def test_old_history_and_finished_jobs_are_removed(start, target: TargetServer) -> None:
    # 0.00005 days is about 4.3 seconds.
    server = start(
        "--history-max-age-days",
        "0.00005",
        "--finished-job-retention-days",
        "0.00005",
        "--housekeeping-interval",
        "0.5",
        "--poll-interval",
        "0.5",
    )
    names = Names()
    future = (datetime.now(UTC) + timedelta(days=1)).isoformat()
    with server.client() as client:
        create_job(client, names, "done", {"type": "Http", "request": {"uri": target.url("/a"), "method": "GET"}})
        create_job(
            client,
            names,
            "recurring",
            {"type": "Http", "request": {"uri": target.url("/b"), "method": "GET"}},
            startTime=future,
            recurrence={"frequency": "Day"},
        )
        assert client.post(names.job_path("recurring") + "/run", params=PARAMS).status_code == 200
        wait_until(lambda: len(_history(client, names, "recurring")) == 1, 10, "the manual run's history")
        assert client.get(names.job_path("done"), params=PARAMS).json()["properties"]["state"] == "Completed"
        wait_until(
            lambda: client.get(names.job_path("done"), params=PARAMS).status_code == 404,
            15,
            "the completed job to be removed",
        )
        wait_until(lambda: _history(client, names, "recurring") == [], 15, "the old history entry to be removed")
        job = client.get(names.job_path("recurring"), params=PARAMS)
    assert job.status_code == 200  # an active job is never removed
    assert job.json()["properties"]["status"]["executionCount"] == 1


def test_poll_interval_finds_work_nobody_announced(start, target: TargetServer, tmp_path: Path) -> None:
    server = start("--poll-interval", "1")
    names = Names()
    with server.client() as client:
        create_job(
            client,
            names,
            "later",
            {"type": "Http", "request": {"uri": target.url("/later"), "method": "GET"}},
            startTime=(datetime.now(UTC) + timedelta(days=1)).isoformat(),
        )
    time.sleep(1.5)  # the dispatcher is now asleep until the next poll
    database = Database(f"sqlite:///{tmp_path / 'scheduler.db'}")
    try:
        with database.session() as session:  # made due behind the API's back: no wake-up is sent
            job = session.query(JobRow).filter_by(name="later").one()
            job.run_requested_at = datetime.now(UTC)
    finally:
        database.dispose()
    target.wait_for(1, 4, "/later")


def test_a_crashed_dispatchers_occurrence_is_taken_over_after_its_lease(start, target: TargetServer) -> None:
    target.respond("/slow", delay=4)
    first = start("--lease-seconds", "2")
    names = Names()
    with first.client() as client:
        create_job(
            client,
            names,
            "inflight",
            {
                "type": "Http",
                "request": {"uri": target.url("/slow"), "method": "POST"},
                "retryPolicy": {"retryType": "None"},
            },
        )
    target.wait_for(1, 10, "/slow")
    assert first.process is not None
    first.process.kill()  # kill -9 while the attempt is in flight
    first.wait_exit(10)
    second = start("--lease-seconds", "2")
    arrivals = target.wait_for(2, 20, "/slow")
    with second.client() as client:
        wait_until(lambda: len(_history(client, names, "inflight")) == 1, 15, "the resumed attempt's history")
        entries = _history(client, names, "inflight")
        job = client.get(names.job_path("inflight"), params=PARAMS).json()
    # At-least-once: the occurrence in flight at the crash runs again, with the same expected time.
    assert arrivals[0].expected_time == arrivals[1].expected_time
    assert arrivals[1].monotonic - arrivals[0].monotonic >= 1.5
    assert [e["status"] for e in entries] == ["Completed"]
    assert job["properties"]["state"] == "Completed"
    time.sleep(1)
    assert len(target.requests("/slow")) == 2
