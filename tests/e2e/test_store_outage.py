"""After the database was away for longer than a lease, the first dispatcher back does not take over what another
still holds: every heartbeat ran out during the outage, and taking the other's occurrence in flight would send it
a second time. Two dispatchers share a PostgreSQL server of the test's own (restarting the shared one would
break other tests); a job's request is in flight from one of them (the target answers late) when the server
stops for more than a lease; that one comes back later than the other (frozen until a while after the server is
up again). Seen from outside: the target gets the request once, the history records it once, Completed, by the
dispatcher that sent it; the other says that it takes nothing over for a lease. (tests/e2e/test_faults.py found
the duplicate: an occurrence taken over right after a restart and taken back, sent twice.)"""

from __future__ import annotations

import os
import signal
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
from sqlalchemy import select
from support.databases import TEST_SECRET_KEY
from support.names import Names
from support.private_postgres import PrivatePostgres
from support.processes import children_of, socket_owner
from support.server import EmulatorPool, ServerProcess
from support.store_rows import insert_due_jobs
from support.target_server import TargetServer, fired_paths
from support.waiting import wait_until

from scheduler_emulator.store.database import Database
from scheduler_emulator.store.models import JobHistoryRow

LEASE = 5.0  # seconds; the server stays down longer than this, so every heartbeat runs out
BACK_LATER = 2.5  # seconds after the server is up again that the sender is woken (the other is back by then)


def test_the_first_dispatcher_back_from_an_outage_does_not_take_over_what_another_still_holds(
    private_postgres: PrivatePostgres, emulators: EmulatorPool, target: TargetServer, tmp_path: Path
) -> None:
    common = {"database_url": private_postgres.url, "log_level": "info", "poll_interval": 1}
    flags = ("--no-api", "--lease-seconds", f"{LEASE:g}")
    env = {"SCHEDULER_SECRET_KEY": TEST_SECRET_KEY}
    dispatchers = [emulators.start(tmp_path / name, *flags, env=env, **common) for name in ("a", "b")]
    names = Names()
    target.respond("/fire/h0", delay=3.0)  # recorded on arrival, answered later: in flight through the outage
    due = datetime.now(UTC) + timedelta(seconds=2)
    insert_due_jobs(private_postgres.url, names, "h", 1, due, 0, target.url("/fire"))
    (request,) = target.wait_for(1, 30, "/fire/h0")
    sender, other = _who_sent(dispatchers, request.client_port)
    assert sender.process is not None
    os.kill(sender.process.pid, signal.SIGSTOP)
    try:
        private_postgres.stop()
        time.sleep(LEASE + 1.5)  # every heartbeat in the database has run out
        private_postgres.start()
        time.sleep(BACK_LATER)  # the other dispatcher is back first, and looks for work every second
    finally:
        os.kill(sender.process.pid, signal.SIGCONT)

    wait_until(lambda: _history(private_postgres.url), 60, lambda: f"the attempt recorded\n{sender.log_tail()}")
    time.sleep(LEASE + 2)  # past the other's pause on take-overs: what it would take, it would have sent by now
    assert fired_paths(target, "h") == {"/fire/h0": 1}, (
        f"sent once\nthe sender's log:\n{sender.log_tail()}\nthe other's log:\n{other.log_tail()}"
    )
    (entry,) = _history(private_postgres.url)
    assert entry.status == "Completed", entry.message
    assert "takes over no other's occurrences" in other.log, other.log_tail()
    for process in dispatchers:
        assert process.process is not None and process.process.poll() is None, process.log_tail()
        with httpx.Client(base_url=process.url, timeout=10) as client:
            assert client.get("/_emulator/health").status_code == 200


def _who_sent(dispatchers: list[ServerProcess], port: int) -> tuple[ServerProcess, ServerProcess]:
    """(the dispatcher whose process, or action process, holds the connection from ``port``; the other)."""
    for index, process in enumerate(dispatchers):
        assert process.process is not None
        pid = process.process.pid
        if socket_owner(port, [pid, *children_of(pid)]) is not None:
            return process, dispatchers[1 - index]
    raise AssertionError(f"no dispatcher holds the connection from port {port}")


def _history(url: str) -> list[JobHistoryRow]:
    """The job's history entries of the main action (what the API's history shows)."""
    database = Database(url)
    try:
        with database.read_session() as session:
            return list(session.scalars(select(JobHistoryRow).where(JobHistoryRow.action_name == "MainAction")))
    finally:
        database.dispose()
