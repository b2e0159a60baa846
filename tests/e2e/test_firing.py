"""End to end through the dispatcher: the emulator runs as a separate process on each store backend
(SQLite, PostgreSQL) and fires jobs at a real HTTP target on loopback (``target_server``), which
records what arrives and fails when told to.

Each backend gets its own server (and its own, fresh database) for the whole module, started with
short retry intervals allowed (``--min-retry-interval 1``), a 1 s poll interval and a short action
timeout; the restart test stops it and starts a new process on the same database. Both servers run side
by side for the whole module, and each test runs on one and then the other (``emulator``, a
function-scoped parameter), so that the tests keep the order they are written in.

The finest recurrence is once a minute, so the minute-scale scenarios (recurring fires, a faulted
occurrence in a recurring series, an occurrence postponed while the previous one retries, disabling a
job or a collection between two occurrences) are started together on both servers by the ``slow``
fixture at the start of the module and checked by later tests; the quick tests of both backends run
while they progress, so the minute is waited out once, not once per backend.
"""

from __future__ import annotations

import base64
import contextlib
import re
import socket
import statistics
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from support.api_client import QUICK_DISPATCH, EmulatorApi
from support.databases import fresh_database
from support.names import Names
from support.target_server import Received, TargetServer
from support.times import iso, parse, utcnow, whole_seconds_from_now
from support.waiting import unique, wait_until

from scheduler_emulator.store.database import Database
from scheduler_emulator.store.models import JobCollectionRow, JobRow, OccurrenceRow

ACTION_TIMEOUT = 2.0  # --action-timeout of the server under test (seconds)
# How late the emulator may start an attempt (by its own records: the history's startTime against the
# occurrence's expected time, or a retry's start against the previous attempt's end plus the interval). This
# is the product's real-time bound and stays one: the aim is well under a second, a fire that waited for a
# poll (1 s here) or a minute would still fail it, and 3 s leaves room for a 2-core machine running two CPU
# hogs beside the suite. Nothing here measures when the test *saw* a fire: the target's thread can be held
# up by load on its own, so arrivals are only checked for order (never before the due time), not for speed.
LATENESS_BOUND = 3.0
CLOCK_SLACK = 0.02  # the emulator sleeps on the monotonic clock and records wall-clock times
ISO_UTC = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")
MINUTE = timedelta(minutes=1)


# --- the server under test ------------------------------------------------------------------------


class Emulator(EmulatorApi):
    """The scheduler-emulator process of one backend; ``stop()`` then ``start()`` restarts it on the same
    database."""

    history_timeout = 10

    def __init__(self, backend: str, database_url: str, data_dir: Path) -> None:
        super().__init__(
            data_dir, database_url=database_url, log_level="info", **QUICK_DISPATCH, action_timeout=ACTION_TIMEOUT
        )
        self.backend = backend
        self.database_url = database_url


def started(entry: dict[str, Any]) -> datetime:
    return parse(entry["startTime"])


def ended(entry: dict[str, Any]) -> datetime:
    return parse(entry["endTime"])


def recorded_lateness(entry: dict[str, Any]) -> float:
    """Seconds from the occurrence's expected time to the start of this attempt, as the emulator recorded them."""
    return (started(entry) - parse(entry["expectedExecutionTime"])).total_seconds()


def assert_on_time(entry: dict[str, Any]) -> None:
    assert 0 <= recorded_lateness(entry) < LATENESS_BOUND, entry


def assert_spaced(earlier: dict[str, Any], later: dict[str, Any], interval: float) -> None:
    """``later`` started ``interval`` seconds after ``earlier`` ended (never sooner), give or take load."""
    gap = (started(later) - ended(earlier)).total_seconds()
    assert interval - CLOCK_SLACK <= gap < interval + LATENESS_BOUND, (gap, earlier, later)


def seconds_until(moment: datetime) -> float:
    return (moment - utcnow()).total_seconds()


def sleep_until(moment: datetime) -> None:
    delay = seconds_until(moment)
    if delay > 0:
        time.sleep(min(delay, 300))


def http_action(
    target: TargetServer, path: str, method: str = "GET", retry: dict[str, Any] | None = None, **request: Any
) -> dict[str, Any]:
    action: dict[str, Any] = {"type": "Http", "request": {"uri": target.url(path), "method": method, **request}}
    if retry is not None:
        action["retryPolicy"] = retry
    return action


NO_RETRY = {"retryType": "None"}


def fixed(count: int, interval: str) -> dict[str, Any]:
    return {"retryType": "Fixed", "retryCount": count, "retryInterval": interval}


def every_minute(start: datetime, **recurrence: Any) -> dict[str, Any]:
    return {"startTime": iso(start), "recurrence": {"frequency": "Minute", "interval": 1, **recurrence}}


def a_path(what: str) -> str:
    """A path no other job uses (``what`` says what the target does with it: ``fail`` → 500)."""
    return f"/{unique('t')}/{what}"


# --- fixtures ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def target() -> Iterator[TargetServer]:
    server = TargetServer().start()
    try:
        yield server
    finally:
        server.stop()


BACKENDS = ("sqlite", "postgresql")


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Emulator]]:
    """A server per backend, each on its own fresh database, both running for the whole module."""
    began = time.monotonic()
    with contextlib.ExitStack() as stack:
        servers: dict[str, Emulator] = {}
        for backend in BACKENDS:
            url = stack.enter_context(fresh_database(backend, tmp_path_factory))
            servers[backend] = Emulator(backend, url, tmp_path_factory.mktemp(f"firing-{backend}"))
            stack.callback(servers[backend].stop)
            servers[backend].start()
        yield servers
    print(f"\nfiring suite ran {time.monotonic() - began:.1f} s on both backends")


@pytest.fixture(params=BACKENDS)
def emulator(request: pytest.FixtureRequest, servers: dict[str, Emulator]) -> Emulator:
    """The server of one backend (every test runs on each, in turn)."""
    return servers[request.param]


@dataclass
class SlowScenarios:
    """Minute-scale jobs that all start at ``start`` (S) on one server; see the ``slow`` fixture."""

    start: datetime
    names: Names  # the collection of every job below except ``dis-coll``
    disabled: Names  # the collection disabled with POST /disable after its job's first fire
    jobs: dict[str, str]  # scenario → job name
    paths: dict[str, str]  # scenario → target path
    postponed: Future[PostponedSeen]  # what the ``postponed`` scenario showed before its job was deleted


@dataclass
class PostponedSeen:
    """The ``postponed`` scenario once its fourth attempt and the Postponed entry are in (before S+120 s)."""

    attempts: list[Received]
    history: list[dict[str, Any]]
    properties: dict[str, Any]


@pytest.fixture(scope="module")
def slow_scenarios(servers: dict[str, Emulator], target: TargetServer) -> Iterator[dict[str, SlowScenarios]]:
    """Start every minute-scale scenario on both servers at once, at S a few seconds from now:

    - ``rec-ok``: every minute, count 2, succeeds → fires at S and S+60 s, then Completed.
    - ``rec-faulted``: every minute, count 2, target fails, no retries, error action → both occurrences
      fault, the job keeps running and ends Completed.
    - ``postponed``: every minute, target fails, 3 retries 22 s apart (S .. S+66 s) → S+60 s comes due
      while it retries and is recorded as Postponed; next run S+120 s. What it shows is read as soon as it is
      all there, and then the job is deleted (it would fire again at S+120 s), on a thread of its own: the
      test that checks it may run later than that.
    - ``dis-job``: every minute; disabled with PATCH after its first fire → no fire at S+60 s.
    - ``dis-coll``: every minute in another collection, disabled with POST /disable after its first fire.
    """
    start = whole_seconds_from_now(6)
    plans = {backend: _plan_slow(server, target, start) for backend, server in servers.items()}
    assert seconds_until(start) > 0.5, "setting up the slow scenarios took too long"
    with ThreadPoolExecutor(len(servers), thread_name_prefix="postponed") as readers:
        scenarios = {}
        for backend, (names, disabled, jobs, paths) in plans.items():
            server, timeout = servers[backend], seconds_until(start) + 5
            target.wait_for(1, timeout, paths["dis-job"])
            target.wait_for(1, timeout, paths["dis-coll"])
            server.ok("PATCH", names.job_path(jobs["dis-job"]), {"properties": {"state": "Disabled"}})
            server.ok("POST", disabled.collection_path + "/disable")
            seen = readers.submit(_read_postponed, server, target, start, names, jobs["postponed"], paths["postponed"])
            scenarios[backend] = SlowScenarios(start, names, disabled, jobs, paths, seen)
        yield scenarios


def _plan_slow(
    emulator: Emulator, target: TargetServer, start: datetime
) -> tuple[Names, Names, dict[str, str], dict[str, str]]:
    """Create the ``slow_scenarios`` jobs on one server, all starting at ``start``."""
    names, disabled = Names(), Names()
    emulator.collection(names)
    emulator.collection(disabled)
    jobs = {key: unique(f"{key}-") for key in ("rec-ok", "rec-faulted", "postponed", "dis-job", "dis-coll")}
    paths = {
        "rec-ok": a_path("rec-ok"),
        "rec-faulted": a_path("rec-fail"),
        "rec-faulted-error": a_path("rec-error-sink"),
        "postponed": a_path("postponed-fail"),
        "dis-job": a_path("dis-job"),
        "dis-coll": a_path("dis-coll"),
    }
    emulator.put_job(
        names,
        jobs["rec-ok"],
        {
            **every_minute(start, count=2),
            "action": http_action(target, paths["rec-ok"], retry=NO_RETRY),
        },
    )
    emulator.put_job(
        names,
        jobs["rec-faulted"],
        {
            **every_minute(start, count=2),
            "action": {
                **http_action(target, paths["rec-faulted"], "POST", retry=NO_RETRY, body="main"),
                "errorAction": http_action(target, paths["rec-faulted-error"], "POST", retry=NO_RETRY, body="error"),
            },
        },
    )
    emulator.put_job(
        names,
        jobs["postponed"],
        {
            **every_minute(start),
            "action": http_action(target, paths["postponed"], retry=fixed(3, "PT22S")),
        },
    )
    emulator.put_job(
        names,
        jobs["dis-job"],
        {
            **every_minute(start),
            "action": http_action(target, paths["dis-job"], retry=NO_RETRY),
        },
    )
    emulator.put_job(
        disabled,
        jobs["dis-coll"],
        {
            **every_minute(start),
            "action": http_action(target, paths["dis-coll"], retry=NO_RETRY),
        },
    )
    return names, disabled, jobs, paths


def _read_postponed(
    emulator: Emulator, target: TargetServer, start: datetime, names: Names, job: str, path: str
) -> PostponedSeen:
    """Wait for the ``postponed`` scenario's four attempts and its Postponed entry, read what it shows, then
    delete its job (it would fire again at S+120 s, during the restart test)."""
    try:
        attempts = target.wait_for(4, seconds_until(start + timedelta(seconds=66)) + 6, path)
        history = wait_until(
            lambda: (h := emulator.history(names, job)) and len(h) >= 5 and h,
            10,
            "4 attempts and a Postponed entry in the history",
        )
        return PostponedSeen(attempts, history, emulator.job(names, job)["properties"])
    finally:
        emulator.call("DELETE", names.job_path(job))


@pytest.fixture
def slow(emulator: Emulator, slow_scenarios: dict[str, SlowScenarios]) -> SlowScenarios:
    """The minute-scale scenarios running on this test's server."""
    return slow_scenarios[emulator.backend]


# --- quick tests (they run while the slow scenarios progress) ---------------------------------------


def test_one_time_job_fires_once_with_request_and_scheduler_headers(
    emulator: Emulator,
    target: TargetServer,
    slow: SlowScenarios,  # slow: starts the minute-scale scenarios now
) -> None:
    names = Names()
    collection = emulator.collection(names, "westus")
    assert collection["location"] == "West US"
    job, path = unique("once-"), a_path("hook")
    target.respond(path, 200, "hook received")
    start = whole_seconds_from_now(2)
    created = emulator.put_job(
        names,
        job,
        {
            "startTime": iso(start),
            "action": http_action(
                target,
                path,
                "POST",
                retry=NO_RETRY,
                body='{"hello": "world"}',
                headers={"Content-Type": "application/json", "X-Custom-Header": "custom value"},
            ),
        },
    )
    assert created["properties"]["status"]["nextExecutionTime"] == iso(start)

    [fire] = target.wait_for(1, seconds_until(start) + 5, path)
    assert fire.method == "POST"
    assert fire.body == b'{"hello": "world"}'
    assert fire.header("content-type") == "application/json"
    assert fire.header("x-custom-header") == "custom value"
    assert fire.header("x-ms-scheduler-jobid") == job
    assert fire.header("x-ms-scheduler-jobcollectionid") == names.collection
    assert fire.header("x-ms-scheduler-execution-region") == "West US"
    assert fire.header("x-ms-execution-tag")
    assert fire.header("x-ms-client-request-id")
    assert fire.header("x-ms-client-request-id") != fire.header("x-ms-execution-tag")
    expected = fire.header("x-ms-scheduler-expected-execution-time")
    assert expected and ISO_UTC.match(expected), expected
    assert fire.expected_time == start
    assert fire.wall >= start, "fired before its time"

    done = emulator.wait_state(names, job, "completed")
    status = done["properties"]["status"]
    assert (status["executionCount"], status["failureCount"], status["faultedCount"]) == (1, 0, 0)
    assert "nextExecutionTime" not in status
    assert start <= parse(status["lastExecutionTime"]) <= fire.wall
    [entry] = emulator.history(names, job)
    assert entry["actionName"] == "MainAction"
    assert entry["status"] == "Completed"
    assert (entry["retryCount"], entry["repeatCount"]) == (0, 1)
    assert parse(entry["expectedExecutionTime"]) == start
    assert_on_time(entry)
    # the service's words: reason phrase as sent, the response headers, the body
    assert entry["message"].startswith("Http Action - Response from host '127.0.0.1': 'OK' Response Headers: ")
    assert "Date: " in entry["message"] and entry["message"].endswith("\r\n Body: hook received"), entry

    time.sleep(1.5)
    assert len(target.requests(path)) == 1, "a one-time job fired more than once"


def test_basic_authentication_arrives_as_authorization_header(emulator: Emulator, target: TargetServer) -> None:
    names = Names()
    emulator.collection(names)
    job, path = unique("basic-"), a_path("basic")
    created = emulator.put_job(
        names,
        job,
        {
            "action": http_action(
                target,
                path,
                retry=NO_RETRY,
                authentication={"type": "Basic", "username": "scheduler-user", "password": "pa:ss word"},
            ),
        },
    )
    assert "password" not in created["properties"]["action"]["request"]["authentication"]
    [fire] = target.wait_for(1, 5, path)
    token = base64.b64encode(b"scheduler-user:pa:ss word").decode()
    assert fire.header("authorization") == f"Basic {token}"
    emulator.wait_state(names, job, "completed")


def test_many_jobs_due_together_fire_on_time(emulator: Emulator, target: TargetServer) -> None:
    """20 one-time jobs due within one second: each fires once, never before its time (at the target, against
    x-ms-scheduler-expected-execution-time), and not late (the emulator's recorded start of each attempt)."""
    names = Names()
    emulator.collection(names)
    path = a_path("lateness")
    base = whole_seconds_from_now(4)
    starts = {unique(f"lat{i:02d}-"): base + timedelta(milliseconds=50 * i) for i in range(20)}
    for job, start in starts.items():
        emulator.put_job(names, job, {"startTime": iso(start), "action": http_action(target, path, retry=NO_RETRY)})
    assert seconds_until(base) > 0, "creating the jobs took too long for this measurement"

    fires = target.wait_for(20, seconds_until(base) + 8, path)
    by_job = {fire.header("x-ms-scheduler-jobid"): fire for fire in fires}
    assert sorted(by_job) == sorted(starts) and len(fires) == 20, "each job must fire exactly once"
    for job, fire in by_job.items():
        assert fire.expected_time == starts[job]
    assert min(fire.lateness for fire in fires) >= 0, "a job fired before its time"
    entries = {job: emulator.wait_history(names, job, 1)[0] for job in starts}
    assert all(parse(entries[job]["expectedExecutionTime"]) == start for job, start in starts.items())
    lateness = sorted(recorded_lateness(entry) for entry in entries.values())
    print(
        f"\n[{emulator.backend}] lateness of 20 jobs due within 1 s (recorded): min {lateness[0] * 1000:.0f} ms, "
        f"p50 {statistics.median(lateness) * 1000:.0f} ms, p90 {lateness[17] * 1000:.0f} ms, "
        f"max {lateness[-1] * 1000:.0f} ms; at the target: max {max(f.lateness for f in fires) * 1000:.0f} ms"
    )
    assert lateness[0] >= 0, "a job started before its time"
    assert lateness[-1] < LATENESS_BOUND
    time.sleep(1)
    assert len(target.requests(path)) == 20


def test_jobs_finishing_together_each_keep_their_own_outcome_and_body(emulator: Emulator, target: TargetServer) -> None:
    """Jobs due at the same instant are claimed and finished as one batch (on PostgreSQL, statements over
    arrays): each job's history keeps its own target's body, whatever characters it holds (quotes, braces,
    backslashes, a NUL byte, bytes that are not UTF-8), its own status and counters, and each one-time job
    ends in its own state."""
    names = Names()
    emulator.collection(names)
    bodies: list[tuple[int, bytes, str]] = [
        (200, b'say "hi", {NULL}', 'say "hi", {NULL}'),
        (200, b'back\\slash \\" quote', 'back\\slash \\" quote'),
        (200, b"NULL", "NULL"),
        (200, b"line one\nline two\ttab", "line one\nline two\ttab"),
        (200, b"nul\x00byte", "nul\ufffdbyte"),
        (200, b"latin-1 \xe9t\xe9", "latin-1 \ufffdt\ufffd"),
        (200, "unicode \u00e9\u4e2d\U0001f600".encode(), "unicode \u00e9\u4e2d\U0001f600"),
        (500, b"{,}", "{,}"),
    ]
    start = whole_seconds_from_now(3)
    jobs: dict[str, tuple[int, str]] = {}
    for i, (status, body, shown) in enumerate(bodies):
        job, path = unique(f"batch{i}-"), a_path(f"batch{i}")
        target.respond(path, status=status, body=body)
        emulator.put_job(names, job, {"startTime": iso(start), "action": http_action(target, path, retry=NO_RETRY)})
        jobs[job] = (status, shown)
    assert seconds_until(start) > 0, "creating the jobs took too long"

    for job, (status, shown) in jobs.items():
        done = emulator.wait_state(names, job, "completed" if status == 200 else "faulted", seconds_until(start) + 10)
        counts = done["properties"]["status"]
        assert (counts["executionCount"], counts["failureCount"]) == (1, int(status != 200)), job
        [entry] = emulator.history(names, job)
        assert entry["status"] == ("Completed" if status == 200 else "Failed"), job
        assert parse(entry["expectedExecutionTime"]) == start
        assert entry["message"].endswith(f" Body: {shown}"), (job, entry["message"])


def test_failing_target_gets_the_retries_then_the_error_action(emulator: Emulator, target: TargetServer) -> None:
    """Fixed policy, 2 retries 2 s apart, then the error action; a one-time job ends Faulted."""
    names = Names()
    emulator.collection(names)
    job, main_path, error_path = unique("retry-"), a_path("main-fail"), a_path("error-sink")
    long_body = "boom-" + "x" * 3000
    target.respond(main_path, 503, long_body)
    target.respond(error_path, 200, "error handled")
    emulator.put_job(
        names,
        job,
        {
            "action": {
                **http_action(target, main_path, "POST", retry=fixed(2, "PT2S"), body="main"),
                "errorAction": http_action(
                    target, error_path, "PUT", retry=NO_RETRY, body="error!", headers={"X-Error": "yes"}
                ),
            },
        },
    )

    main = target.wait_for(3, 12, main_path)
    [error] = target.wait_for(1, 5, error_path)
    assert main[0].wall < main[1].wall < main[2].wall < error.wall
    assert len({r.header("x-ms-execution-tag") for r in [*main, error]}) == 1, "one execution tag per occurrence"
    assert len({r.header("x-ms-client-request-id") for r in [*main, error]}) == 4, "a client request id per attempt"
    assert len({r.expected_time for r in [*main, error]}) == 1
    assert all(r.method == "POST" and r.body == b"main" for r in main)
    assert (error.method, error.body, error.header("x-error")) == ("PUT", b"error!", "yes")
    assert error.header("x-ms-scheduler-jobid") == job

    done = emulator.wait_state(names, job, "faulted")
    status = done["properties"]["status"]
    assert (status["executionCount"], status["failureCount"], status["faultedCount"]) == (3, 3, 1)
    assert "nextExecutionTime" not in status
    history = emulator.history(names, job)
    assert [(e["actionName"], e["status"], e["retryCount"], e["repeatCount"]) for e in history] == [
        ("ErrorAction", "Completed", 0, 1),
        ("MainAction", "Failed", 2, 1),
        ("MainAction", "Failed", 1, 1),
        ("MainAction", "Failed", 0, 1),
    ]
    assert len({e["expectedExecutionTime"] for e in history}) == 1
    assert parse(history[0]["expectedExecutionTime"]) == main[0].expected_time
    first, second, third, error_entry = reversed(history)
    assert_spaced(first, second, 2)  # retries 2 s apart, by the emulator's own records
    assert_spaced(second, third, 2)
    assert_spaced(third, error_entry, 0)  # the error action runs right after the last retry
    last_execution = parse(status["lastExecutionTime"])
    assert last_execution == started(history[1]), "the start of the latest attempt (the main action's last)"
    assert last_execution <= main[-1].wall
    for entry in history[1:]:
        assert entry["message"].startswith("Http Action - Response from host '127.0.0.1': 'Service Unavailable' ")
        assert long_body[:2048] in entry["message"], "the first 2048 bytes of the body"
        assert long_body[:2049] not in entry["message"], "no more than 2048 bytes of the body"
    assert "'OK' Response Headers: " in history[0]["message"] and "error handled" in history[0]["message"]
    assert len(emulator.history(names, job, **{"$filter": "status eq 'Failed'"})) == 3

    time.sleep(2.5)
    assert (len(target.requests(main_path)), len(target.requests(error_path))) == (3, 1), "nothing more after that"


def test_error_action_without_its_own_policy_retries_with_the_main_one(
    emulator: Emulator, target: TargetServer
) -> None:
    names = Names()
    emulator.collection(names)
    job, main_path, error_path = unique("errretry-"), a_path("main-fail"), a_path("error-fail")
    emulator.put_job(
        names,
        job,
        {
            "action": {
                **http_action(target, main_path, retry=fixed(1, "PT1S")),
                "errorAction": http_action(target, error_path, "DELETE"),
            },
        },
    )
    main = target.wait_for(2, 8, main_path)
    errors = target.wait_for(2, 8, error_path)
    assert errors[0].wall > main[1].wall
    done = emulator.wait_state(names, job, "faulted")
    status = done["properties"]["status"]
    assert (status["executionCount"], status["faultedCount"]) == (2, 1)
    history = emulator.history(names, job)
    assert [(e["actionName"], e["status"], e["retryCount"]) for e in history] == [
        ("ErrorAction", "Failed", 1),
        ("ErrorAction", "Failed", 0),
        ("MainAction", "Failed", 1),
        ("MainAction", "Failed", 0),
    ]
    assert_spaced(history[1], history[0], 1)  # the error action's retry, at the main action's 1 s interval
    assert_spaced(history[2], history[1], 0)
    time.sleep(1.5)
    assert (len(target.requests(main_path)), len(target.requests(error_path))) == (2, 2)


def test_retry_type_none_makes_exactly_one_attempt(emulator: Emulator, target: TargetServer) -> None:
    names = Names()
    emulator.collection(names)
    job, path = unique("noretry-"), a_path("fail")
    emulator.put_job(names, job, {"action": http_action(target, path, retry=NO_RETRY)})
    target.wait_for(1, 5, path)
    done = emulator.wait_state(names, job, "faulted")
    status = done["properties"]["status"]
    assert (status["executionCount"], status["failureCount"], status["faultedCount"]) == (1, 1, 1)
    [entry] = emulator.history(names, job)
    assert (entry["actionName"], entry["status"]) == ("MainAction", "Failed")
    assert (entry["retryCount"], entry["repeatCount"]) == (0, 1)
    assert "'Internal Server Error' Response Headers: " in entry["message"] and "target failure at" in entry["message"]
    time.sleep(3)
    assert len(target.requests(path)) == 1, "retryType None means no retry"


def test_connection_refused_is_a_failure_named_in_history(emulator: Emulator) -> None:
    names = Names()
    emulator.collection(names)
    with socket.socket() as probe:  # a loopback port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    job = unique("refused-")
    emulator.put_job(
        names,
        job,
        {
            "action": {
                "type": "Http",
                "request": {"uri": f"http://127.0.0.1:{port}/x", "method": "GET"},
                "retryPolicy": NO_RETRY,
            },
        },
    )
    done = emulator.wait_state(names, job, "faulted")
    assert done["properties"]["status"]["failureCount"] == 1
    [entry] = emulator.history(names, job)
    assert entry["status"] == "Failed" and "refused" in entry["message"].lower(), entry


def test_redirects_are_followed_up_to_five(emulator: Emulator, target: TargetServer) -> None:
    names = Names()
    emulator.collection(names)
    chains = {}
    for hops in (5, 6):
        prefix = a_path(f"hops{hops}")
        for hop in range(hops):
            target.redirect(f"{prefix}/{hop}", f"{prefix}/{hop + 1}")
        target.respond(f"{prefix}/{hops}", 200, "arrived")
        job = unique(f"redirect{hops}-")
        chains[job] = f"{prefix}/{hops}"
        emulator.put_job(names, job, {"action": http_action(target, f"{prefix}/0", "GET", retry=NO_RETRY)})
    five, six = chains
    emulator.wait_state(names, five, "completed")
    assert len(target.requests(chains[five])) == 1
    [entry] = emulator.history(names, five)
    assert entry["status"] == "Completed" and "arrived" in entry["message"]
    emulator.wait_state(names, six, "faulted")
    assert target.requests(chains[six]) == [], "a sixth redirect is not followed"
    [entry] = emulator.history(names, six)
    assert entry["status"] == "Failed" and "redirect" in entry["message"].lower(), entry


def test_slow_target_times_out_and_counts_as_failure(emulator: Emulator, target: TargetServer) -> None:
    names = Names()
    emulator.collection(names)
    job, path = unique("timeout-"), a_path("slow")
    answer_after = ACTION_TIMEOUT + 8  # the target answers long after the timeout (its thread is a daemon)
    target.respond(path, 200, "too late", delay=answer_after)
    emulator.put_job(names, job, {"action": http_action(target, path, retry=NO_RETRY)})
    target.wait_for(1, 5, path)
    done = emulator.wait_state(names, job, "faulted", timeout=ACTION_TIMEOUT + 8)
    assert done["properties"]["status"]["failureCount"] == 1
    [entry] = emulator.history(names, job)
    assert entry["status"] == "Failed" and "timed out" in entry["message"], entry
    took = (ended(entry) - started(entry)).total_seconds()
    # Cut at the timeout, never sooner, and well before the answer would have come (an attempt that waited
    # for it would take answer_after); the 3 s above the timeout leave room for a loaded machine.
    assert ACTION_TIMEOUT - 0.1 <= took < ACTION_TIMEOUT + LATENESS_BOUND < answer_after, took


def test_run_now_fires_one_extra_occurrence_and_leaves_the_schedule_alone(
    emulator: Emulator, target: TargetServer
) -> None:
    names = Names()
    emulator.collection(names)
    later = whole_seconds_from_now(3600)
    jobs = {
        unique("run-rec-"): {"startTime": iso(later), "recurrence": {"frequency": "Hour", "interval": 1}},
        unique("run-once-"): {"startTime": iso(later)},
    }
    paths = {}
    for job, timing in jobs.items():
        paths[job] = a_path("run")
        created = emulator.put_job(names, job, {**timing, "action": http_action(target, paths[job], retry=NO_RETRY)})
        assert created["properties"]["status"]["nextExecutionTime"] == iso(later)
    asked = utcnow()
    for job in jobs:
        assert emulator.call("POST", names.job_path(job) + "/run").status_code == 200
    answered = utcnow()
    for job, path in paths.items():
        [fire] = target.wait_for(1, 5, path)
        assert fire.header("x-ms-scheduler-jobid") == job
        # a run's expected time is when it was asked for: between sending the request and its answer
        assert asked - timedelta(milliseconds=1) <= fire.expected_time <= answered + timedelta(milliseconds=1)
        emulator.wait_history(names, job, 1, 5)
        properties = emulator.job(names, job)["properties"]
        assert properties["state"] == "enabled", "a run does not finish the job"
        assert properties["status"]["executionCount"] == 1
        assert properties["status"]["nextExecutionTime"] == iso(later), "a run leaves the schedule alone"
        [entry] = emulator.history(names, job)
        assert (entry["actionName"], entry["status"], entry["repeatCount"]) == ("MainAction", "Completed", 1)
        assert_on_time(entry)
    time.sleep(1.5)
    assert all(len(target.requests(path)) == 1 for path in paths.values())


# --- the minute-scale scenarios -------------------------------------------------------------------


def test_recurring_job_fires_at_the_expected_instants(
    emulator: Emulator, target: TargetServer, slow: SlowScenarios
) -> None:
    path, job, start = slow.paths["rec-ok"], slow.jobs["rec-ok"], slow.start
    fires = target.wait_for(2, seconds_until(start + MINUTE) + 5, path)
    assert [f.expected_time for f in fires] == [start, start + MINUTE]
    assert fires[0].wall >= start and fires[1].wall >= start + MINUTE, "fired before its time"
    assert fires[0].header("x-ms-execution-tag") != fires[1].header("x-ms-execution-tag"), "a tag per occurrence"
    done = emulator.wait_state(slow.names, job, "completed")
    status = done["properties"]["status"]
    assert (status["executionCount"], status["failureCount"], status["faultedCount"]) == (2, 0, 0)
    assert "nextExecutionTime" not in status
    history = emulator.history(slow.names, job)
    assert [(e["status"], e["repeatCount"], parse(e["expectedExecutionTime"])) for e in history] == [
        ("Completed", 2, start + MINUTE),
        ("Completed", 1, start),
    ]
    lateness = [recorded_lateness(e) for e in reversed(history)]
    print(f"\n[{emulator.backend}] recurring job lateness: {', '.join(f'{s * 1000:.0f} ms' for s in lateness)}")
    for entry in history:  # each fire started at its own instant (so the two are a minute apart)
        assert_on_time(entry)
    assert len(target.requests(path)) == 2


def test_recurring_job_keeps_running_after_a_faulted_occurrence(
    emulator: Emulator, target: TargetServer, slow: SlowScenarios
) -> None:
    job, start = slow.jobs["rec-faulted"], slow.start
    main = target.wait_for(2, seconds_until(start + MINUTE) + 5, slow.paths["rec-faulted"])
    errors = target.wait_for(2, 5, slow.paths["rec-faulted-error"])
    assert [f.expected_time for f in main] == [start, start + MINUTE]
    assert [f.expected_time for f in errors] == [start, start + MINUTE]
    done = emulator.wait_state(slow.names, job, "completed")
    status = done["properties"]["status"]
    assert (status["executionCount"], status["failureCount"], status["faultedCount"]) == (2, 2, 2)
    history = emulator.history(slow.names, job)
    assert [(e["actionName"], e["status"], e["retryCount"], e["repeatCount"]) for e in history] == [
        ("ErrorAction", "Completed", 0, 2),
        ("MainAction", "Failed", 0, 2),
        ("ErrorAction", "Completed", 0, 1),
        ("MainAction", "Failed", 0, 1),
    ]
    assert len(target.requests(slow.paths["rec-faulted"])) == 2
    assert len(target.requests(slow.paths["rec-faulted-error"])) == 2


def test_occurrence_due_while_the_previous_one_retries_is_postponed(
    emulator: Emulator, target: TargetServer, slow: SlowScenarios
) -> None:
    start = slow.start
    seen = slow.postponed.result(timeout=max(seconds_until(start + timedelta(seconds=66)), 0) + 30)
    assert len(seen.attempts) == 4 and all(f.expected_time == start for f in seen.attempts), (
        "S+60 s must not run while S is retrying"
    )
    history = seen.history
    postponed = [e for e in history if e["status"] == "Postponed"]
    assert len(postponed) == 1, history
    assert postponed[0]["actionName"] == "MainAction"
    assert parse(postponed[0]["expectedExecutionTime"]) == start + MINUTE
    assert "1 occurrence" in postponed[0]["message"], postponed[0]["message"]
    assert [(e["status"], e["retryCount"], e["repeatCount"]) for e in history if e is not postponed[0]] == [
        ("Failed", 3, 1),
        ("Failed", 2, 1),
        ("Failed", 1, 1),
        ("Failed", 0, 1),
    ]
    tries = list(reversed([e for e in history if e is not postponed[0]]))
    for earlier, later in zip(tries, tries[1:], strict=False):
        assert_spaced(earlier, later, 22)  # the retries 22 s apart, by the emulator's own records
    properties = seen.properties
    assert properties["state"] == "enabled"
    assert parse(properties["status"]["nextExecutionTime"]) == start + 2 * MINUTE
    status = properties["status"]
    assert (status["executionCount"], status["failureCount"], status["faultedCount"]) == (4, 4, 1)
    assert [f.expected_time for f in target.requests(slow.paths["postponed"])] == [start] * 4, (
        "no fire after the job was deleted, before S+120 s"
    )


def test_disabling_a_job_stops_its_fires(emulator: Emulator, target: TargetServer, slow: SlowScenarios) -> None:
    job, path = slow.jobs["dis-job"], slow.paths["dis-job"]
    properties = emulator.job(slow.names, job)["properties"]
    assert properties["state"] == "disabled"
    assert "nextExecutionTime" not in properties["status"]
    sleep_until(slow.start + MINUTE + timedelta(seconds=3))
    assert [f.expected_time for f in target.requests(path)] == [slow.start], "no fire after the job was disabled"
    assert emulator.status(slow.names, job)["executionCount"] == 1


def test_disabling_a_collection_stops_its_jobs(emulator: Emulator, target: TargetServer, slow: SlowScenarios) -> None:
    job, path = slow.jobs["dis-coll"], slow.paths["dis-coll"]
    assert emulator.ok("GET", slow.disabled.collection_path)["properties"]["state"] == "Disabled"
    properties = emulator.job(slow.disabled, job)["properties"]
    assert properties["state"] == "disabled"
    assert "nextExecutionTime" not in properties["status"]
    sleep_until(slow.start + MINUTE + timedelta(seconds=3))
    assert [f.expected_time for f in target.requests(path)] == [slow.start], "no fire after the collection was disabled"


# --- restart (last: it replaces the server process) --------------------------------------------------


def _key(fire: Received) -> tuple[str | None, str | None, datetime]:
    return fire.header("x-ms-scheduler-jobcollectionid"), fire.header("x-ms-scheduler-jobid"), fire.expected_time


def test_restart_neither_loses_nor_repeats_nor_floods_occurrences(emulator: Emulator, target: TargetServer) -> None:
    """Stop the server, move a minute job's schedule 5 minutes back in the store (as if the server had been
    down since), restart on the same database: exactly one late run of the most recent missed instant,
    one Postponed entry saying how many were skipped, then on schedule. Occurrences that finished before
    the stop are not fired again; one in flight at the stop (waiting to retry) is resumed, not lost."""
    names = Names()
    emulator.collection(names)
    now0 = whole_seconds_from_now(0)
    upcoming = now0 + timedelta(seconds=30)  # the catch-up job's next instant at creation
    jobs = {k: unique(f"rs-{k}-") for k in ("catchup", "recurring", "inflight", "once")}
    paths = {
        "catchup": a_path("catchup"),
        "recurring": a_path("recurring"),
        "inflight": a_path("flaky"),
        "once": a_path("once"),
    }
    target.respond(paths["inflight"], 200, "recovered", fail_first=10**6)
    created = emulator.put_job(
        names,
        jobs["catchup"],
        {
            **every_minute(upcoming - 10 * MINUTE),
            "action": http_action(target, paths["catchup"], retry=NO_RETRY),
        },
    )
    assert parse(created["properties"]["status"]["nextExecutionTime"]) == upcoming, "past instants are skipped"
    recurring_start = now0 + timedelta(seconds=2)
    emulator.put_job(
        names,
        jobs["recurring"],
        {
            **every_minute(recurring_start),
            "action": http_action(target, paths["recurring"], retry=NO_RETRY),
        },
    )
    emulator.put_job(
        names,
        jobs["inflight"],
        {
            "action": http_action(target, paths["inflight"], retry=fixed(10, "PT2S")),
        },
    )
    emulator.put_job(names, jobs["once"], {"action": http_action(target, paths["once"], retry=NO_RETRY)})

    target.wait_for(1, 6, paths["recurring"])
    target.wait_for(1, 5, paths["once"])
    target.wait_for(1, 5, paths["inflight"])
    emulator.wait_state(names, jobs["once"], "completed")
    emulator.wait_job(
        names,
        jobs["recurring"],
        lambda j: j["properties"]["status"]["executionCount"] == 1,
        5,
        "the recurring job's first occurrence to be recorded",
    )
    assert seconds_until(upcoming) > 12, "the set-up took too long: the restart would not finish before the next run"

    fired_before = {_key(fire) for fire in target.requests()}
    emulator.stop()

    # Simulate downtime: the series is 5 minutes behind, as if the server had been down since then.
    first_missed = upcoming - 5 * MINUTE
    latest_missed = upcoming - MINUTE  # the most recent instant in the past
    database = Database(emulator.database_url)
    try:
        with database.session() as session:
            unfinished = {
                (collection, job, expected)
                for collection, job, expected in session.execute(
                    select(JobCollectionRow.name, JobRow.name, OccurrenceRow.expected_time)
                    .join(JobRow, OccurrenceRow.job_id == JobRow.id)
                    .join(JobCollectionRow, JobRow.collection_id == JobCollectionRow.id)
                    .where(OccurrenceRow.finished_at.is_(None))
                )
            }
            row = session.scalar(
                select(JobRow)
                .join(JobCollectionRow, JobRow.collection_id == JobCollectionRow.id)
                .where(JobCollectionRow.name == names.collection, JobRow.name == jobs["catchup"])
            )
            assert row is not None and row.next_execution_time == upcoming
            row.series_origin = first_missed - timedelta(seconds=30)
            row.next_execution_time = first_missed
    finally:
        database.dispose()
    assert {job for _, job, _ in unfinished if job.startswith("rs-")} == {jobs["inflight"]}, unfinished
    target.respond(paths["inflight"], 200, "recovered")

    seen_before_restart = len(target.requests())
    emulator.start()

    # Exactly one late run of the most recent missed occurrence...
    [late] = target.wait_for(1, 8, paths["catchup"])
    assert late.expected_time == latest_missed
    history = emulator.wait_history(names, jobs["catchup"], 2)
    assert sorted((e["status"], e["actionName"]) for e in history) == [
        ("Completed", "MainAction"),
        ("Postponed", "MainAction"),
    ]
    [ran] = [e for e in history if e["status"] == "Completed"]
    [postponed] = [e for e in history if e["status"] == "Postponed"]
    assert parse(ran["expectedExecutionTime"]) == latest_missed, "the late run shows when it was due"
    assert ran["repeatCount"] == 1
    assert parse(postponed["expectedExecutionTime"]) == first_missed
    assert "4 occurrence" in postponed["message"], postponed["message"]
    status = emulator.status(names, jobs["catchup"])
    assert parse(status["nextExecutionTime"]) == upcoming
    assert status["executionCount"] == 1
    time.sleep(1.5)
    assert len(target.requests(paths["catchup"])) == 1, "no flood of missed occurrences"

    # ... the occurrence that was waiting to retry is resumed and completes ...
    done = emulator.wait_state(names, jobs["inflight"], "completed", timeout=10)
    assert done["properties"]["status"]["faultedCount"] == 0
    before = target.requests(paths["inflight"])[0]
    resumed = [f for f in target.requests()[seen_before_restart:] if f.path == paths["inflight"]]
    assert resumed and all(_key(f) == _key(before) for f in resumed), "the same occurrence, resumed"
    assert emulator.history(names, jobs["inflight"])[0]["status"] == "Completed"

    # ... then the catch-up job runs on schedule.
    fires = target.wait_for(2, seconds_until(upcoming) + 5, paths["catchup"])
    assert fires[1].expected_time == upcoming
    assert fires[1].wall >= upcoming, "fired before its time"
    history = emulator.wait_history(names, jobs["catchup"], 3)
    assert sorted(e["status"] for e in history) == ["Completed", "Completed", "Postponed"]
    assert (history[0]["status"], history[0]["repeatCount"]) == ("Completed", 2)
    assert parse(history[0]["expectedExecutionTime"]) == upcoming
    assert_on_time(history[0])

    # Nothing that had finished before the stop fired again.
    repeated = [
        _key(fire)
        for fire in target.requests()[seen_before_restart:]
        if _key(fire) in fired_before and _key(fire) not in unfinished
    ]
    assert not repeated, f"fired again after the restart: {repeated}"
    assert len(target.requests(paths["once"])) == 1
    assert [f.expected_time for f in target.requests(paths["recurring"])] == [recurring_start]
