"""An occurrence's progress outlives its dispatcher. Stopped gracefully (SIGINT, SIGTERM) while it waits between
retries, a server hands the occurrence back; the next start resumes it with the retries it has left, at the retry's
time. Killed (kill -9) during an attempt, only that attempt is sent again, under its own retry number. Taken over by
another dispatcher, the same. The target sees retryCount + 1 attempts (one more after a kill -9: the attempt in
flight) and history shows retryCount 0..N once each — on a SQLite file and on PostgreSQL."""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select
from support.api_client import API, create_job, job_history
from support.databases import fresh_database, require_postgres
from support.names import Names
from support.processes import crash, process_ended
from support.server import EmulatorPool, ServerProcess
from support.target_server import TargetServer
from support.times import parse
from support.waiting import wait_until

from scheduler_emulator.store.database import Database
from scheduler_emulator.store.models import JobRow, OccurrenceRow

PARAMS = {"api-version": API}
INTERVAL = 2  # seconds between a failed attempt and its retry (--min-retry-interval 1 allows it)
# What a restart says when it resumes an occurrence a stopping dispatcher handed back, and what it says when it
# takes one over from a dispatcher that did not stop (its heartbeat ran out).
HANDED_BACK = "handed back by a dispatcher that stopped"
TAKEN_OVER = "left unfinished by a dispatcher whose heartbeat ran out"


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with fresh_database(request.param, tmp_path_factory) as url:
        yield url


@pytest.fixture
def start(emulators: EmulatorPool, tmp_path: Path) -> Callable[..., ServerProcess]:
    def start_server(database_url: str, *args: str) -> ServerProcess:
        return emulators.start(tmp_path, *args, database_url=database_url, poll_interval=1, min_retry_interval=1)

    return start_server


def _always_failing(client: httpx.Client, names: Names, target: TargetServer, retries: int) -> str:
    """A job due now whose target always fails, retried ``retries`` times INTERVAL apart; the path it calls."""
    path = f"/fail/{names.collection}"
    create_job(
        client,
        names,
        "flaky",
        {
            "type": "Http",
            "request": {"uri": target.url(path), "method": "POST"},
            "retryPolicy": {"retryType": "Fixed", "retryCount": retries, "retryInterval": f"PT{INTERVAL}S"},
        },
    )
    return path


def _faulted(client: httpx.Client, names: Names) -> dict[str, Any]:
    """The job once it has faulted (its last retry failed)."""

    def job() -> dict[str, Any] | None:
        properties: dict[str, Any] = client.get(names.job_path("flaky"), params=PARAMS).json()["properties"]
        return properties if properties["state"] == "faulted" else None

    return wait_until(job, 40, "the job to fault")


def _assert_each_retry_once(client: httpx.Client, names: Names, retries: int) -> None:
    """History: the attempts retryCount 0..``retries`` once each, all failed, each retry at its time or later
    (INTERVAL after the attempt before it ended, by the emulator's own records: a lower bound load cannot break;
    a restart that fired a pending retry at once, before its time, would break it)."""
    entries = list(reversed(job_history(client, names, "flaky")))
    assert [(e["status"], e["retryCount"]) for e in entries] == [("Failed", n) for n in range(retries + 1)], entries
    for before, after in zip(entries, entries[1:], strict=False):
        waited = parse(after["startTime"]) - parse(before["endTime"])
        assert waited >= timedelta(seconds=INTERVAL), (before, after)


def _stop(server: ServerProcess, number: signal.Signals) -> None:
    assert server.process is not None
    server.process.send_signal(number)
    server.wait_exit(30)  # ended (uvicorn ends a process stopped by a signal by raising that signal again)


def test_a_graceful_stop_between_retries_resumes_the_retries_left(store_url, start, target) -> None:
    retries = 3
    names = Names()
    first = start(store_url)
    with first.client() as client:
        path = _always_failing(client, names, target, retries)
    target.wait_for(1, 20, path)  # retryCount 0 failed: retry 1 is due INTERVAL later
    _stop(first, signal.SIGINT)  # Ctrl-C in the wait
    second = start(store_url)
    target.wait_for(2, 30, path)  # retry 1, resumed: retry 2 is due INTERVAL later
    _stop(second, signal.SIGTERM)  # docker stop in the wait
    third = start(store_url)
    with third.client() as client:
        job = _faulted(client, names)
        assert len(target.requests(path)) == retries + 1
        _assert_each_retry_once(client, names, retries)
    status = job["status"]
    assert (status["executionCount"], status["failureCount"], status["faultedCount"]) == (4, 4, 1)
    for server in (second, third):
        assert any(HANDED_BACK in line for line in server.output), server.log_tail()
        assert not any(TAKEN_OVER in line for line in server.output), server.log_tail()


def test_a_kill_during_an_attempt_sends_only_that_attempt_again(store_url, start, target) -> None:
    retries = 2
    names = Names()
    first = start(store_url, "--lease-seconds", "2")
    with first.client() as client:
        path = _always_failing(client, names, target, retries)
    target.respond(path, status=500, delay=1.5)  # each attempt is in flight for 1.5 s
    target.wait_for(2, 30, path)  # retry 1 in flight
    assert first.process is not None
    family = crash(first.process.pid)  # every process of the emulator (tests/support/processes.py)
    first.wait_exit(10)
    wait_until(lambda: all(process_ended(pid) for pid in family), 10, "the killed server's processes to end")
    second = start(store_url, "--lease-seconds", "2")
    with second.client() as client:
        _faulted(client, names)
        # At-least-once: retry 1 reached the target before the kill and is sent again, nothing else is.
        assert len(target.requests(path)) == retries + 2
        _assert_each_retry_once(client, names, retries)
    assert any(TAKEN_OVER in line for line in second.output), second.log_tail()


def _occurrence(database_url: str, job_name: str) -> tuple[str | None, str | None]:
    """(who claimed the job's occurrence first, who holds it now)."""
    database = Database(database_url)
    try:
        with database.session() as session:
            row = session.execute(
                select(OccurrenceRow.first_owner, OccurrenceRow.owner)
                .join(JobRow, JobRow.id == OccurrenceRow.job_id)
                .where(JobRow.name == job_name)
            ).one()
            return row.first_owner, row.owner
    finally:
        database.dispose()


def test_another_dispatcher_resumes_the_retries_left_by_one_that_stopped(start, target, tmp_path_factory) -> None:
    require_postgres()
    retries = 3
    names = Names()
    with fresh_database("postgresql", tmp_path_factory) as url:
        api = start(url, "--no-dispatcher")
        dispatchers = [start(url, "--no-api") for _ in range(2)]
        with api.client() as client:
            path = _always_failing(client, names, target, retries)
            target.wait_for(1, 20, path)
            first_owner, _ = _occurrence(url, "flaky")
            assert first_owner is not None
            [holder] = [d for d in dispatchers if d.process is not None and f":{d.process.pid}:" in first_owner]
            [other] = [d for d in dispatchers if d is not holder]
            _stop(holder, signal.SIGTERM)
            _faulted(client, names)
            assert len(target.requests(path)) == retries + 1
            _assert_each_retry_once(client, names, retries)
        _, owner = _occurrence(url, "flaky")
        assert other.process is not None and owner is not None and f":{other.process.pid}:" in owner
        assert any(HANDED_BACK in line for line in other.output), other.log_tail()


def test_a_stop_in_the_error_actions_retries_resumes_the_error_action(start, target, tmp_path_factory) -> None:
    names = Names()
    main, error = f"/fail/{names.collection}/main", f"/fail/{names.collection}/error"
    with fresh_database("sqlite", tmp_path_factory) as url:
        first = start(url)
        with first.client() as client:
            create_job(
                client,
                names,
                "flaky",
                {
                    "type": "Http",
                    "request": {"uri": target.url(main), "method": "POST"},
                    "retryPolicy": {"retryType": "Fixed", "retryCount": 1, "retryInterval": f"PT{INTERVAL}S"},
                    "errorAction": {
                        "type": "Http",
                        "request": {"uri": target.url(error), "method": "POST"},
                        "retryPolicy": {"retryType": "Fixed", "retryCount": 2, "retryInterval": f"PT{INTERVAL}S"},
                    },
                },
            )
        target.wait_for(1, 30, error)  # the main action gave up; the error action's first attempt failed
        _stop(first, signal.SIGTERM)
        with start(url).client() as client:
            job = _faulted(client, names)
            wait_until(lambda: len(job_history(client, names, "flaky")) == 5, 20, "the error action's last retry")
            entries = list(reversed(job_history(client, names, "flaky")))
        assert (len(target.requests(main)), len(target.requests(error))) == (2, 3)
        assert [(e["actionName"], e["retryCount"]) for e in entries] == [
            ("MainAction", 0),
            ("MainAction", 1),
            ("ErrorAction", 0),
            ("ErrorAction", 1),
            ("ErrorAction", 2),
        ]
        assert job["status"]["faultedCount"] == 1
