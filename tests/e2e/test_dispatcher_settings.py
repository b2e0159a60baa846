"""The dispatcher's operator settings, each observed on a started server firing at a real target:
--no-dispatcher, --action-timeout, --history-max-entries, --history-max-age-days, --finished-job-retention-days
(with --housekeeping-interval), --poll-interval, --lease-seconds (takeover after a crash) and --claim-ahead
(occurrences claimed before they are due still honour API changes, and a stop hands them back)."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select
from support.api_client import API, create_job, job_history
from support.names import Names
from support.processes import crash, process_ended
from support.server import EmulatorPool, ServerProcess
from support.target_server import TargetServer
from support.times import parse
from support.waiting import wait_until

from scheduler_emulator.store.database import Database
from scheduler_emulator.store.models import DispatcherRow, JobRow, OccurrenceRow

PARAMS = {"api-version": API}


@pytest.fixture
def start(emulators: EmulatorPool, tmp_path: Path) -> Callable[..., ServerProcess]:
    def start_server(*args: str, database: Path | None = None) -> ServerProcess:
        db = database or tmp_path / "scheduler.db"
        return emulators.start(tmp_path, "--min-retry-interval", "1", *args, database_url=f"sqlite:///{db}")

    return start_server


def test_no_dispatcher_serves_the_api_but_fires_nothing(start, target: TargetServer) -> None:
    server = start("--no-dispatcher")
    names = Names()
    with server.client() as client:
        assert client.get("/_emulator/health").json()["dispatcher"] == "off"
        create_job(client, names, "now", {"type": "Http", "request": {"uri": target.url("/now"), "method": "POST"}})
        time.sleep(3)
        job = client.get(names.job_path("now"), params=PARAMS).json()
    assert target.requests() == []
    assert job["properties"]["state"] == "enabled"
    assert job["properties"]["status"]["executionCount"] == 0


def test_action_timeout_fails_a_slow_attempt(start, target: TargetServer) -> None:
    server = start("--action-timeout", "1")
    target.respond("/slow", delay=10)  # an attempt that waited for the answer would take 10 s
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
        wait_until(lambda: len(job_history(client, names, "slow")) == 1, 10, "the timed-out attempt")
        entry = job_history(client, names, "slow")[0]
    assert entry["status"] == "Failed"
    assert "timed out" in entry["message"]
    started = parse(entry["startTime"])
    ended = parse(entry["endTime"])
    # Cut at the 1 s timeout, never sooner, and long before the answer; the emulator's own start and end
    # times, with 3 s of slack for a loaded machine (two CPU hogs on two cores) that is still far below 10 s.
    assert timedelta(seconds=0.9) <= ended - started < timedelta(seconds=4)


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
            lambda: client.get(names.job_path("noisy"), params=PARAMS).json()["properties"]["state"] == "faulted",
            20,
            "the job to fault",
        )
        entries = job_history(client, names, "noisy")
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
        wait_until(lambda: len(job_history(client, names, "recurring")) == 1, 10, "the manual run's history")
        assert client.get(names.job_path("done"), params=PARAMS).json()["properties"]["state"] == "completed"
        wait_until(
            lambda: client.get(names.job_path("done"), params=PARAMS).status_code == 404,
            15,
            "the completed job to be removed",
        )
        wait_until(lambda: job_history(client, names, "recurring") == [], 15, "the old history entry to be removed")
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


def _stored_rows(database_path: Path, *columns: Any) -> list[Any]:
    """Rows of ``columns`` (of one table) as the store holds them."""
    database = Database(f"sqlite:///{database_path}")
    try:
        with database.session() as session:
            return list(session.execute(select(*columns)).all())
    finally:
        database.dispose()


def test_a_crashed_dispatchers_occurrence_is_taken_over_after_its_lease(start, target: TargetServer, tmp_path) -> None:
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
    family = crash(first.process.pid)  # every process of the emulator, while the attempt is in flight
    first.wait_exit(10)
    wait_until(lambda: all(process_ended(pid) for pid in family), 10, "the killed server's processes to end")
    # Its heartbeat as the store holds it: when its lease runs out, by the store's clock (it beats no more).
    [(crashed, lease_ran_out)] = _stored_rows(tmp_path / "scheduler.db", DispatcherRow.owner, DispatcherRow.expires_at)
    second = start("--lease-seconds", "2")
    arrivals = target.wait_for(2, 20, "/slow")
    with second.client() as client:
        wait_until(lambda: len(job_history(client, names, "inflight")) == 1, 15, "the resumed attempt's history")
        entries = job_history(client, names, "inflight")
        job = client.get(names.job_path("inflight"), params=PARAMS).json()
    # At-least-once: the occurrence in flight at the crash runs again (the same occurrence, first claimed by the
    # crashed dispatcher, with the same expected time), and only once that dispatcher's lease had run out.
    assert arrivals[0].expected_time == arrivals[1].expected_time
    [(first_owner, owner)] = _stored_rows(tmp_path / "scheduler.db", OccurrenceRow.first_owner, OccurrenceRow.owner)
    assert first_owner == crashed and owner != crashed
    assert arrivals[1].wall > lease_ran_out
    assert [e["status"] for e in entries] == ["Completed"]
    assert job["properties"]["state"] == "completed"
    takeover = "took over 1 occurrence(s) left unfinished by a dispatcher whose heartbeat ran out; any it had"
    assert any(takeover in line and f"{names.collection}/inflight@" in line for line in second.output), (
        "the second dispatcher says it took the occurrence over (why the target saw it twice)"
    )
    time.sleep(1)
    assert len(target.requests("/slow")) == 2


def _due_in(seconds: float) -> tuple[datetime, str]:
    moment = (datetime.now(UTC) + timedelta(seconds=seconds)).replace(microsecond=0) + timedelta(seconds=1)
    return moment, moment.isoformat()


def _claimed(client: httpx.Client, names: Names, job: str) -> bool:
    """A one-time job claimed ahead shows no next execution time any more (its only occurrence is taken)."""
    status = client.get(names.job_path(job), params=PARAMS).json()["properties"].get("status", {})
    return "nextExecutionTime" not in status


def test_changes_made_after_an_occurrence_was_claimed_ahead_still_apply(start, target: TargetServer) -> None:
    # --claim-ahead 10 (the most allowed): jobs due in ~9 s are claimed at once; each change below lands after
    # the claim and before the due time (checked once they are made: the 8 s between leave a loaded machine
    # plenty of room), and must be honoured as if the occurrence had not been claimed yet.
    server = start("--claim-ahead", "10")
    names = Names()
    due, start_time = _due_in(8)
    with server.client() as client:
        for job in ("kept", "disabled", "replaced", "deleted"):
            create_job(
                client,
                names,
                job,
                {"type": "Http", "request": {"uri": target.url(f"/{job}"), "method": "GET"}},
                startTime=start_time,
            )
        wait_until(lambda: all(_claimed(client, names, j) for j in ("kept", "disabled", "replaced")), 5, "claims")
        patched = client.patch(names.job_path("disabled"), params=PARAMS, json={"properties": {"state": "Disabled"}})
        assert patched.status_code == 200, patched.text
        replaced = client.put(
            names.job_path("replaced"),
            params=PARAMS,
            json={
                "properties": {
                    "action": {"type": "Http", "request": {"uri": target.url("/replacement"), "method": "GET"}},
                    "startTime": start_time,
                }
            },
        )
        assert replaced.status_code == 200, replaced.text
        assert client.delete(names.job_path("deleted"), params=PARAMS).status_code == 200
        changed = datetime.now(UTC)
        assert changed < due, "the changes must land before the due time for this test to mean anything"
        wait_until(lambda: len(job_history(client, names, "replaced")) == 1, 20, "the replaced job's fire")
        wait_until(lambda: len(job_history(client, names, "kept")) == 1, 20, "the kept job's fire")
        [kept_entry] = job_history(client, names, "kept")
        time.sleep(1)
        disabled = client.get(names.job_path("disabled"), params=PARAMS).json()["properties"]
        disabled_history = job_history(client, names, "disabled")
    assert [r.path for r in target.requests("/kept")] == ["/kept"]
    kept = target.requests("/kept")[0]
    # Claimed ahead, fired at its instant, not before: the target saw it no sooner than due, and the emulator
    # started the attempt within 3 s of it by its own records (the next poll, 5 s by default, is the
    # alternative; 3 s leaves room for two CPU hogs on two cores).
    assert kept.expected_time == due and kept.wall >= due
    assert due <= parse(kept_entry["startTime"]) < due + timedelta(seconds=3), kept_entry
    assert target.requests("/disabled") == [] and disabled_history == []
    assert disabled["state"] == "disabled" and disabled["status"]["executionCount"] == 0
    assert target.requests("/replaced") == [] and len(target.requests("/replacement")) == 1
    assert target.requests("/deleted") == []


def test_a_stop_hands_back_occurrences_claimed_ahead(start, target: TargetServer, tmp_path: Path) -> None:
    database = tmp_path / "handback.db"
    # Due in ~9 s, claimed at once (--claim-ahead 10): the stop must come before the due time, and 8 s leave
    # a loaded machine plenty of room for the claim and the stop.
    server = start("--claim-ahead", "10", database=database)
    names = Names()
    due, start_time = _due_in(8)
    with server.client() as client:
        create_job(
            client,
            names,
            "pending",
            {"type": "Http", "request": {"uri": target.url("/pending"), "method": "GET"}},
            startTime=start_time,
            recurrence={"frequency": "Minute", "interval": 10},
        )
        wait_until(
            lambda: (
                client.get(names.job_path("pending"), params=PARAMS).json()["properties"]["status"]["nextExecutionTime"]
                != start_time.replace("+00:00", "Z")
            ),
            5,
            "the claim",
        )
    server.stop()
    assert target.requests() == []
    # Read back by a process that claims nothing: a restart can take longer than the seconds left before the job is
    # due (seconds of imports on a busy machine), and a dispatcher started by then would already claim it again.
    reader = start("--no-dispatcher", database=database)
    with reader.client() as client:
        status = client.get(names.job_path("pending"), params=PARAMS).json()["properties"]["status"]
        assert status["nextExecutionTime"] == start_time.replace("+00:00", "Z")  # handed back as never claimed
    reader.stop()
    with start("--claim-ahead", "0", database=database).client() as client:  # claims nothing ahead now
        wait_until(lambda: len(job_history(client, names, "pending")) == 1, 15, "the fire after the restart")
        time.sleep(1)
        history = job_history(client, names, "pending")
    arrivals = target.requests("/pending")
    assert len(arrivals) == 1 and arrivals[0].wall >= due
    assert [(e["status"], e["expectedExecutionTime"]) for e in history] == [
        ("Completed", start_time.replace("+00:00", "Z"))
    ]
