"""Jobs created through the API wake a dispatcher only when it would otherwise look too late: creating jobs
due after its next look costs no claim cycle each (they were one cycle per PUT), and a job due before that
look still fires at its time — in the process that served the PUT, and (PostgreSQL) in another process."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from support.api_client import API, create_job
from support.databases import TEST_SECRET_KEY, fresh_database
from support.names import Names
from support.server import EmulatorPool, ServerProcess
from support.target_server import TargetServer
from support.waiting import wait_until

from scheduler_emulator.domain.clock import isoformat_z

PARAMS = {"api-version": API}
POLL = 30  # seconds: no dispatcher looks by itself while a test runs, so every cycle counted was a wake-up


def _cycles(client: httpx.Client) -> float:
    text = client.get("/metrics").text
    match = re.search(r"^scheduler_dispatcher_cycles_total (\S+)$", text, re.MULTILINE)
    assert match, text[:2000]
    return float(match.group(1))


def _http(target: TargetServer, path: str) -> dict[str, object]:
    return {"type": "Http", "request": {"uri": target.url(path), "method": "GET"}}


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with fresh_database(request.param, tmp_path_factory) as url:
        yield url


def _start(emulators: EmulatorPool, tmp_path: Path, url: str, *args: str) -> ServerProcess:
    return emulators.start(
        tmp_path / f"data-{len(emulators.processes)}",
        *args,
        database_url=url,
        log_level="warning",
        poll_interval=POLL,
        env={"SCHEDULER_SECRET_KEY": TEST_SECRET_KEY},  # processes sharing a database share its key
    )


def test_creating_jobs_due_later_costs_no_claim_cycle_each(
    store: str, emulators: EmulatorPool, tmp_path: Path, target: TargetServer
) -> None:
    server = _start(emulators, tmp_path, store)
    names = Names()
    with server.client() as client:
        create_job(
            client,
            names,
            "first",
            _http(target, "/first"),
            startTime=isoformat_z(datetime.now(UTC) + timedelta(seconds=40)),
        )
        wait_until(lambda: _cycles(client) >= 1, 10, "the dispatcher's first cycle")
        before = _cycles(client)
        later = datetime.now(UTC) + timedelta(seconds=45)  # inside the API's wake-up horizon, after the next look
        for i in range(20):
            create_job(
                client,
                names,
                f"later-{i}",
                _http(target, f"/later-{i}"),
                ensure_collection=False,
                startTime=isoformat_z(later + timedelta(milliseconds=10 * i)),
            )
        assert _cycles(client) - before <= 2  # without the check: 13-29, a claim cycle per PUT
        # A job due before the dispatcher's next look still wakes it, and fires at its time.
        due = datetime.now(UTC) + timedelta(seconds=1)
        create_job(client, names, "soon", _http(target, "/soon"), ensure_collection=False, startTime=isoformat_z(due))
        target.wait_for(1, 10, "/soon")
    assert datetime.now(UTC) < due + timedelta(seconds=POLL / 2)


def test_another_process_is_woken_for_a_job_due_before_its_next_look(
    emulators: EmulatorPool, tmp_path: Path, target: TargetServer, tmp_path_factory: pytest.TempPathFactory
) -> None:
    with fresh_database("postgresql", tmp_path_factory) as url:
        api = _start(emulators, tmp_path, url, "--no-dispatcher")
        dispatcher = _start(emulators, tmp_path, url, "--no-api")
        names = Names()
        with api.client() as client, dispatcher.client() as watcher:
            create_job(
                client,
                names,
                "first",
                _http(target, "/first"),
                startTime=isoformat_z(datetime.now(UTC) + timedelta(seconds=40)),
            )
            wait_until(lambda: _cycles(watcher) >= 1, 10, "the dispatcher's first cycle")
            before = _cycles(watcher)
            later = datetime.now(UTC) + timedelta(seconds=45)
            for i in range(20):
                create_job(
                    client,
                    names,
                    f"later-{i}",
                    _http(target, f"/later-{i}"),
                    ensure_collection=False,
                    startTime=isoformat_z(later + timedelta(milliseconds=10 * i)),
                )
            due = datetime.now(UTC) + timedelta(seconds=1)
            create_job(
                client, names, "soon", _http(target, "/soon"), ensure_collection=False, startTime=isoformat_z(due)
            )
            target.wait_for(1, 10, "/soon")
            assert datetime.now(UTC) < due + timedelta(seconds=POLL / 2)
            assert _cycles(watcher) - before <= 4  # the wake-up for "soon" and what it led to (without the check: 18)
