"""Answer as Azure answered: the real service's recorded traffic (recordings/, SOURCES.md) replayed against
a started emulator on each store; every exchange matches or is explained by a stated rule
(support/conformance_replay.py)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import timedelta

import pytest
from support.api_client import API
from support.conformance_replay import Replayer, load_sessions, rules_text
from support.server import EmulatorPool, ServerProcess
from support.target_server import TargetServer
from support.times import iso_seconds as iso
from support.times import parse

CLOCK_START = "2015-06-30T00:00:00Z"  # before the oldest recording; the clock only moves forward


@pytest.fixture(scope="module")
def emulator(own_database: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """An emulator on the virtual clock whose jobs' HTTP actions may reach loopback only: nothing recorded
    (bing.com, example.org) can be called, whatever the replay makes due."""
    with EmulatorPool() as pool:
        yield pool.start(
            tmp_path_factory.mktemp("conformance"),
            "--clock",
            "virtual",
            "--clock-start",
            CLOCK_START,
            "--outbound-allow",
            "127.0.0.0/8",
            database_url=own_database,
            log_level="warning",
        )


def test_every_recorded_exchange_matches_or_is_explained(emulator: ServerProcess) -> None:
    sessions = load_sessions()
    assert len(sessions) >= 14, "the recordings are missing"
    with emulator.client() as client:
        report = Replayer(client).run(sessions)
    print(report.summary())
    problems = "\n".join(f"{outcome.exchange.label}: {outcome.detail}" for outcome in report.unexplained)
    assert not report.unexplained, f"{report.summary()}\nunexplained:\n{problems}\nrules:\n{rules_text()}"
    # every exchange counted; the rules explain differences, they do not hide whole surfaces
    assert report.count("arm", "match") >= 1 and report.count("classic", "match") >= 1, report.summary()


# --- what the recordings showed, checked on the virtual clock -----------------------------------------------


def http_action(uri: str) -> dict[str, object]:
    return {"type": "Http", "request": {"uri": uri, "method": "GET"}, "retryPolicy": {"retryType": "None"}}


def _path(subscription: str, collection: str, job: str | None = None) -> str:
    base = f"/subscriptions/{subscription}/resourceGroups/rg/providers/Microsoft.Scheduler/jobCollections/{collection}"
    return base + (f"/jobs/{job}" if job else "")


def test_one_time_past_job_shows_the_accepted_moment_then_runs_in_the_services_words(
    emulator: ServerProcess, target: TargetServer
) -> None:
    """A job without recurrence whose startTime is past shows nextExecutionTime = the moment it was accepted
    until it runs (recorded); its history message is the service's: reason phrase, headers, body."""
    subscription = str(uuid.uuid4())
    target.respond("/once", body=b"done here")
    with emulator.client(params={"api-version": API}) as client:
        assert client.put(_path(subscription, "jc"), json={"location": "westus"}).status_code == 201
        accepted = parse(client.get("/_emulator/clock").json()["now"])
        job = {"startTime": iso(accepted - timedelta(days=1)), "action": http_action(target.url("/once"))}
        created = client.put(_path(subscription, "jc", "once"), json={"properties": job})
        assert created.status_code == 201, created.text
        for answer in (created.json(), client.get(_path(subscription, "jc", "once")).json()):
            assert parse(answer["properties"]["status"]["nextExecutionTime"]) == accepted
            assert answer["properties"]["state"] == "enabled"
        assert client.post("/_emulator/clock", json={"advance": "PT1M"}).status_code == 200
        done = client.get(_path(subscription, "jc", "once")).json()["properties"]
        assert done["state"] == "completed" and "nextExecutionTime" not in done["status"], done
        [entry] = client.get(_path(subscription, "jc", "once") + "/history").json()["value"]
    message = entry["properties"]["message"]
    assert message.startswith("Http Action - Response from host '127.0.0.1': 'OK' Response Headers: "), message
    # as .NET wrote a response's headers (recorded): one "Name: value\r\n" each, content headers left out
    assert "Date: " in message and "\r\n Body: done here" in message and message.endswith("done here"), message
    assert "Content-Length" not in message and "Content-Type" not in message, message
    assert [r.expected_time for r in target.requests("/once")] == [accepted]


def test_a_suspended_collection_fires_nothing_until_enabled(emulator: ServerProcess, target: TargetServer) -> None:
    """The service answered a PUT with state Suspended 201 and echoed it (recorded): its jobs do not run; once
    enabled they do."""
    subscription = str(uuid.uuid4())
    with emulator.client(params={"api-version": API}) as client:
        suspended = client.put(
            _path(subscription, "jc"), json={"location": "westus", "properties": {"state": "Suspended"}}
        )
        assert suspended.status_code == 201 and suspended.json()["properties"]["state"] == "Suspended", suspended.text
        now = parse(client.get("/_emulator/clock").json()["now"])
        job = {
            "startTime": iso(now + timedelta(minutes=1)),
            "action": http_action(target.url("/suspended")),
            "recurrence": {"frequency": "Minute", "interval": 1},
        }
        assert client.put(_path(subscription, "jc", "tick"), json={"properties": job}).status_code == 201
        assert client.post("/_emulator/clock", json={"advance": "PT10M"}).status_code == 200
        assert target.requests("/suspended") == []
        assert "nextExecutionTime" not in client.get(_path(subscription, "jc", "tick")).json()["properties"]["status"]
        enabled = client.patch(_path(subscription, "jc"), json={"properties": {"state": "Enabled"}})
        assert enabled.status_code == 200, enabled.text
        assert client.post("/_emulator/clock", json={"advance": "PT3M"}).status_code == 200
    assert len(target.requests("/suspended")) >= 2
