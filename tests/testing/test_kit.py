"""The virtual clock and the test kit (docs/reference/test-support.md#the-test-kit), used as a user would: only through
``scheduler_emulator.testing`` (Emulator, HttpTarget, the pytest plugin's fixtures) and the emulator's API. The same
scenarios run against one emulator on SQLite and against two processes sharing PostgreSQL, where time is advanced on one
and the other must not fire anything twice."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.databases import TEST_SECRET_KEY, fresh_database
from support.processes import children_of, process_ended

from scheduler_emulator.testing import Emulator, EmulatorError, HttpTarget

REPO = Path(__file__).resolve().parents[2]
START = datetime(2031, 3, 1, 8, 0, tzinfo=UTC)  # each emulator's virtual clock starts here
VIRTUAL_NOT_REAL = 30.0  # seconds: the retry scenario alone would take 120 s on the real clock


@dataclass
class Cluster:
    """The emulator the test advances (``driver``) and every process sharing its store."""

    driver: Emulator
    others: list[Emulator]
    kind: str

    def rest(self, emulator: Emulator | None = None) -> httpx.Client:
        return httpx.Client(base_url=(emulator or self.driver).url, params={"api-version": "2016-03-01"}, timeout=60)


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with fresh_database(request.param, tmp_path_factory) as url:
        args, key = ["--database-url", url], {"SCHEDULER_SECRET_KEY": TEST_SECRET_KEY}  # one key for every process
        driver = Emulator(clock="virtual", clock_start=START, args=args, env=key).start()
        others = [Emulator(clock="virtual", args=args, env=key).start()] if request.param == "postgresql" else []
        try:
            yield Cluster(driver, others, request.param)
        finally:
            for emulator in [driver, *others]:
                emulator.stop()


@pytest.fixture
def emulator(cluster: Cluster) -> Emulator:
    cluster.driver.reset()
    return cluster.driver


@pytest.fixture
def target() -> Iterator[HttpTarget]:
    with HttpTarget() as server:
        yield server


def collection(emulator: Emulator, name: str | None = None, sku: str = "Standard") -> tuple[Any, str]:
    client = emulator.sdk_client()
    name = name or f"jc-{uuid.uuid4().hex[:8]}"
    client.job_collections.create_or_update("rg", name, {"location": "westus", "properties": {"sku": {"name": sku}}})
    return client, name


def http_job(uri: str, start: datetime, recurrence: dict[str, Any] | None = None, **action: Any) -> dict[str, Any]:
    properties: dict[str, Any] = {
        "startTime": start.isoformat(),
        "action": {"type": "Http", "request": {"method": "POST", "uri": uri, "body": "hi"}, **action},
    }
    if recurrence:
        properties["recurrence"] = recurrence
    return {"properties": properties}


def test_a_daily_job_advanced_three_days_fires_three_times_at_its_times(
    emulator: Emulator, target: HttpTarget, cluster: Cluster
) -> None:
    client, name = collection(emulator)
    start = (emulator.now() + timedelta(hours=1)).replace(microsecond=0)
    client.jobs.create_or_update(
        "rg", name, "daily", http_job(target.url + "/daily", start, {"frequency": "Day", "interval": 1})
    )
    began = time.monotonic()
    result = emulator.advance(days=3)
    took = time.monotonic() - began
    print(f"\n[{cluster.kind}] advance of 3 days with 3 fires: {took * 1000:.0f} ms")

    assert [r.expected_time for r in target.requests] == [start + timedelta(days=n) for n in range(3)]
    assert [r.path for r in target.requests] == ["/daily"] * 3
    assert (result["occurrences"], result["attempts"], result["failed"]) == (3, 3, 0)
    assert emulator.now() - START >= timedelta(days=3)
    status = client.jobs.get("rg", name, "daily").properties.status
    assert status.execution_count == 3
    assert status.last_execution_time == start + timedelta(days=2)
    assert status.next_execution_time == start + timedelta(days=3)
    assert took < VIRTUAL_NOT_REAL
    history = emulator.history("rg", name, "daily")
    assert [h["properties"]["expectedExecutionTime"] for h in history] == [
        (start + timedelta(days=n)).strftime("%Y-%m-%dT%H:%M:%SZ") for n in (2, 1, 0)
    ]


def test_a_failing_target_plays_the_default_retry_policy_out_in_virtual_time(emulator: Emulator) -> None:
    with HttpTarget(statuses=[500]) as failing:
        client, name = collection(emulator)
        start = (emulator.now() + timedelta(minutes=5)).replace(microsecond=0)
        client.jobs.create_or_update("rg", name, "flaky", http_job(failing.url + "/down", start))
        began = time.monotonic()
        result = emulator.advance("PT10M")
        took = time.monotonic() - began

        assert (result["occurrences"], result["attempts"], result["failed"]) == (1, 5, 5)
        history = list(reversed(emulator.history("rg", name, "flaky")))
        assert [h["properties"]["status"] for h in history] == ["Failed"] * 5
        assert [h["properties"]["retryCount"] for h in history] == [0, 1, 2, 3, 4]
        starts = [datetime.fromisoformat(h["properties"]["startTime"].replace("Z", "+00:00")) for h in history]
        assert starts == [start + timedelta(seconds=30 * n) for n in range(5)]
        assert len(failing.requests) == 5
        assert took < VIRTUAL_NOT_REAL


def test_a_monthly_schedule_advanced_a_year_fires_what_the_preview_lists(
    emulator: Emulator, target: HttpTarget
) -> None:
    client, name = collection(emulator)
    start = (emulator.now() + timedelta(days=1)).replace(hour=9, minute=0, second=0, microsecond=0)
    recurrence = {
        "frequency": "Month",
        "interval": 1,
        "schedule": {"monthlyOccurrences": [{"day": "Friday", "occurrence": -1}], "hours": [9], "minutes": [0]},
    }
    preview = httpx.post(
        emulator.url + "/_emulator/recurrence/preview",
        json={"startTime": start.isoformat(), "recurrence": recurrence, "now": emulator.now().isoformat(), "count": 20},
        timeout=30,
    ).json()["occurrences"]
    client.jobs.create_or_update("rg", name, "monthly", http_job(target.url + "/monthly", start, recurrence))
    year_later = emulator.now() + timedelta(days=365)

    emulator.set_time(year_later)

    listed = [o for o in preview if datetime.fromisoformat(o.replace("Z", "+00:00")) <= year_later]
    fired = [r.header("x-ms-scheduler-expected-execution-time") for r in target.requests]
    assert len(listed) in (12, 13)
    assert fired == listed


def test_reset_empties_everything(emulator: Emulator, target: HttpTarget, cluster: Cluster) -> None:
    client, name = collection(emulator)
    client.jobs.create_or_update("rg", name, "soon", http_job(target.url + "/x", emulator.now().replace(microsecond=0)))
    emulator.advance("PT1M")
    assert emulator.history("rg", name, "soon")
    before = emulator.now()

    emulator.reset()

    with cluster.rest() as rest:
        listed = rest.get(f"/subscriptions/{emulator.subscription_id}/providers/Microsoft.Scheduler/jobCollections")
        assert listed.json()["value"] == []
        assert (
            rest.get(
                f"/subscriptions/{emulator.subscription_id}/resourceGroups/rg/providers/Microsoft.Scheduler/jobCollections/{name}/jobs/soon"
            ).status_code
            == 404
        )
    assert emulator.now() == before  # the clock keeps its time
    emulator.advance("P1D")
    assert len(target.requests) == 1  # nothing left to fire


def test_bad_clock_requests_are_refused_and_change_nothing(emulator: Emulator) -> None:
    before = emulator.now()
    cases: list[dict[str, Any]] = [
        {"advance": "-PT1H"},
        {"advance": "PT-1H"},
        {"advance": "soon"},
        {"advance": 3600},
        {"advance": "P99999999999Y"},
        {"advance": "P9000Y"},
        {"to": (before - timedelta(seconds=1)).isoformat()},
        {"to": "yesterday"},
        {},
        {"advance": "PT1H", "to": "2040-01-01T00:00:00Z"},
        {"advance": "PT1H", "extra": 1},
    ]
    for body in cases:
        with pytest.raises(EmulatorError) as refused:
            emulator.call("POST", "/_emulator/clock", body)
        assert (refused.value.status, refused.value.code) == (400, "BadRequest"), body
    assert emulator.now() == before


def test_a_window_of_more_than_100000_occurrences_is_refused(emulator: Emulator, target: HttpTarget) -> None:
    client, name = collection(emulator, sku="P20Premium")
    start = emulator.now().replace(microsecond=0) + timedelta(minutes=1)
    for index in range(2):
        client.jobs.create_or_update(
            "rg", name, f"every-minute-{index}", http_job(target.url, start, {"frequency": "Minute", "interval": 1})
        )
    before = emulator.now()
    with pytest.raises(EmulatorError) as refused:
        emulator.advance(days=40)  # 2 × 57,600 minutes
    assert (refused.value.status, refused.value.code) == (400, "BadRequest")
    assert "smaller steps" in str(refused.value)
    assert emulator.now() == before
    assert target.requests == []


@pytest.mark.parametrize("cluster", ["postgresql"], indirect=True)  # two processes share PostgreSQL
def test_processes_sharing_the_store_agree_on_the_time_and_never_fire_twice(
    cluster: Cluster, target: HttpTarget
) -> None:
    emulator = cluster.driver
    emulator.reset()
    client, name = collection(emulator)
    start = (emulator.now() + timedelta(minutes=1)).replace(microsecond=0)
    client.jobs.create_or_update(
        "rg", name, "every-hour", http_job(target.url + "/h", start, {"frequency": "Hour", "interval": 1})
    )
    emulator.advance(hours=5)
    other = cluster.others[0]
    assert other.now() == emulator.now()
    other.advance(hours=5)  # the other process drives now
    assert emulator.now() == other.now()
    expected = [start + timedelta(hours=n) for n in range(10)]
    assert [r.expected_time for r in target.requests] == expected


def test_real_mode_refuses_to_move_time(tmp_path: Path) -> None:
    with Emulator(clock="real") as real:
        assert real.call("GET", "/_emulator/clock")["mode"] == "real"
        for body in ({"advance": "PT1H"}, {"to": "2040-01-01T00:00:00Z"}):
            with pytest.raises(EmulatorError) as refused:
                real.call("POST", "/_emulator/clock", body)
            assert (refused.value.status, refused.value.code) == (409, "Conflict")


def test_a_restart_keeps_the_virtual_time(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'kept.db'}"
    key = {"SCHEDULER_SECRET_KEY": TEST_SECRET_KEY}
    with Emulator(clock="virtual", clock_start=START, args=["--database-url", url], env=key) as first:
        first.advance(days=10)
        moved = first.now()
    with Emulator(clock="virtual", clock_start=START, args=["--database-url", url], env=key) as second:
        assert second.now() == moved == START + timedelta(days=10)


def test_attach_mode_uses_a_separately_started_process(cluster: Cluster, target: HttpTarget) -> None:
    attached = Emulator.attach(cluster.driver.url)
    attached.reset()
    client, name = collection(attached)
    client.jobs.create_or_update(
        "rg", name, "once", http_job(target.url + "/once", attached.now().replace(microsecond=0))
    )
    attached.advance("PT0S")
    assert len(target.requests) == 1
    assert attached.history("rg", name, "once")[0]["properties"]["status"] == "Completed"
    with attached:  # leaving it stops nothing: the process is not the kit's, and it stays attached
        pass
    assert attached.url == cluster.driver.url and attached.now() == cluster.driver.now()


# --- the pytest plugin, in a pytest run of its own ----------------------------------------------------


# The test dependencies' own pytest plugins, which a user of the kit need not have: loading them cost each run
# here ~2 s of CPU (schemathesis, hypothesis), four times the rest of its start. The kit's plugin still loads as
# a user's run loads it, by its entry point.
UNRELATED_PLUGINS = ("xdist", "schemathesis", "hypothesispytest", "anyio")


def run_pytest(directory: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    disabled = [arg for name in UNRELATED_PLUGINS for arg in ("-p", f"no:{name}")]
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *disabled, str(directory), *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=directory,
        env=env,
    )


@pytest.mark.parametrize("cluster", ["sqlite"], indirect=True)
def test_the_plugin_attaches_with_an_url_and_resets_between_tests(cluster: Cluster, tmp_path: Path) -> None:
    (tmp_path / "test_attached.py").write_text(
        "def test_one(scheduler_emulator):\n"
        f"    assert scheduler_emulator.url == {cluster.driver.url!r}\n"
        "    c = scheduler_emulator.sdk_client()\n"
        "    c.job_collections.create_or_update('rg', 'left-over', {'location': 'westus'})\n"
        "\n"
        "def test_two(scheduler_emulator):\n"
        "    c = scheduler_emulator.sdk_client()\n"
        "    assert list(c.job_collections.list_by_resource_group('rg')) == []\n"
    )
    done = run_pytest(tmp_path, "--scheduler-emulator-url", cluster.driver.url)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "2 passed" in done.stdout


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_an_emulator_over_https_on_a_given_database(kind: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    from sqlalchemy import select

    from scheduler_emulator.store.database import Database
    from scheduler_emulator.store.models import JobCollectionRow

    with (
        fresh_database(kind, tmp_path_factory) as url,
        Emulator(database_url=url, https=True, env={"SCHEDULER_SECRET_KEY": TEST_SECRET_KEY}) as emulator,
    ):
        assert emulator.url.startswith("https://127.0.0.1:") and emulator.cert_path
        collection = "/subscriptions/s1/resourceGroups/rg/providers/Microsoft.Scheduler/jobCollections/jc"
        emulator.call("PUT", collection + "?api-version=2016-03-01", {"location": "westus"})
        client = emulator.sdk_client("s1")
        assert [c.name for c in client.job_collections.list_by_resource_group("rg")] == ["jc"]
        with pytest.raises(EmulatorError) as refused:  # an error answer arrives over the same trusted TLS
            emulator.history("rg", "jc", "none")
        assert refused.value.status == 404
        database = Database(url)
        try:
            with database.session() as session:
                assert session.scalars(select(JobCollectionRow.name)).all() == ["jc"]  # the store it was given
        finally:
            database.dispose()


def _descendants(pid: int) -> set[int]:
    found, todo = set(), [pid]
    for _ in range(100_000):  # bounded: one round per process of the tree
        if not todo:
            break
        for child in children_of(todo.pop()):
            found.add(child)
            todo.append(child)
    return found


def test_the_kit_runs_the_emulator_as_users_run_it_and_its_stop_leaves_no_process(tmp_path: Path) -> None:
    """A start is ``python -m scheduler_emulator`` with the kit's flags then the user's (``args``, which win: a
    later flag overrides), a child of the test process; ``stop`` ends it and every process it started."""
    before = _descendants(os.getpid())
    with Emulator(args=["--log-level", "info"]) as emulator:
        started = _descendants(os.getpid()) - before
        ours = [pid for pid in started if _parent(pid) == os.getpid()]
        assert len(ours) == 1, started
        command = Path(f"/proc/{ours[0]}/cmdline").read_bytes().decode().split("\0")[:-1]
        assert command[:3] == [sys.executable, "-m", "scheduler_emulator"], command
        assert command[-2:] == ["--log-level", "info"] and "--clock" in command, command
        assert emulator.call("GET", "/_emulator/health")["status"] == "ok"
        for _ in range(1000):  # bounded: 10 s at most; the access log (an info line: the user's flag won) is written
            if any("GET /_emulator/health" in line for line in emulator.output):
                break
            time.sleep(0.01)
        assert any("GET /_emulator/health" in line for line in emulator.output), emulator.log
    assert emulator.url == ""
    deadline = time.monotonic() + 30
    for _ in range(3000):  # bounded: 30 s at most
        if all(process_ended(pid) for pid in started) or time.monotonic() > deadline:
            break
        time.sleep(0.01)
    assert [pid for pid in started if not process_ended(pid)] == []


def _parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def test_a_flag_the_emulator_refuses_fails_the_start_with_its_message() -> None:
    refused = Emulator(args=["--no-such-flag"])
    with pytest.raises(EmulatorError, match="exited before listening") as raised:
        refused.start()
    assert "unrecognized arguments: --no-such-flag" in str(raised.value)
    assert refused.url == ""
