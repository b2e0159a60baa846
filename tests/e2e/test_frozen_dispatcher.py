"""A dispatcher frozen (SIGSTOP: a paused VM, a debugger, a stalled host) at the worst moments holds nothing beyond
its lease: its jobs fire from another dispatcher while it is still frozen, and once woken it fires none of them
again.

The freeze is exact, not a race: the process is started with ``SCHEDULER_TEST_PAUSE_AT`` and stops itself at the
named point (scheduler_emulator/faults.py) — inside its claim's transaction, with the due jobs' rows locked
(``claim-locked``), or just after its claim committed, before any of them fired (``claimed``)."""

from __future__ import annotations

import os
import re
import signal
import time
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from support.databases import TEST_SECRET_KEY, PostgresDatabase, require_postgres
from support.names import Names
from support.server import EmulatorPool, ServerProcess
from support.store_rows import insert_due_jobs
from support.target_server import TargetServer, fired_paths
from support.waiting import wait_until

from scheduler_emulator.store.database import Database

# The lease: the woken dispatcher's claim fails after a third of it (PostgreSQL's idle-in-transaction bound), and
# the other takes the frozen one's committed leases over after all of it. 6 s rather than 3: the other dispatcher,
# starting and firing on a loaded machine, must not itself miss its heartbeats for a lease, or the woken one would
# rightly take over what it had sent but not yet recorded (at-least-once), and send it again.
LEASE = "6"
JOBS = 4


@pytest.fixture
def postgres() -> Iterator[PostgresDatabase]:
    require_postgres()
    database = PostgresDatabase().create()
    Database(database.url).migrate()
    yield database
    database.drop()


def frozen(pid: int) -> bool:
    """Whether the process is stopped (SIGSTOP), as the kernel says."""
    return "State:\tT" in Path(f"/proc/{pid}/status").read_text()


def paused_pid(process: ServerProcess, point: str) -> int:
    """The pid of the process that stopped itself at ``point``: the dispatcher's, which on PostgreSQL is a
    child process of the emulator's (dispatcher/child.py)."""
    match = re.search(rf"test pause at {re.escape(point)} \(pid (\d+)\)", process.log)
    assert match is not None, process.log_tail()
    return int(match.group(1))


def cycles(process: ServerProcess) -> int:
    """How many claim cycles the process's dispatcher has run (its metrics)."""
    with process.client() as client:
        for line in client.get("/metrics").text.splitlines():
            if line.startswith("scheduler_dispatcher_cycles_total "):
                return int(float(line.split()[1]))
    raise AssertionError("no scheduler_dispatcher_cycles_total in /metrics")


@pytest.mark.parametrize(
    ("point", "woken_says"),
    [
        # Frozen holding the rows' locks: PostgreSQL ends the idle transaction after --db-idle-in-transaction-timeout
        # (a third of the lease), the locks go, another dispatcher claims the jobs; the woken one's claim fails.
        # (psycopg reports the idle-in-transaction timeout, or the connection closed under it, by timing.)
        ("claim-locked", "dispatcher cycle failed (("),
        # Frozen holding committed leases: its heartbeat runs out after a lease, another dispatcher takes the
        # occurrences over and fires them; the woken one confirms its leases before firing, and skips them.
        ("claimed", "were taken over by another dispatcher meanwhile and are not fired here"),
    ],
)
def test_a_frozen_dispatchers_jobs_fire_elsewhere_and_never_twice(
    point: str, woken_says: str, postgres: PostgresDatabase, emulators: EmulatorPool, tmp_path: Path, target
) -> None:
    target: TargetServer
    common = {"database_url": postgres.url, "log_level": "warning", "poll_interval": 1}
    key = {"SCHEDULER_SECRET_KEY": TEST_SECRET_KEY}
    frozen_one = emulators.start(
        tmp_path / "a", "--lease-seconds", LEASE, env={**key, "SCHEDULER_TEST_PAUSE_AT": point}, **common
    )
    names = Names()
    first = datetime.now(UTC) + timedelta(seconds=3)
    insert_due_jobs(postgres.url, names, "f", JOBS, first, 0.2, target.url("/fire"))  # one claim takes them all
    wait_until(lambda: f"test pause at {point}" in frozen_one.log, 30, f"the dispatcher to pause at {point}")
    pid = paused_pid(frozen_one, point)
    wait_until(lambda: frozen(pid), 10, "the process to be stopped")

    other = emulators.start(tmp_path / "b", "--no-api", "--lease-seconds", LEASE, env=key, **common)
    try:
        # While the first is still frozen, every job fires, from the other dispatcher.
        wait_until(lambda: len(fired_paths(target, "f")) == JOBS, 60, lambda: f"fires: {fired_paths(target, 'f')}")
        assert frozen(pid), "fired while the claimer was frozen: by the other dispatcher"
        late = max(r.lateness for r in target.requests() if r.path.startswith("/fire/f"))
        print(f"\nfrozen at {point}: every job fired from the other dispatcher, at most {late:.2f} s late")
    finally:
        os.kill(pid, signal.SIGCONT)

    # Woken: it says what it found, then looks for work again; nothing it had claimed fires a second time.
    wait_until(
        lambda: woken_says in frozen_one.log or max(fired_paths(target, "f").values()) > 1,
        30,
        lambda: f"the woken dispatcher to notice; its log:\n{frozen_one.log_tail()}",
    )
    seen = cycles(frozen_one)
    wait_until(lambda: cycles(frozen_one) >= seen + 2, 30, "two more claim cycles of the woken dispatcher")
    time.sleep(0.5)  # a fire it had started would have reached the target by now
    assert fired_paths(target, "f") == Counter({f"/fire/f{i}": 1 for i in range(JOBS)}), (
        f"each job fired once\nthe woken one's log:\n{frozen_one.log_tail()}\nthe other's log:\n{other.log_tail()}"
    )
    for process in (frozen_one, other):  # both alive and serving
        assert process.process is not None and process.process.poll() is None
        with httpx.Client(base_url=process.url, timeout=10) as client:
            assert client.get("/_emulator/health").status_code == 200
