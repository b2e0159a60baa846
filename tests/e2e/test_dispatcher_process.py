"""The dispatcher's own process (dispatcher/own_process.py): on PostgreSQL and on a SQLite file a started
emulator (default flags) runs its dispatcher in a second process of its own, which forks the action process; the
first serves the API. Seen from outside: the process tree (/proc), the target's connection held by the
dispatcher's action process, jobs made through the API fired and recorded, one ``/metrics`` that reports both
processes (each family once), every log line whole; when the dispatcher's process is killed (its action process
goes with it), the emulator logs it and fires from its own process (so too when it dies while it starts, and only
once); stopped, the attempt in flight finishes and is recorded, and no process is left. ``--dispatcher-process
off`` keeps the dispatcher in the emulator's process."""

from __future__ import annotations

import json
import os
import re
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from support.api_client import create_job, wait_history
from support.databases import TEST_SECRET_KEY, fresh_database
from support.names import Names
from support.processes import children_of, ended_or_killed, process_ended, socket_owner
from support.server import EmulatorPool, ServerProcess
from support.target_server import TargetServer
from support.waiting import wait_until

JOBS = 40


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A new store on disk: a SQLite file, a PostgreSQL database."""
    with fresh_database(request.param, tmp_path_factory) as url:
        yield url


def start(emulators: EmulatorPool, tmp_path: Path, url: str, *args: str) -> tuple[ServerProcess, int]:
    """A started emulator on ``url`` and its pid."""
    server = emulators.start(tmp_path, *args, database_url=url, env={"SCHEDULER_SECRET_KEY": TEST_SECRET_KEY})
    assert server.process is not None
    return server, server.process.pid


def fire_now(http: httpx.Client, names: Names, job: str, uri: str) -> None:
    create_job(http, names, job, {"type": "Http", "request": {"uri": uri, "method": "GET"}})


def metrics(server: ServerProcess) -> dict[str, list[tuple[str, dict[str, str], float]]]:
    """``/metrics`` by family: its samples; AssertionError if a family is reported twice."""
    with server.client() as http:
        text = http.get("/metrics").text
    families: dict[str, list[tuple[str, dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        assert family.name not in families, f"{family.name} reported twice:\n{text}"
        families[family.name] = [(sample.name, sample.labels, sample.value) for sample in family.samples]
    return families


def value(families: dict[str, list[tuple[str, dict[str, str], float]]], sample: str, **labels: str) -> float:
    return sum(
        v for family in families.values() for name, got, v in family if name == sample and labels.items() <= got.items()
    )


def test_with_a_store_on_disk_the_dispatcher_runs_in_a_process_of_its_own(
    emulators: EmulatorPool, target: TargetServer, tmp_path: Path, names: Names, store_url: str
) -> None:
    server, main = start(emulators, tmp_path, store_url, "--poll-interval", "60")
    (dispatcher,) = children_of(main)
    (actions,) = children_of(dispatcher)
    # The line is written by the log writer's thread: it may follow "Listening" into the output.
    wait_until(
        lambda: f"the dispatcher runs in a process of its own (pid {dispatcher})" in server.log, 15, server.log_tail
    )
    with server.client() as http:
        for index in range(JOBS):  # due now: fired at once, not at the next poll a minute away
            fire_now(http, names, f"j{index}", target.url(f"/fired/j{index}"))
        requests = target.wait_for(JOBS, 30)
        assert sorted(r.path for r in requests) == sorted(f"/fired/j{index}" for index in range(JOBS))
        owner = socket_owner(requests[0].client_port, [main, dispatcher, actions])
        assert owner == actions, f"the request came from pid {owner}, not the dispatcher's action process {actions}"
        entries = wait_history(http, names.job_path(f"j{JOBS - 1}"), 1, 15, lambda: server.log_tail())
        assert entries[0]["properties"]["status"] == "Completed"
        health = http.get("/_emulator/health").json()
        assert health["dispatcher"] == "running" and health["database"] == store_url.split(":")[0]
    families = wait_until(
        lambda: (found := metrics(server)) and value(found, "scheduler_attempts_total") >= JOBS and found,
        15,
        "the dispatcher's process to count every attempt",
    )
    assert value(families, "scheduler_occurrences_fired_total") == JOBS
    assert value(families, "scheduler_attempts_total", outcome="succeeded", action_type="Http") == JOBS
    assert value(families, "scheduler_firing_lag_seconds_count") == JOBS
    assert value(families, "scheduler_action_process_up") == 1
    assert value(families, "scheduler_api_requests_total", method="PUT") >= JOBS  # the API's, from this process
    attempt_lines = 0
    for line in server.output:
        if line.startswith("{"):
            record = json.loads(line)  # whole: the two processes' lines never cut each other
            attempt_lines += record.get("logger") == "scheduler_emulator.dispatcher" and "job" in record
    assert attempt_lines >= JOBS, server.log_tail()


def test_with_the_dispatcher_process_off_the_emulator_dispatches_itself(
    emulators: EmulatorPool, target: TargetServer, tmp_path: Path, names: Names, store_url: str
) -> None:
    server, main = start(emulators, tmp_path, store_url, "--dispatcher-process", "off")
    (actions,) = children_of(main)  # the action process only
    assert children_of(actions) == []
    assert "a process of its own" not in server.log
    with server.client() as http:
        fire_now(http, names, "j", target.url("/fired"))
        (fired,) = target.wait_for(1, 15, "/fired")
        assert socket_owner(fired.client_port, [main, actions]) == actions
    assert value(metrics(server), "scheduler_occurrences_fired_total") == 1


def test_a_killed_dispatcher_process_leaves_the_dispatching_to_the_emulator(
    emulators: EmulatorPool, target: TargetServer, tmp_path: Path, names: Names, store_url: str
) -> None:
    server, main = start(emulators, tmp_path, store_url)
    (dispatcher,) = children_of(main)
    (actions,) = children_of(dispatcher)
    os.kill(dispatcher, signal.SIGKILL)
    wait_until(lambda: ended_or_killed(actions), 30, "the dispatcher's action process to end with it")
    wait_until(
        lambda: f"the dispatcher's process (pid {dispatcher}) ended unexpectedly" in server.log, 15, server.log_tail
    )
    with server.client() as http:
        fire_now(http, names, "after", target.url("/after"))
        (after,) = target.wait_for(1, 30, "/after")
        assert socket_owner(after.client_port, [main]) == main  # sent by the emulator itself now
        entries = wait_history(http, names.job_path("after"), 1, 15, lambda: server.log_tail())
        assert entries[0]["properties"]["status"] == "Completed"
    assert value(metrics(server), "scheduler_occurrences_fired_total") == 1  # this process's own count now
    wait_until(lambda: process_ended(dispatcher), 10, f"the killed dispatcher's process {dispatcher} collected")
    assert not Path(f"/proc/{dispatcher}").exists(), "the emulator did not collect its killed child (a zombie)"


@pytest.mark.parametrize("how", ["SIGTERM", "SIGKILL"])
def test_the_dispatcher_process_ends_with_the_emulator_and_finishes_its_attempt_in_flight(
    how: str, emulators: EmulatorPool, target: TargetServer, tmp_path: Path, names: Names, store_url: str
) -> None:
    """Stopped (SIGTERM), the emulator has its dispatcher's process let the attempt in flight finish within the
    grace and record it; killed, its dispatcher's process and that one's action process are killed with it."""
    server, main = start(emulators, tmp_path, store_url)
    (dispatcher,) = children_of(main)
    (actions,) = children_of(dispatcher)
    target.respond("/held", delay=1.5)
    with server.client() as http:
        fire_now(http, names, "held", target.url("/held"))
    target.wait_for(1, 15, "/held")
    server.process.send_signal(getattr(signal, how))  # type: ignore[union-attr]
    server.wait_exit(60)
    if how == "SIGKILL":
        assert ended_or_killed(dispatcher), f"the dispatcher's process {dispatcher} outlived the killed emulator"
    for pid in (dispatcher, actions):
        wait_until(lambda pid=pid: process_ended(pid), 15, f"process {pid} ended")
    if how == "SIGTERM":
        again, _ = start(emulators, tmp_path, store_url, "--dispatcher-process", "off")
        with again.client() as http:
            entries = wait_history(http, names.job_path("held"), 1, 15, lambda: again.log_tail())
        assert entries[0]["properties"]["status"] == "Completed", entries[0]["properties"]["message"]


def test_a_dispatcher_process_that_dies_before_it_runs_leaves_the_dispatching_to_the_emulator(
    emulators: EmulatorPool, target: TargetServer, tmp_path: Path, names: Names, store_url: str
) -> None:
    """Killed while it starts (frozen there by a test pause point), before its dispatcher runs: the emulator says
    so, starts serving with the dispatcher in its own process, once (not also as a take-over), and fires."""
    server = emulators.prepare(
        tmp_path,
        database_url=store_url,
        env={"SCHEDULER_SECRET_KEY": TEST_SECRET_KEY, "SCHEDULER_TEST_PAUSE_AT": "dispatcher-process-start"},
    )
    starting = threading.Thread(target=server.start, kwargs={"timeout": 60})
    starting.start()
    try:
        line = wait_until(
            lambda: re.search(r"test pause at dispatcher-process-start \(pid (\d+)\)", server.log), 30, server.log_tail
        )
        child = int(line.group(1))
        os.kill(child, signal.SIGKILL)
    finally:
        starting.join(90)
    assert server.url, f"the emulator did not start:\n{server.log_tail()}"
    assert f"the dispatcher's process (pid {child}) failed" in server.log, server.log_tail()
    assert "ended unexpectedly" not in server.log, server.log_tail()
    assert server.process is not None and children_of(server.process.pid) == []  # collected, no action process
    with server.client() as http:
        fire_now(http, names, "j", target.url("/fired"))
        (fired,) = target.wait_for(1, 30)
        assert socket_owner(fired.client_port, [server.process.pid]) == server.process.pid
        entries = wait_history(http, names.job_path("j"), 1, 15, lambda: server.log_tail())
        assert entries[0]["properties"]["status"] == "Completed"
    assert value(metrics(server), "scheduler_occurrences_fired_total") == 1
