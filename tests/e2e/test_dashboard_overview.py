"""The dashboard's overview, search, virtual clock, state-aware buttons and history export, in Debian's
Chromium driven by Playwright, against one emulator started with ``--clock virtual`` (time moves only when a
test or the page says so, so every count below is known). Jobs fire at a real local target; what the page
shows is checked against what the ARM API answers. Each test starts from ``POST /_emulator/reset``. Two
tests also take docs/dashboard.md's overview screenshots (see test_dashboard.py for where they go)."""

from __future__ import annotations

import csv
import json
import os
import uuid
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect
from support.browser import PHONE, assert_nothing_cut_off, launched_chromium
from support.server import EmulatorPool, ServerProcess
from support.target_server import TargetServer
from support.waiting import wait_until

REPO = Path(__file__).resolve().parents[2]
API = {"api-version": "2016-03-01"}
TIMEOUT_MS = 15_000
START = datetime(2030, 1, 7, 8, 2, tzinfo=UTC)  # the virtual clock's first value: not on a slot boundary
REFRESH_MS = 3_000 + 5_000  # the page polls every 3 s; one refresh, with room for a loaded machine


def z(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def parse(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


@pytest.fixture(scope="module")
def screenshots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if os.environ.get("SCHEDULER_UPDATE_SCREENSHOTS") == "1":
        return REPO / "docs" / "screenshots"
    return tmp_path_factory.mktemp("screenshots")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with launched_chromium() as launched:
        yield launched


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with EmulatorPool() as pool:
        yield pool.start(
            tmp_path_factory.mktemp("ui-virtual"), "--clock", "virtual", "--clock-start", z(START), log_level="warning"
        )


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 900}, accept_downloads=True)
    opened = context.new_page()
    opened.set_default_timeout(TIMEOUT_MS)
    try:
        yield opened
    finally:
        context.close()


class World:
    """One subscription's worth of collections on the shared server, emptied first."""

    def __init__(self, server: ServerProcess) -> None:
        self.server = server
        self.subscription = str(uuid.uuid4())
        self.http = httpx.Client(base_url=server.url, params=API, timeout=60)
        self.groups: dict[str, str] = {}  # collection → its resource group
        assert self.http.post("/_emulator/reset").status_code == 200

    def collection_path(self, collection: str) -> str:
        return (
            f"/subscriptions/{self.subscription}/resourceGroups/{self.groups[collection]}/providers/Microsoft.Scheduler"
            f"/jobCollections/{collection}"
        )

    def create_collection(self, collection: str, group: str = "rg-ui") -> None:
        self.groups[collection] = group
        answer = self.http.put(
            self.collection_path(collection),
            json={"location": "westus", "properties": {"sku": {"name": "Standard"}}},
        )
        assert answer.status_code == 201, answer.text

    def put_job(self, collection: str, name: str, properties: dict[str, Any]) -> None:
        answer = self.http.put(f"{self.collection_path(collection)}/jobs/{name}", json={"properties": properties})
        assert answer.status_code in (200, 201), answer.text

    def jobs(self, collection: str) -> list[dict[str, Any]]:
        answer = self.http.get(f"{self.collection_path(collection)}/jobs")
        assert answer.status_code == 200, answer.text
        value: list[dict[str, Any]] = answer.json()["value"]
        return value

    def history(self, collection: str, job: str) -> list[dict[str, Any]]:
        answer = self.http.get(f"{self.collection_path(collection)}/jobs/{job}/history", params={"$top": "100"})
        assert answer.status_code == 200, answer.text
        return [entry["properties"] for entry in answer.json()["value"]]

    def now(self) -> datetime:
        return parse(self.http.get("/_emulator/clock").json()["now"])

    def advance(self, duration: str) -> dict[str, Any]:
        answer = self.http.post("/_emulator/clock", json={"advance": duration})
        assert answer.status_code == 200, answer.text
        result: dict[str, Any] = answer.json()
        return result

    def ui(self, fragment: str = "") -> str:
        return f"{self.server.url}/_emulator/ui/{fragment}"

    def job_page(self, collection: str, name: str) -> str:
        return self.ui(f"#/j/{self.subscription}/{self.groups[collection]}/{collection}/{name}")


@pytest.fixture
def world(server: ServerProcess) -> Iterator[World]:
    made = World(server)
    yield made
    made.http.close()


def http_job(uri: str, start: datetime, recurrence: dict[str, Any] | None, **extra: Any) -> dict[str, Any]:
    properties: dict[str, Any] = {
        "startTime": z(start),
        "action": {
            "type": "Http",
            "request": {"uri": uri, "method": "POST", "body": "hi"},
            "retryPolicy": {"retryType": "None"},
        },
        **extra,
    }
    if recurrence is not None:
        properties["recurrence"] = recurrence
    return properties


def is_try(entry: dict[str, Any]) -> bool:
    """Whether a history entry is a try of the job's main action (a Postponed entry is a skip, not a try)."""
    return bool(entry["actionName"].lower() == "mainaction" and entry["status"].lower() in ("completed", "failed"))


def no_sideways_scroll(page: Any) -> None:
    """On a phone's width nothing is cut off (tables reflow)."""
    page.set_viewport_size(PHONE)
    page.wait_for_timeout(100)
    assert_nothing_cut_off(page)


def slot_of(moment: datetime, minutes: int) -> str:
    floor = moment.replace(minute=moment.minute - moment.minute % minutes, second=0, microsecond=0)
    return z(floor)


def shown_slots(page: Any, chart: str) -> dict[str, tuple[int, int]]:
    """The chart's non-empty bars: slot start → (succeeded, failed), read from the SVG."""
    slots = page.locator(f"#chart-{chart} g.slot").evaluate_all(
        "nodes => nodes.map(n => [n.dataset.start, Number(n.dataset.succeeded), Number(n.dataset.failed)])"
    )
    return {start: (ok, bad) for start, ok, bad in slots if ok or bad}


def test_overview_counts_chart_timeline_and_failing_jobs_match_the_api(
    page: Any, world: World, target: TargetServer, screenshots: Path
) -> None:
    world.create_collection("jc-main")
    world.create_collection("jc-other", "rg-two")
    page.goto(world.ui())
    expect(page.get_by_role("heading", name="Overview")).to_be_visible()
    expect(page.locator("#failing")).to_contain_text("Nothing is failing.")
    target.respond("/bad", status=500, body="down for maintenance")
    now = world.now()
    every = {"frequency": "Minute", "interval": 5}
    world.put_job("jc-main", "steady", http_job(target.url("/ok"), now, every))
    world.put_job("jc-main", "broken", http_job(target.url("/bad"), now, {"frequency": "Minute", "interval": 10}))
    world.put_job("jc-main", "paused", http_job(target.url("/ok"), now, every, state="Disabled"))
    world.put_job("jc-main", "once", http_job(target.url("/ok"), now + timedelta(minutes=7), None))
    world.put_job("jc-main", "once-bad", http_job(target.url("/bad"), now + timedelta(minutes=8), None))
    world.put_job("jc-other", "daily", http_job(target.url("/ok"), now + timedelta(hours=20), {"frequency": "Day"}))
    world.put_job("jc-other", "hourly", http_job(target.url("/ok"), now + timedelta(minutes=1), {"frequency": "Hour"}))

    ran = world.advance("PT40M")
    assert ran["failed"] > 0 and ran["attempts"] > ran["failed"]

    # A failing job shows up within one refresh, without a reload.
    failing = page.locator("#failing tbody tr")
    expect(failing.filter(has_text="broken")).to_have_count(1, timeout=REFRESH_MS)
    jobs = {("jc-main", j["name"].split("/")[-1]): j for j in world.jobs("jc-main")}
    jobs |= {("jc-other", j["name"].split("/")[-1]): j for j in world.jobs("jc-other")}
    # Failing now, by the API: faulted, or the newest main-action try failed; shown with that try's message.
    failing_now: dict[str, str] = {}
    for (collection, name), job in jobs.items():
        tries = [h for h in world.history(collection, name) if is_try(h)]
        if job["properties"]["state"].lower() == "faulted" or (tries and tries[0]["status"].lower() == "failed"):
            failing_now[name] = tries[0]["message"] if tries else ""
    assert set(failing_now) == {"broken", "once-bad"}
    expect(failing).to_have_count(len(failing_now), timeout=REFRESH_MS)
    for name, message in failing_now.items():
        row = failing.filter(has=page.get_by_role("link", name=name, exact=True))
        assert message and row.locator("td.message-cell").text_content() == message

    # Totals by state: as the ARM API lists the jobs (states compared case-insensitively).
    states = Counter(j["properties"]["state"].lower() for j in jobs.values())
    assert states["completed"] + states["faulted"] == 2 and states["disabled"] == 1
    for state in ("enabled", "disabled", "completed", "faulted"):
        tile = page.locator(f'#totals a[data-state="{state}"] .figure')
        assert tile.inner_text() == str(states[state]), state
    assert page.locator('#totals a[data-state="all"] .figure').inner_text() == str(len(jobs))

    # The chart: every main-action try from the history API, in its 5-minute (hour chart) or hour slot.
    tries = [entry for (collection, name) in jobs for entry in world.history(collection, name) if is_try(entry)]
    expected_hour: Counter[tuple[str, str]] = Counter(
        (slot_of(parse(t["startTime"]), 5), t["status"].lower()) for t in tries
    )
    hour = shown_slots(page, "hour")
    assert hour == {
        slot: (expected_hour[(slot, "completed")], expected_hour[(slot, "failed")])
        for slot in {slot for slot, _ in expected_hour}
    }
    succeeded = sum(1 for t in tries if t["status"].lower() == "completed")
    failed = len(tries) - succeeded
    for chart in ("hour", "day"):
        figure = page.locator(f"#chart-{chart}")
        assert figure.locator('[data-kind="succeeded"]').inner_text() == str(succeeded)
        assert figure.locator('[data-kind="failed"]').inner_text() == str(failed)
        assert f"{succeeded} succeeded, {failed} failed" in (figure.locator("svg").get_attribute("aria-label") or "")
    assert sum(ok + bad for ok, bad in shown_slots(page, "day").values()) == len(tries)

    # The time line: the next runs of every enabled job, soonest first, as the API gives them.
    upcoming = sorted(
        (j["properties"]["status"]["nextExecutionTime"], name)
        for (_, name), j in jobs.items()
        if j["properties"]["state"].lower() == "enabled" and j["properties"].get("status", {}).get("nextExecutionTime")
    )
    items = page.locator("#next-up li")
    assert [item.get_by_role("link").inner_text() for item in items.all()] == [name for _, name in upcoming]
    shown_times = [item.locator("time").get_attribute("datetime") for item in items.all()]
    assert [parse(t) for t in shown_times] == [parse(t) for t, _ in upcoming]

    # Each item links to its page.
    items.first.get_by_role("link").click()
    page.wait_for_url("**/#/j/**")
    expect(page.get_by_role("heading", name=upcoming[0][1])).to_be_visible()
    page.go_back()
    page.locator("#totals").wait_for()

    page.locator("#clock-panel summary").click()  # the virtual clock's controls, open for the screenshots
    expect(page.get_by_role("form", name="Advance the virtual clock")).to_be_visible()
    page.screenshot(path=str(screenshots / "overview-1280.png"), full_page=True)
    no_sideways_scroll(page)
    page.screenshot(path=str(screenshots / "overview-390.png"), full_page=True)


def test_failing_now_keeps_a_job_whose_retries_all_failed_when_a_postponed_entry_follows(
    page: Any, world: World, target: TargetServer
) -> None:
    world.create_collection("jc-retry")
    # A body of one long word (a trace id), as the history's message ends with it: it must wrap on a phone.
    target.respond("/down", status=500, body="upstream-timeout;trace=" + uuid.uuid4().hex * 3)
    properties = http_job(target.url("/down"), world.now(), {"frequency": "Minute", "interval": 1})
    properties["action"]["retryPolicy"] = {"retryType": "Fixed", "retryInterval": "PT2M", "retryCount": 2}
    world.put_job("jc-retry", "retried", properties)
    # Tries at +0, +2 and +4 min all fail; the minutes that came due meanwhile are one Postponed entry, written
    # after the last try; the next occurrence is due at +5 min.
    world.advance("PT4M30S")
    history = world.history("jc-retry", "retried")
    assert [(h["status"].lower(), h["retryCount"]) for h in history] == [
        ("postponed", 0),
        ("failed", 2),
        ("failed", 1),
        ("failed", 0),
    ]

    page.goto(world.ui())
    row = page.locator("#failing tbody tr").filter(has=page.get_by_role("link", name="retried", exact=True))
    expect(row).to_have_count(1)
    expect(row.locator("td.message-cell")).to_have_text(history[1]["message"])  # the last try's, not the skip's
    no_sideways_scroll(page)

    page.goto(world.job_page("jc-retry", "retried"))  # the history: its long messages wrap, on a phone as on a desktop
    expect(page.locator("#history tbody tr")).to_have_count(len(history))
    no_sideways_scroll(page)
    page.set_viewport_size({"width": 1280, "height": 900})
    assert_nothing_cut_off(page)


def test_search_narrows_the_list_and_survives_a_reload(page: Any, world: World) -> None:
    world.create_collection("jc-alpha")
    world.create_collection("jc-beta", "rg-other")
    start = world.now() + timedelta(days=1)
    world.put_job("jc-alpha", "invoice-run", http_job("http://127.0.0.1:9/invoices", start, {"frequency": "Day"}))
    world.put_job("jc-alpha", "cleanup", http_job("http://localhost:9/clean", start, {"frequency": "Day"}))
    world.put_job(
        "jc-beta", "invoice-mail", http_job("http://127.0.0.2:9/mail", start, {"frequency": "Day"}, state="Disabled")
    )
    queue = {
        "startTime": z(start),
        "action": {
            "type": "StorageQueue",
            "queueMessage": {
                "storageAccount": "devstoreaccount1",
                "queueName": "orders",
                "sasToken": "?sv=2019-02-02&sig=abc",
                "message": "hello",
            },
        },
    }
    world.put_job("jc-beta", "queue-push", queue)

    page.goto(world.ui("#/jobs"))
    rows = page.locator("#results tbody tr")
    expect(rows).to_have_count(4)
    search = page.get_by_role("search", name="Find jobs")
    name = search.get_by_label("Name contains")
    name.focus()
    page.keyboard.type("invoice")  # the keyboard reaches and fills the filter
    expect(rows).to_have_count(2)
    assert sorted(r.get_by_role("link").first.inner_text() for r in rows.all()) == ["invoice-mail", "invoice-run"]
    search.get_by_label("State").select_option("disabled")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("invoice-mail")
    page.wait_for_function("location.hash.includes('state=disabled') && location.hash.includes('q=invoice')")

    page.reload()  # the filter is in the address
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("invoice-mail")
    assert page.get_by_label("Name contains").input_value() == "invoice"
    assert page.get_by_label("State").input_value() == "disabled"

    shared = world.ui("#/jobs?host=127.0.0.1")  # a shared link: target host, across collections
    page.goto(shared)
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("invoice-run")
    page.goto(world.ui("#/jobs?type=storagequeue"))
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("queue-push")
    assert "sig=" not in rows.first.inner_text()
    page.goto(world.ui("#/jobs?q=rg-other"))  # names of groups and collections match too
    expect(rows).to_have_count(2)
    page.goto(world.ui("#/jobs?q=nothing-like-this"))
    expect(page.get_by_text("No job matches.")).to_be_visible()
    no_sideways_scroll(page)


def test_advancing_the_virtual_clock_from_the_page_fires_the_due_job(
    page: Any, world: World, target: TargetServer
) -> None:
    world.create_collection("jc-clock")
    path = f"/tick/{uuid.uuid4().hex}"
    # On a whole minute: the page's "Move to" field takes minutes, and an earlier test may leave seconds on the clock.
    before = world.now()
    due = (before + timedelta(minutes=31)).replace(second=0, microsecond=0)
    world.put_job("jc-clock", "tick", http_job(target.url(path), due, {"frequency": "Hour"}))
    page.goto(world.job_page("jc-clock", "tick"))
    expect(page.get_by_text("No runs yet.")).to_be_visible()
    panel = page.locator("#clock-panel")
    expect(panel.locator("summary")).to_contain_text(z(world.now()).replace("T", " ").replace("Z", " UTC"))
    panel.locator("summary").focus()
    page.keyboard.press("Enter")  # opens from the keyboard
    form = page.get_by_role("form", name="Advance the virtual clock")
    expect(form).to_be_visible()
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.name") == "amount"  # the next stop is the first field
    form.get_by_label("Advance by").fill("45")
    form.get_by_label("Unit").select_option("minutes")
    form.get_by_role("button", name="Advance").press("Enter")

    result = page.locator("#clock-result")
    expect(result).to_contain_text("Ran 1 occurrence (1 attempt, 0 failed)")
    wait_until(lambda: target.requests(path), 10, "the job's request at the target")
    row = page.locator("#history tbody tr")
    expect(row).to_have_count(1)
    assert "Completed" in row.first.inner_text()
    assert z(due).replace("T", " ").replace("Z", " UTC") in row.first.inner_text()
    now = world.now()
    assert now == before + timedelta(minutes=45)
    expect(panel.locator("summary")).to_contain_text(z(now).replace("T", " ").replace("Z", " UTC"))

    # "To a date": the next three hourly runs.
    moved = page.get_by_role("form", name="Move the virtual clock to a time")
    moved.get_by_label("Move to (UTC)").fill((due + timedelta(hours=3, minutes=5)).strftime("%Y-%m-%dT%H:%M"))
    moved.get_by_role("button", name="Move to").click()
    expect(result).to_contain_text("Ran 3 occurrences (3 attempts, 0 failed)")
    expect(row).to_have_count(4)
    assert world.now() == due + timedelta(hours=3, minutes=5)
    assert len(world.history("jc-clock", "tick")) == 4
    no_sideways_scroll(page)


def test_buttons_follow_the_state_and_the_history_exports_as_csv_and_json(
    page: Any, world: World, target: TargetServer, tmp_path: Path
) -> None:
    world.create_collection("jc-export")
    target.respond("/flaky", fail_first=2, fail_body="try, again")
    world.put_job("jc-export", "flaky", http_job(target.url("/flaky"), world.now(), {"frequency": "Minute"}))
    world.advance("PT4M")
    page.goto(world.job_page("jc-export", "flaky"))
    actions = page.locator("#job-actions")
    expect(actions.get_by_role("button", name="Disable")).to_be_visible()
    assert actions.get_by_role("button", name="Enable").count() == 0
    actions.get_by_role("button", name="Disable").click()
    expect(actions.get_by_role("button", name="Enable")).to_be_visible()
    assert actions.get_by_role("button", name="Disable").count() == 0
    job = world.http.get(f"{world.collection_path('jc-export')}/jobs/flaky").json()
    assert job["properties"]["state"].lower() == "disabled"
    assert page.evaluate("document.activeElement.textContent") == "Enable"  # the keyboard lands on the counterpart
    # A change made elsewhere: the buttons follow on the next refresh.
    world.http.patch(f"{world.collection_path('jc-export')}/jobs/flaky", json={"properties": {"state": "Enabled"}})
    expect(actions.get_by_role("button", name="Disable")).to_be_visible(timeout=REFRESH_MS)
    assert actions.get_by_role("button", name="Enable").count() == 0

    history = world.history("jc-export", "flaky")
    assert [h["status"].lower() for h in history].count("failed") == 2
    with page.expect_download() as csv_download:
        page.get_by_role("button", name="Export CSV").click()
    assert csv_download.value.suggested_filename == "flaky-history.csv"
    saved = tmp_path / "history.csv"
    csv_download.value.save_as(saved)
    with saved.open(encoding="utf-8", newline="") as exported_csv:  # messages hold CR LF: keep them as written
        rows = list(csv.DictReader(exported_csv))
    with page.expect_download() as json_download:
        page.get_by_role("button", name="Export JSON").click()
    assert json_download.value.suggested_filename == "flaky-history.json"
    exported = json.loads(Path(json_download.value.path()).read_text(encoding="utf-8"))["value"]

    expected = [
        {
            "status": h["status"].lower(),
            "startTime": h["startTime"],
            "expectedExecutionTime": h.get("expectedExecutionTime", ""),
            "message": h["message"],
            "retryCount": str(h["retryCount"]),
        }
        for h in history
    ]
    keys = ("status", "startTime", "expectedExecutionTime", "message", "retryCount")
    lowered = [{k: (v.lower() if k == "status" else v) for k, v in row.items()} for row in rows]
    assert [{k: row[k] for k in keys} for row in lowered] == expected
    assert [
        {k: str(entry[k]).lower() if k == "status" else str(entry[k]) for k in keys} for entry in exported
    ] == expected
    assert any("try, again" in row["message"] for row in rows)  # a comma inside a field survives the CSV


def test_a_resource_group_page_lists_that_group_s_collections(page: Any, world: World) -> None:
    world.create_collection("jc-one", "rg-shown")
    world.create_collection("jc-two", "rg-shown")
    world.create_collection("jc-elsewhere", "rg-hidden")
    page.goto(world.ui("#/collections"))
    page.get_by_role("row").filter(has_text="jc-one").get_by_role("link", name="rg-shown").click()
    page.wait_for_url("**/#/g/**")
    expect(page.get_by_role("heading", name="rg-shown", exact=True)).to_be_visible()
    table = page.get_by_role("table").filter(has_text="The collections in this group")
    expect(table.locator("tbody tr")).to_have_count(2)
    assert "jc-elsewhere" not in table.inner_text()
    table.get_by_role("link", name="jc-two").click()
    page.wait_for_url("**/#/c/**")
    page.get_by_role("link", name="rg-shown").click()  # the collection's page links back to its group
    page.wait_for_url("**/#/g/**")


def template(*resources: dict[str, Any]) -> dict[str, Any]:
    return {
        "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
        "contentVersion": "1.0.0.0",
        "resources": list(resources),
    }


def scheduler_resources(collection: str, job: str, start: datetime, interval: int) -> list[dict[str, Any]]:
    return [
        {
            "type": "Microsoft.Scheduler/jobCollections",
            "apiVersion": "2016-03-01",
            "name": collection,
            "location": "[resourceGroup().location]",
            "properties": {"sku": {"name": "Standard"}},
        },
        {
            "type": "Microsoft.Scheduler/jobCollections/jobs",
            "apiVersion": "2016-03-01",
            "name": f"{collection}/{job}",
            "dependsOn": [f"[resourceId('Microsoft.Scheduler/jobCollections', '{collection}')]"],
            "properties": {
                "startTime": z(start),
                "action": {"type": "Http", "request": {"uri": "http://127.0.0.1:9/x", "method": "GET"}},
                "recurrence": {"frequency": "Day", "interval": interval},
            },
        },
    ]


def test_a_group_page_lists_its_deployments_and_a_deployment_page_shows_state_error_and_operations(
    page: Any, world: World, screenshots: Path
) -> None:
    arm = {"api-version": "2021-04-01"}
    group = f"/subscriptions/{world.subscription}/resourceGroups/rg-deploy"
    answer = world.http.put(group, params=arm, json={"location": "westus", "tags": {"team": "ops"}})
    assert answer.status_code in (200, 201), answer.text
    deployments = f"{group}/providers/Microsoft.Resources/deployments"
    start = world.now() + timedelta(days=1)
    for name, resources in (
        ("works", scheduler_resources("jc-dep", "ping", start, 1)),
        ("breaks", scheduler_resources("jc-dep2", "broken", start, -5)),
    ):
        sent = world.http.put(
            f"{deployments}/{name}",
            params=arm,
            json={"properties": {"mode": "Incremental", "template": template(*resources)}},
        )
        assert sent.status_code in (200, 201), sent.text

    def settled() -> dict[str, dict[str, Any]]:
        listed = world.http.get(deployments, params=arm).json()["value"]
        done = {d["name"]: d for d in listed if d["properties"]["provisioningState"] in ("Succeeded", "Failed")}
        return done if len(done) == 2 else {}

    finished = wait_until(settled, 30, "both deployments to finish")
    assert finished["works"]["properties"]["provisioningState"] == "Succeeded"
    error = finished["breaks"]["properties"]["error"]
    operations = world.http.get(
        f"/subscriptions/{world.subscription}/resourcegroups/rg-deploy/deployments/breaks/operations", params=arm
    ).json()["value"]

    page.goto(world.ui("#/collections"))
    page.get_by_role("link", name="rg-deploy").first.click()
    page.wait_for_url("**/#/g/**")
    expect(page.locator("#group-summary")).to_contain_text("westus")
    expect(page.locator("#group-summary")).to_contain_text("team=ops")
    collections = page.get_by_role("table").filter(has_text="The collections in this group")
    assert sorted(link.inner_text() for link in collections.locator("tbody tr a[href^='#/c/']").all()) == [
        "jc-dep",
        "jc-dep2",
    ]
    rows = page.locator("#deployments tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.filter(has_text="works")).to_contain_text("Succeeded")
    broken_row = rows.filter(has_text="breaks")
    expect(broken_row).to_contain_text("Failed")
    expect(broken_row).to_contain_text(error["code"])
    no_sideways_scroll(page)  # the group's collections and deployments
    page.set_viewport_size({"width": 1280, "height": 900})

    broken_row.get_by_role("link", name="breaks").click()
    page.wait_for_url("**/#/d/**")
    expect(page.locator("#deployment-state strong")).to_have_text("Failed")
    shown_error = page.locator("#deployment-error")
    expect(shown_error).to_contain_text(error["code"])
    for detail in error["details"]:
        expect(shown_error).to_contain_text(detail["message"])
    shown = page.locator("#operations tbody tr")
    expect(shown).to_have_count(len(operations))
    for operation in operations:
        properties = operation["properties"]
        name = properties["targetResource"]["resourceName"]
        row = shown.filter(has=page.get_by_role("link", name=name, exact=True))
        expect(row).to_contain_text(properties["provisioningState"])
    failed = next(o for o in operations if o["properties"]["provisioningState"] == "Failed")
    message = failed["properties"]["statusMessage"]["error"]["message"]
    expect(shown.filter(has_text="Failed")).to_contain_text(message)
    page.screenshot(path=str(screenshots / "deployment-1280.png"), full_page=True)
    no_sideways_scroll(page)
    page.screenshot(path=str(screenshots / "deployment-390.png"), full_page=True)
    page.set_viewport_size({"width": 1280, "height": 900})
    shown.get_by_role("link", name="jc-dep2", exact=True).click()  # an operation's collection opens its page
    page.wait_for_url("**/#/c/**")
    expect(page.get_by_role("heading", name="jc-dep2")).to_be_visible()


def test_a_job_waiting_to_retry_shows_the_retry_as_its_next_run(page: Any, world: World, target: TargetServer) -> None:
    world.create_collection("jc-pending")
    target.respond("/down", status=500, body="down")
    properties = http_job(target.url("/down"), world.now() + timedelta(minutes=1), {"frequency": "Minute"})
    properties["action"]["retryPolicy"] = {"retryType": "Fixed", "retryCount": 2, "retryInterval": "PT5M"}
    world.put_job("jc-pending", "retrying", properties)
    world.advance("PT2M")  # the first attempt fails; its retry is due 5 minutes after it, past the next instant
    [tried] = world.history("jc-pending", "retrying")
    retry_at = parse(tried["endTime"]) + timedelta(minutes=5)
    [job] = world.jobs("jc-pending")
    assert parse(job["properties"]["status"]["nextExecutionTime"]) < retry_at  # what the schedule alone says

    page.goto(world.ui())
    item = page.locator("#next-up li").filter(has=page.get_by_role("link", name="retrying", exact=True))
    expect(item).to_have_count(1)
    assert parse(item.locator("time").get_attribute("datetime") or "") == retry_at
    page.goto(world.job_page("jc-pending", "retrying"))
    expect(page.get_by_role("heading", name="retrying")).to_be_visible()
    runs = [parse(t or "") for t in page.locator("#next-runs time").evaluate_all("ts => ts.map(t => t.dateTime)")]
    # The retry, then the schedule's instants after it (those due before it are skipped when the occurrence ends).
    assert runs[0] == retry_at and all(later > retry_at for later in runs[1:]) and len(runs) == 3, runs
    page.goto(world.ui("#/jobs?q=retrying"))
    expect(page.locator("#results tbody tr")).to_have_count(1)
    assert parse(page.locator("#results tbody tr time").get_attribute("datetime") or "") == retry_at

    # Disabled, the job starts no new occurrence; its retries still run: none is left waiting for the clock of the
    # tests that follow (a retry of a job their reset removed would still be sent, and counted in their advance).
    disabled = world.http.patch(
        f"{world.collection_path('jc-pending')}/jobs/retrying", json={"properties": {"state": "Disabled"}}
    )
    assert disabled.status_code == 200, disabled.text
    world.advance("PT15M")
    entries = world.history("jc-pending", "retrying")
    assert [(entry["status"], entry["retryCount"]) for entry in entries] == [("Failed", n) for n in (2, 1, 0)]
