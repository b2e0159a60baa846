"""The kit's recording target (``scheduler_emulator.testing.HttpTarget``) on its own, as a user's test would
drive it: programmed answers per path, waiting for requests, and what it records."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime

import httpx
import pytest

from scheduler_emulator.testing import HttpTarget


def test_statuses_answer_in_turn_and_the_last_repeats() -> None:
    with HttpTarget(statuses=[500, 503, 200]) as target, httpx.Client(base_url=target.url) as client:
        assert [client.get(f"/x{i}").status_code for i in range(5)] == [500, 503, 200, 200, 200]
        assert [r.path for r in target.requests] == [f"/x{i}" for i in range(5)]


def test_a_programmed_path_answers_as_told_and_others_keep_the_default() -> None:
    with HttpTarget() as target, httpx.Client(base_url=target.url) as client:
        target.respond("/moved", 302, "gone", headers={"Location": target.url + "/new"})
        target.respond("/flaky", 201, b"made", fail_first=2, fail_status=502, fail_body="not yet")
        moved = client.get("/moved?x=1")
        assert (moved.status_code, moved.text, moved.headers["location"]) == (302, "gone", target.url + "/new")
        flaky = [client.post("/flaky", content=b"hello") for _ in range(3)]
        assert [(r.status_code, r.text) for r in flaky] == [(502, "not yet"), (502, "not yet"), (201, "made")]
        other = client.put("/other")
        assert (other.status_code, other.text) == (200, "ok")
        assert client.head("/flaky").content == b""  # HEAD: the status without a body
        assert [r.path for r in target.requests_to("/moved")] == ["/moved?x=1"]
        assert target.requests_to("/moved")[0].route == "/moved"
        assert [r.text for r in target.requests_to("/flaky")] == ["hello"] * 3 + [""]


def test_a_delayed_answer_is_sent_after_the_delay() -> None:
    with HttpTarget() as target, httpx.Client(base_url=target.url) as client:
        target.respond("/slow", delay=0.3)
        began = time.monotonic()
        assert client.get("/slow").status_code == 200
        assert time.monotonic() - began >= 0.3


def test_wait_for_returns_once_enough_requests_arrived_and_fails_after_its_timeout() -> None:
    with HttpTarget() as target, httpx.Client(base_url=target.url) as client:
        before = datetime.now(UTC)
        sender = threading.Timer(0.2, lambda: [client.get("/later") for _ in range(2)])
        sender.start()
        arrived = target.wait_for(2, timeout=10, path="/later")
        sender.join()
        assert [r.method for r in arrived] == ["GET", "GET"]
        assert all(r.arrived is not None and r.arrived >= before for r in arrived)
        assert arrived[0].monotonic <= arrived[1].monotonic
        with pytest.raises(AssertionError, match="expected 3 request"):
            target.wait_for(3, timeout=0.2, path="/later")
