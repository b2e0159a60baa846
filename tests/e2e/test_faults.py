"""Faults as production deals them, on one API process and three dispatchers sharing a PostgreSQL server of the
test's own (support/private_postgres.py: restarting the shared server would break other tests): dispatchers
killed with SIGKILL and restarted, one frozen with SIGSTOP for over two leases, the API killed while a client keeps
writing, and PostgreSQL restarted — while one-time jobs fall due at a steady rate.

The checker: no occurrence missing; an occurrence fired twice only if it was in flight in a dispatcher that was
killed or frozen, and another took it over (at-least-once, docs/several-processes.md), each one listed; no write
the API acknowledged is lost; every process alive and healthy at the end. Schedules are short and no assertion
is on a duration; the figures (lateness around each fault, how long each recovery took) are printed.

``SCHEDULER_FAULTS_LONG=1`` (``make faults``) runs the long form: 2,400 occurrences over four minutes, four kills,
two 12 s freezes, the API kill and the database restart, with a 5 s lease."""

from __future__ import annotations

import contextlib
import os
import signal
import statistics
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
from sqlalchemy import select
from support.api_client import API
from support.databases import TEST_SECRET_KEY
from support.names import Names
from support.private_postgres import PrivatePostgres
from support.server import EmulatorPool, ServerProcess
from support.store_rows import insert_due_jobs
from support.target_server import TargetServer, fired_paths
from support.waiting import wait_until

from scheduler_emulator.store.database import Database
from scheduler_emulator.store.models import JobRow, OccurrenceRow

LONG = os.environ.get("SCHEDULER_FAULTS_LONG", "") not in ("", "0")
PARAMS = {"api-version": API}
PER_COLLECTION = 500  # jobs the writer puts in one collection (a P20Premium collection holds 1,000)


@dataclass(frozen=True)
class Plan:
    jobs: int
    window: float  # seconds over which the jobs fall due
    lease: float
    # (seconds after the first job is due, fault, dispatcher index or None)
    faults: tuple[tuple[float, str, int | None], ...]
    pause: float  # how long a SIGSTOP lasts


SHORT = Plan(
    jobs=600,
    window=30,
    lease=3,
    faults=(
        (3, "kill", 0),
        (8, "pause", 1),
        (15, "api-kill", None),
        (19, "db-restart", None),
        (24, "kill", 2),
    ),
    pause=7,
)
FULL = Plan(
    jobs=2400,
    window=240,
    lease=5,
    faults=(
        (20, "kill", 0),
        (40, "pause", 1),
        (60, "kill", 2),
        (80, "api-kill", None),
        (100, "kill", 0),
        (120, "pause", 1),
        (140, "kill", 2),
        (170, "db-restart", None),
    ),
    pause=12,
)


@dataclass
class Writer:
    """A client that keeps creating jobs through the API, following the API process across its restart."""

    url: Callable[[], str]
    names: Names
    acknowledged: list[str] = field(default_factory=list)
    refused: Counter[str] = field(default_factory=Counter)
    stop: threading.Event = field(default_factory=threading.Event)

    collections: list[Names] = field(default_factory=list)

    def _new_collection(self) -> None:
        names = Names(subscription=self.names.subscription)
        for _ in range(600):  # bounded: the API may be restarting
            try:
                with httpx.Client(base_url=self.url(), timeout=10) as client:
                    created = client.put(
                        names.collection_path,
                        params=PARAMS,
                        json={"location": "westus", "properties": {"sku": {"name": "P20Premium"}}},
                    )
                if created.status_code in (200, 201):
                    self.collections.append(names)
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise AssertionError("could not create a job collection")

    def job_path(self, name: str) -> str:
        """The job ``name``'s path: in the collection that was current when it was written."""
        index = int(name[1:]) // PER_COLLECTION
        return self.collections[index].job_path(name)

    def run(self) -> None:
        body = {
            "properties": {
                "startTime": (datetime.now(UTC) + timedelta(days=1)).isoformat(),  # never due during the run
                "action": {"type": "Http", "request": {"uri": "http://127.0.0.1:9/never", "method": "GET"}},
            }
        }
        self._new_collection()
        for index in range(100_000):
            if self.stop.is_set():
                return
            if index and index % PER_COLLECTION == 0:  # under the plan's job quota
                self._new_collection()
            name = f"w{index}"
            try:
                with httpx.Client(base_url=self.url(), timeout=10) as client:
                    status = client.put(self.collections[-1].job_path(name), params=PARAMS, json=body).status_code
            except httpx.HTTPError as exc:
                self.refused[type(exc).__name__] += 1
                time.sleep(0.1)
                continue
            if status in (200, 201):
                self.acknowledged.append(name)
            else:
                self.refused[str(status)] += 1
                time.sleep(0.05)


@dataclass
class Cluster:
    emulators: EmulatorPool
    data: Path
    database_url: str
    lease: float
    api: ServerProcess | None = None
    dispatchers: list[ServerProcess] = field(default_factory=list)
    faulted_pids: dict[int, str] = field(default_factory=dict)  # pid → what was done to it

    def _start(self, *args: str) -> ServerProcess:
        return self.emulators.start(
            self.data,
            "--lease-seconds",
            f"{self.lease:g}",
            *args,
            database_url=self.database_url,
            log_level="warning",
            poll_interval=1,
            env={"SCHEDULER_SECRET_KEY": TEST_SECRET_KEY},
        )

    def start(self) -> None:
        self.api = self._start("--no-dispatcher")
        self.dispatchers = [self._start("--no-api") for _ in range(3)]

    def kill_dispatcher(self, index: int) -> None:
        victim = self.dispatchers[index]
        assert victim.process is not None
        victim.process.kill()
        victim.wait_exit(10)
        self.faulted_pids[victim.process.pid] = "killed"
        self.dispatchers[index] = self._start("--no-api")

    def kill_api(self) -> None:
        assert self.api is not None and self.api.process is not None
        self.api.process.kill()
        self.api.wait_exit(10)
        self.api = self._start("--no-dispatcher")

    def live(self) -> list[ServerProcess]:
        return [p for p in [self.api, *self.dispatchers] if p is not None]


def healthy(process: ServerProcess) -> bool:
    try:
        with httpx.Client(base_url=process.url, timeout=2) as client:
            return client.get("/_emulator/health").status_code == 200
    except httpx.HTTPError:
        return False


def occurrences(database_url: str, prefix: str) -> dict[str, list[tuple[str, str]]]:
    """(first owner, last owner) of each job's occurrence records, by job name."""
    database = Database(database_url)
    try:
        with database.session() as session:
            rows = session.execute(
                select(JobRow.name, OccurrenceRow.first_owner, OccurrenceRow.owner)
                .join(OccurrenceRow, OccurrenceRow.job_id == JobRow.id)
                .where(JobRow.name.like(f"{prefix}%"))
            ).all()
    finally:
        database.dispose()
    found: dict[str, list[tuple[str, str]]] = {}
    for name, first, last in rows:
        found.setdefault(name, []).append((first or "", last or ""))
    return found


def _taken_over(job: str, logs: dict[int, str]) -> bool:
    """Whether a dispatcher's log says it took ``job``'s occurrence over (the warning names the first 5 of a
    claim's, as ``collection/job@expected``)."""
    return any("took over" in line and f"/{job}@" in line for log in logs.values() for line in log.splitlines())


def _pid(owner: str) -> int:
    return int(owner.split(":")[1]) if owner.count(":") >= 2 else -1


def _unexplained(
    path: str,
    owners: list[tuple[str, str]],
    target: TargetServer,
    logs: dict[int, str],
    windows: list[tuple[str, datetime]],
    outage: tuple[datetime, datetime] | None,
) -> str:
    """What is known of a duplicate no fault explains: both requests as the target saw them (when, from which
    port, with which request id), the faults' times, and what its dispatchers logged about the job."""
    job = path.rsplit("/", 1)[1]
    seen = [
        f"{r.wall.isoformat()} port {r.client_port} id {r.headers.get('x-ms-client-request-id')} "
        f"tag {r.headers.get('x-ms-execution-tag')}"
        for r in target.requests(path)
    ]
    owning = {_pid(owner) for pair in owners for owner in pair}
    lines = [  # its owners' lines about it or the database, and any dispatcher's takeovers (the record keeps only
        # the first and the last owner: one in between shows only in its own log)
        f"{pid}: {line}"
        for pid, log in logs.items()
        for line in log.splitlines()
        if "took over" in line
        or (pid in owning and (f"/{job} " in line or f'/{job}"' in line or "database" in line or "failed" in line))
    ]
    return (
        f"{path} fired twice, not explained by a fault: occurrence owners {owners}; requests {seen}; faults "
        f"{[(fault, when.isoformat()) for fault, when in windows]}; outage {outage}; dispatcher log lines "
        + "\n".join(lines[-60:])
    )


def test_faults_lose_nothing_and_duplicate_only_what_was_in_flight(
    private_postgres: PrivatePostgres, emulators: EmulatorPool, tmp_path: Path, target: TargetServer
) -> None:
    plan = FULL if LONG else SHORT
    url = private_postgres.url
    cluster = Cluster(emulators, tmp_path, url, plan.lease)
    cluster.start()
    names = Names()
    for index in range(plan.jobs):  # every fire takes a moment: a kill or a freeze finds some in flight
        target.respond(f"/fire/x{index}", delay=0.3)
    first = datetime.now(UTC) + timedelta(seconds=3)
    insert_due_jobs(url, names, "x", plan.jobs, first, plan.window, target.url("/fire"))
    writer = Writer(url=lambda: cluster.api.url if cluster.api else "", names=Names())
    writing = threading.Thread(target=writer.run, daemon=True)
    writing.start()

    windows: list[tuple[str, datetime]] = []  # (fault, when)
    outage: tuple[datetime, datetime] | None = None  # the database's restart: from, to
    recoveries: list[str] = []
    origin = time.monotonic() + (first - datetime.now(UTC)).total_seconds()
    try:
        for offset, fault, index in plan.faults:
            time.sleep(max(0.0, origin + offset - time.monotonic()))
            windows.append((fault, datetime.now(UTC)))
            began = time.monotonic()
            if fault == "kill":
                assert index is not None
                cluster.kill_dispatcher(index)
                recoveries.append(f"dispatcher {index} killed and restarted in {time.monotonic() - began:.1f} s")
            elif fault == "pause":
                assert index is not None
                paused = cluster.dispatchers[index]
                assert paused.process is not None
                os.kill(paused.process.pid, signal.SIGSTOP)
                cluster.faulted_pids[paused.process.pid] = "frozen"
                time.sleep(plan.pause)
                os.kill(paused.process.pid, signal.SIGCONT)
            elif fault == "api-kill":
                before = len(writer.acknowledged)
                cluster.kill_api()
                recoveries.append(
                    f"API killed under writes ({before} acknowledged so far) and serving again after "
                    f"{time.monotonic() - began:.1f} s"
                )
            elif fault == "db-restart":
                down = datetime.now(UTC)
                private_postgres.stop()
                time.sleep(2)
                private_postgres.start()
                back = time.monotonic()
                outage = (down, datetime.now(UTC))
                wait_until(lambda: all(healthy(p) for p in cluster.live()), 60, "every process healthy again")
                recoveries.append(
                    f"PostgreSQL down {back - began:.1f} s; every process healthy {time.monotonic() - back:.2f} s "
                    "after it was back"
                )
        wait_until(
            lambda: len(fired_paths(target, "x")) >= plan.jobs,
            120,
            lambda: f"{len(fired_paths(target, 'x'))} of {plan.jobs} occurrences fired",
        )
    finally:
        writer.stop.set()
        writing.join(30)
        for process in cluster.live():  # a failure above must not leave one frozen
            if process.process is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(process.process.pid, signal.SIGCONT)
    time.sleep(1)  # a duplicate still on its way would arrive now

    # No occurrence missing; every duplicate explained.
    fired = fired_paths(target, "x")
    assert len(fired) == plan.jobs, "no occurrence missing"
    records = occurrences(url, "x")
    dispatcher_logs = {p.process.pid: p.log for p in emulators.processes if p.process is not None}
    explained = []
    for path, count in sorted(fired.items()):
        if count == 1:
            continue
        job = path.rsplit("/", 1)[1]
        owners = records.get(job, [])
        assert count == 2, f"{path} fired {count} times"
        why = [
            f"{job}: in flight in {cluster.faulted_pids[_pid(first_owner)]} dispatcher {_pid(first_owner)}, taken over"
            for first_owner, owner in owners
            if first_owner != owner and _pid(first_owner) in cluster.faulted_pids
        ]
        due = next(r.expected_time for r in target.requests(path))
        for first_owner, owner in owners:
            # At-least-once too: a dispatcher cut off from the database for longer than its lease had left loses
            # its leases (its heartbeats failed, it says so), and what it had in flight is taken over.
            # Taken over and back (A's lease lapsed, B took it, B's heartbeat not yet renewed after the outage, A
            # took it again): the record's first and last owners are then the same; the take-over's log says it.
            lapsed = dispatcher_logs.get(_pid(first_owner), "")
            if (
                (first_owner != owner or _taken_over(job, dispatcher_logs))
                and outage is not None
                and outage[0] - timedelta(seconds=2) <= due <= outage[1] + timedelta(seconds=plan.lease)
                and "dispatcher heartbeat failed" in lapsed
            ):
                why.append(
                    f"{job}: in flight in dispatcher {_pid(first_owner)} while the database was away, taken over"
                )
        assert why, _unexplained(path, owners, target, dispatcher_logs, windows, outage)
        explained.extend(why)

    # No acknowledged write lost.
    assert cluster.api is not None
    with httpx.Client(base_url=cluster.api.url, timeout=30) as client:
        stored = {name: client.get(writer.job_path(name), params=PARAMS).status_code for name in writer.acknowledged}
        lost = [name for name, status in stored.items() if status != 200]
    assert writer.acknowledged, "the writer got writes through"
    assert not lost, f"{len(lost)} acknowledged writes lost, e.g. {lost[:5]}"

    # Every process alive and healthy.
    for process in cluster.live():
        assert process.process is not None and process.process.poll() is None, process.log_tail()
        assert healthy(process), process.log_tail()

    late = {r.path: r.lateness for r in target.requests() if r.path.startswith("/fire/x")}
    quiet = [
        value
        for r in target.requests()
        if r.path.startswith("/fire/x")
        and all(abs((r.expected_time - when).total_seconds()) > plan.lease + plan.pause for _, when in windows)
        for value in [r.lateness]
    ]
    print(f"\n{plan.jobs} occurrences, {sum(fired.values())} fires; {len(explained)} duplicates, each explained:")
    for line in explained:
        print("  " + line)
    for fault, when in windows:
        near = [
            r.lateness
            for r in target.requests()
            if r.path.startswith("/fire/x") and 0 <= (r.expected_time - when).total_seconds() < plan.lease + plan.pause
        ]
        if near:
            span = plan.lease + plan.pause
            print(f"  {fault}: {len(near)} occurrences due in the next {span:g} s, worst {max(near):.2f} s late")
    for line in recoveries:
        print("  " + line)
    if len(quiet) >= 20:
        p99 = statistics.quantiles(quiet, n=100)[98]
        print(
            f"  lateness away from the faults: median {statistics.median(quiet) * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms"
        )
    print(f"  writes: {len(writer.acknowledged)} acknowledged, none lost; refused or failed: {dict(writer.refused)}")
    assert len(late) == plan.jobs
