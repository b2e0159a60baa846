"""The dispatcher role in a child process (dispatcher/child.py, dispatcher/role.py): on PostgreSQL and on a SQLite
file the default command (on 2 CPUs: ``--dispatcher-process on`` here, whatever the test machine gives) runs two
processes, the API and its dispatcher child (the same program with ``--no-api``), which meet only in the store.
Seen from outside: the process tree (/proc), the target's connection held by the child, jobs made through the API
fired promptly although the dispatcher would not look again by itself for a minute (the wake-up goes through the
store), one ``/metrics`` that reports both processes (each family once), every log line whole; a child killed, or
dead while it starts, is started again and the job fires once; the emulator stopped, the attempt in flight
finishes and is recorded and no process is left; the emulator killed, its child ends by itself.
``--dispatcher-process off`` keeps the dispatcher in the emulator's process."""

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
from support.processes import children_of, process_ended, socket_owner
from support.server import EmulatorPool, ServerProcess
from support.target_server import TargetServer
from support.waiting import wait_until

JOBS = 40
# The dispatcher's own look for due work is a minute away: a fire within PROMPT seconds was woken by the API's
# write, through the store (PostgreSQL's NOTIFY; the SQLite file's change counter).
POLL = ("--poll-interval", "60")
PROMPT = 30
TWO_ROLES = ("--dispatcher-process", "on")


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


def the_child(main: int, other_than: int | None = None) -> int:
    """The emulator's one child process (a new one, if ``other_than`` is given), once it runs."""
    children = wait_until(
        lambda: (found := children_of(main)) and found != [other_than] and found, 30, "the dispatcher's child"
    )
    (child,) = children
    return int(child)


def command_line(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/cmdline").read_bytes().decode().rstrip("\0").split("\0")


def metrics_directory(pid: int) -> Path:
    """The directory of the parent's that the child ``pid`` keeps its metrics in (its PROMETHEUS_MULTIPROC_DIR)."""
    variables = Path(f"/proc/{pid}/environ").read_bytes().decode().split("\0")
    (directory,) = [v.partition("=")[2] for v in variables if v.startswith("PROMETHEUS_MULTIPROC_DIR=")]
    assert Path(directory).is_dir(), directory
    return Path(directory)


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


def test_the_api_and_its_dispatcher_child_meet_in_the_store(
    emulators: EmulatorPool, target: TargetServer, tmp_path: Path, names: Names, store_url: str
) -> None:
    server, main = start(emulators, tmp_path, store_url, *POLL, *TWO_ROLES)
    child = the_child(main)
    assert command_line(child)[-2:] == ["--no-api", "--supervised"], command_line(child)
    assert children_of(child) == []
    wait_until(lambda: f"the dispatcher runs in a process of its own (pid {child})" in server.log, 15, server.log_tail)
    with server.client() as http:
        for index in range(JOBS):  # due now: fired at once, not at the next poll a minute away
            fire_now(http, names, f"j{index}", target.url(f"/fired/j{index}"))
        requests = target.wait_for(JOBS, PROMPT)
        assert sorted(r.path for r in requests) == sorted(f"/fired/j{index}" for index in range(JOBS))
        owner = socket_owner(requests[0].client_port, [main, child])
        assert owner == child, f"the request came from pid {owner}, not the dispatcher's child {child}"
        entries = wait_history(http, names.job_path(f"j{JOBS - 1}"), 1, 15, lambda: server.log_tail())
        assert entries[0]["properties"]["status"] == "Completed"
        health = http.get("/_emulator/health").json()
        assert health["dispatcher"] == "running" and health["database"] == store_url.split(":")[0]
    families = wait_until(
        lambda: (found := metrics(server)) and value(found, "scheduler_attempts_total") >= JOBS and found,
        15,
        "the dispatcher's child to count every attempt",
    )
    assert value(families, "scheduler_occurrences_fired_total") == JOBS
    assert value(families, "scheduler_attempts_total", outcome="succeeded", action_type="Http") == JOBS
    assert value(families, "scheduler_firing_lag_seconds_count") == JOBS
    assert value(families, "scheduler_occurrences_in_flight") == 0
    assert value(families, "scheduler_dispatcher_cycles_total") >= 1
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
    server, main = start(emulators, tmp_path, store_url, *POLL, "--dispatcher-process", "off")
    assert children_of(main) == []
    assert "a process of its own" not in server.log
    with server.client() as http:
        fire_now(http, names, "j", target.url("/fired"))
        (fired,) = target.wait_for(1, PROMPT, "/fired")
        assert socket_owner(fired.client_port, [main]) == main
        assert http.get("/_emulator/health").json()["dispatcher"] == "running"
    assert value(metrics(server), "scheduler_occurrences_fired_total") == 1


def test_a_killed_dispatcher_child_is_started_again_and_the_job_fires_once(
    emulators: EmulatorPool, target: TargetServer, tmp_path: Path, names: Names, store_url: str
) -> None:
    server, main = start(emulators, tmp_path, store_url, *POLL, *TWO_ROLES)
    first = the_child(main)
    with server.client() as http:
        fire_now(http, names, "before", target.url("/before"))
        target.wait_for(1, PROMPT, "/before")
        wait_history(http, names.job_path("before"), 1, 15, lambda: server.log_tail())
        os.kill(first, signal.SIGKILL)
        wait_until(
            lambda: f"the dispatcher's process (pid {first}) ended unexpectedly" in server.log, 15, server.log_tail
        )
        second = the_child(main, other_than=first)
        assert not Path(f"/proc/{first}").exists(), f"the killed child {first} was not collected (a zombie)"
        fire_now(http, names, "after", target.url("/after"))
        (after,) = target.wait_for(1, PROMPT, "/after")
        assert socket_owner(after.client_port, [main, second]) == second
        entries = wait_history(http, names.job_path("after"), 1, 15, lambda: server.log_tail())
        assert entries[0]["properties"]["status"] == "Completed"
        assert http.get("/_emulator/health").json()["dispatcher"] == "running"
    assert len(target.requests("/before")) == 1 and len(target.requests("/after")) == 1
    # Counted by both children, the killed one's too.
    assert value(metrics(server), "scheduler_occurrences_fired_total") == 2


def test_a_dispatcher_child_that_dies_while_it_starts_is_started_again(
    emulators: EmulatorPool, target: TargetServer, tmp_path: Path, names: Names, store_url: str
) -> None:
    """Killed while it starts (frozen there by a test pause point), before its dispatcher runs: the emulator says
    so and starts another (which, with the same environment, pauses at the same point: resumed here), and fires."""
    server = emulators.prepare(
        tmp_path,
        *POLL,
        *TWO_ROLES,
        database_url=store_url,
        env={"SCHEDULER_SECRET_KEY": TEST_SECRET_KEY, "SCHEDULER_TEST_PAUSE_AT": "dispatcher-process-start"},
    )
    starting = threading.Thread(target=server.start, kwargs={"timeout": 60})
    starting.start()
    pattern = r"test pause at dispatcher-process-start \(pid (\d+)\)"
    try:
        first = int(wait_until(lambda: re.search(pattern, server.log), 30, server.log_tail).group(1))
        os.kill(first, signal.SIGKILL)
    finally:
        starting.join(90)
    assert server.url, f"the emulator did not start:\n{server.log_tail()}"
    wait_until(lambda: f"the dispatcher's process (pid {first}) ended unexpectedly" in server.log, 15, server.log_tail)
    second = int(
        wait_until(lambda: [p for p in re.findall(pattern, server.log) if int(p) != first], 30, server.log_tail)[0]
    )
    os.kill(second, signal.SIGCONT)
    assert server.process is not None
    with server.client() as http:
        fire_now(http, names, "j", target.url("/fired"))
        (fired,) = target.wait_for(1, PROMPT)
        assert socket_owner(fired.client_port, [server.process.pid, second]) == second
        entries = wait_history(http, names.job_path("j"), 1, 15, lambda: server.log_tail())
        assert entries[0]["properties"]["status"] == "Completed"
    assert value(metrics(server), "scheduler_occurrences_fired_total") == 1


@pytest.mark.parametrize("how", ["SIGTERM", "SIGINT"])
def test_a_stopped_emulator_stops_its_child_which_finishes_its_attempt_in_flight(
    how: str, emulators: EmulatorPool, target: TargetServer, tmp_path: Path, names: Names, store_url: str
) -> None:
    """Stopped (SIGTERM, or Ctrl-C's SIGINT), the emulator has its child let the attempt in flight finish within
    the grace and record it; then neither process is left."""
    server, main = start(emulators, tmp_path, store_url, *TWO_ROLES)
    child = the_child(main)
    target.respond("/held", delay=1.5)
    with server.client() as http:
        fire_now(http, names, "held", target.url("/held"))
    target.wait_for(1, PROMPT, "/held")
    server.process.send_signal(getattr(signal, how))  # type: ignore[union-attr]
    server.wait_exit(60)
    wait_until(lambda: process_ended(child), 15, f"the dispatcher's child {child} to end")
    again, _ = start(emulators, tmp_path, store_url, "--dispatcher-process", "off")
    with again.client() as http:
        entries = wait_history(http, names.job_path("held"), 1, 15, lambda: again.log_tail())
    assert entries[0]["properties"]["status"] == "Completed", entries[0]["properties"]["message"]
    assert len(target.requests("/held")) == 1


def test_a_killed_emulators_child_ends_by_itself(
    emulators: EmulatorPool, target: TargetServer, tmp_path: Path, names: Names, store_url: str
) -> None:
    """kill -9 of the emulator: the pipe on its child's standard input closes with it, and the child stops."""
    server, main = start(emulators, tmp_path, store_url, *TWO_ROLES)
    child = the_child(main)
    with server.client() as http:
        fire_now(http, names, "j", target.url("/fired"))
    target.wait_for(1, PROMPT, "/fired")
    directory = metrics_directory(child)
    server.process.send_signal(signal.SIGKILL)  # type: ignore[union-attr]
    server.wait_exit(30)
    wait_until(lambda: process_ended(child), 30, f"the dispatcher's child {child} to end by itself")
    assert not directory.exists()  # the child removed its parent's metrics directory


def test_a_stopped_emulator_whose_child_was_killed_leaves_no_metrics_directory(
    emulators: EmulatorPool, tmp_path: Path, store_url: str
) -> None:
    """The child killed, the emulator stopped before or after it starts another: the metrics directory the
    children kept their metrics in is removed as the emulator exits."""
    server, main = start(emulators, tmp_path, store_url, *TWO_ROLES)
    child = the_child(main)
    directory = metrics_directory(child)
    os.kill(child, signal.SIGKILL)
    wait_until(lambda: f"the dispatcher's process (pid {child}) ended unexpectedly" in server.log, 15, server.log_tail)
    server.process.send_signal(signal.SIGTERM)  # type: ignore[union-attr]
    server.wait_exit(60)
    assert not directory.exists(), sorted(p.name for p in directory.iterdir())
