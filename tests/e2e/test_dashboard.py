"""The dashboard (/_emulator/ui/) in a real browser: Debian's Chromium driven by Playwright (no browser
download). Data is created through the ARM API, the page is used as a person would (links, buttons by
their accessible names, forms, keyboard), and what the page shows is checked against the API. Two tests
also take docs/dashboard.md's screenshots (1280 and 390 px wide): into docs/screenshots/ with
SCHEDULER_UPDATE_SCREENSHOTS=1, else into pytest's temporary directory, so that a test run leaves the
checkout as it found it."""

from __future__ import annotations

import os
import uuid
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
README_SCREENSHOTS = REPO / "docs" / "screenshots"
API = {"api-version": "2016-03-01"}
TOKEN = "dashboard-token"
TIMEOUT_MS = 15_000


@pytest.fixture(scope="module")
def screenshots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the screenshots go: docs/screenshots/ only when asked to refresh them."""
    if os.environ.get("SCHEDULER_UPDATE_SCREENSHOTS") == "1":
        return README_SCREENSHOTS
    return tmp_path_factory.mktemp("screenshots")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with launched_chromium() as launched:
        yield launched


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    """An emulator as `make run` starts it (plain HTTP), and one that requires a token."""
    with EmulatorPool() as pool:
        plain = pool.start(tmp_path_factory.mktemp("ui"), log_level="warning")
        guarded = pool.start(
            tmp_path_factory.mktemp("ui-auth"), log_level="warning", env={"SCHEDULER_AUTH_TOKEN": TOKEN}
        )
        yield plain, guarded


@pytest.fixture(scope="module")
def server(servers: tuple[ServerProcess, ServerProcess]) -> ServerProcess:
    return servers[0]


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    opened = context.new_page()
    opened.set_default_timeout(TIMEOUT_MS)
    try:
        yield opened
    finally:
        context.close()


class World:
    def __init__(self, server: ServerProcess, headers: dict[str, str] | None = None) -> None:
        self.server = server
        self.subscription = str(uuid.uuid4())
        self.resource_group = "rg-ui"
        self.collection = f"jc-{uuid.uuid4().hex[:8]}"
        self.http = httpx.Client(base_url=server.url, params=API, timeout=30, headers=headers or {})

    @property
    def collection_path(self) -> str:
        return (
            f"/subscriptions/{self.subscription}/resourceGroups/{self.resource_group}/providers/Microsoft.Scheduler"
            f"/jobCollections/{self.collection}"
        )

    def create_collection(self) -> None:
        answer = self.http.put(
            self.collection_path, json={"location": "westus", "properties": {"sku": {"name": "Standard"}}}
        )
        assert answer.status_code == 201, answer.text

    def put_job(self, name: str, properties: dict[str, Any]) -> dict[str, Any]:
        answer = self.http.put(f"{self.collection_path}/jobs/{name}", json={"properties": properties})
        assert answer.status_code in (200, 201), answer.text
        result: dict[str, Any] = answer.json()
        return result

    def job(self, name: str) -> httpx.Response:
        return self.http.get(f"{self.collection_path}/jobs/{name}")

    def ui(self, *parts: str) -> str:
        hashed = "/".join(parts)
        return f"{self.server.url}/_emulator/ui/#/{hashed}"


def soon(offset: str = "Z") -> str:
    """09:00 a week from now, in the given UTC offset (within the 18 months a start time may be ahead)."""
    day = datetime.now(UTC) + timedelta(days=7)
    return f"{day:%Y-%m-%d}T09:00:00{offset}"


def every_15_minutes(uri: str) -> dict[str, Any]:
    return {
        "startTime": soon(),
        "action": {"type": "Http", "request": {"uri": uri, "method": "POST", "body": "hello"}},
        "recurrence": {"frequency": "Minute", "interval": 15},
    }


@pytest.fixture
def world(server: ServerProcess) -> Iterator[World]:
    made = World(server)
    made.create_collection()
    yield made
    made.http.close()


def jobs_page(world: World) -> str:
    return world.ui("c", world.subscription, world.resource_group, world.collection)


def job_page(world: World, name: str) -> str:
    return world.ui("j", world.subscription, world.resource_group, world.collection, name)


def test_collections_and_jobs_created_through_the_api_appear(
    page: Any, world: World, target: TargetServer, screenshots: Path
) -> None:
    world.put_job("every-quarter", every_15_minutes(target.url("/q")))
    monthly = every_15_minutes(target.url("/m"))
    monthly["startTime"] = soon("-08:00")
    monthly["recurrence"] = {
        "frequency": "Month",
        "interval": 1,
        "schedule": {"monthlyOccurrences": [{"day": "Friday", "occurrence": -1}]},
    }
    world.put_job("month-end", monthly)
    page.goto(f"{world.server.url}/_emulator/ui")  # redirects to /_emulator/ui/
    page.get_by_role("link", name=world.collection).click()
    table = page.get_by_role("table")
    quarter = table.get_by_role("row").filter(has_text="every-quarter")
    assert "every 15 minutes" in quarter.inner_text()
    month_end = table.get_by_role("row").filter(has_text="month-end")
    assert "on the last Friday of each month at 09:00 (UTC\u221208:00)" in month_end.inner_text()
    assert month_end.locator("time").count() == 3  # next three runs
    assert [h.inner_text() for h in table.locator("th").all()][:3] == ["Job", "State", "Schedule"]
    assert "2 / 50 jobs" in page.locator("#summary").inner_text()

    page.screenshot(path=str(screenshots / "jobs-1280.png"), full_page=True)
    page.set_viewport_size(PHONE)
    assert_nothing_cut_off(page)
    page.screenshot(path=str(screenshots / "jobs-390.png"), full_page=True)


def test_run_now_fires_and_the_history_row_appears_without_a_reload(
    page: Any, world: World, target: TargetServer, screenshots: Path
) -> None:
    path = f"/run-now/{uuid.uuid4().hex}"
    world.put_job("manual", every_15_minutes(target.url(path)))
    page.goto(job_page(world, "manual"))
    expect(page.get_by_text("No runs yet.")).to_be_visible()
    run_now = page.get_by_role("button", name="Run now")
    run_now.focus()
    page.keyboard.press("Enter")  # the keyboard works as well as a click
    wait_until(lambda: [r for r in target.received if r.path == path], 20, "the run-now request at the target")
    row = page.locator("#history tbody tr").first
    row.wait_for()
    assert "Completed" in row.inner_text()
    assert page.locator("#history tbody tr").count() == 1

    page.screenshot(path=str(screenshots / "job-1280.png"), full_page=True)
    page.set_viewport_size(PHONE)
    assert_nothing_cut_off(page)
    page.screenshot(path=str(screenshots / "job-390.png"), full_page=True)


def test_disable_and_enable_change_the_state_shown_and_in_the_api(
    page: Any, world: World, target: TargetServer
) -> None:
    world.put_job("toggled", every_15_minutes(target.url("/t")))
    page.goto(job_page(world, "toggled"))
    state = page.locator("#job-state strong")
    assert state.inner_text() == "Enabled"
    assert page.locator("#next-runs time").count() == 3
    assert "object" not in page.locator("#next-runs").inner_text()
    page.get_by_role("button", name="Disable").click()
    expect(page.locator("#job-state strong")).to_have_text("Disabled")
    assert world.job("toggled").json()["properties"]["state"] == "disabled"
    assert page.locator("#next-runs time").count() == 0
    page.get_by_role("button", name="Enable").click()
    expect(page.locator("#job-state strong")).to_have_text("Enabled")
    assert world.job("toggled").json()["properties"]["state"] == "enabled"


def test_a_state_change_made_elsewhere_shows_without_a_reload(page: Any, world: World, target: TargetServer) -> None:
    world.put_job("watched", every_15_minutes(target.url("/w")))
    page.goto(jobs_page(world))
    row = page.get_by_role("row").filter(has_text="watched")
    assert "Enabled" in row.inner_text()
    world.http.patch(f"{world.collection_path}/jobs/watched", json={"properties": {"state": "Disabled"}})
    expect(page.get_by_role("row").filter(has_text="watched")).to_contain_text("Disabled")  # polled, no reload


def test_delete_asks_for_confirmation(page: Any, world: World, target: TargetServer) -> None:
    world.put_job("doomed", every_15_minutes(target.url("/d")))
    page.goto(job_page(world, "doomed"))
    page.once("dialog", lambda dialog: dialog.dismiss())
    page.get_by_role("button", name="Delete").click()
    page.wait_for_timeout(500)
    assert world.job("doomed").status_code == 200
    messages: list[str] = []

    def accept(dialog: Any) -> None:
        messages.append(dialog.message)
        dialog.accept()

    page.once("dialog", accept)
    page.get_by_role("button", name="Delete").click()
    wait_until(lambda: world.job("doomed").status_code == 404, 10, "the job to be deleted")
    assert messages == ["Delete the job doomed and its history?"]
    page.wait_for_url("**/#/c/**")


def test_a_form_with_a_bad_recurrence_shows_the_api_error_and_stores_nothing(page: Any, world: World) -> None:
    page.goto(jobs_page(world))
    form = page.get_by_role("form", name="Job definition as JSON")
    form.get_by_label("Job name").fill("bad-one")
    form.get_by_label("Properties (JSON)").fill(
        '{"action": {"type": "Http", "request": {"uri": "http://127.0.0.1:9/x", "method": "GET"}},'
        ' "recurrence": {"frequency": "Fortnight", "interval": 1}}'
    )
    form.get_by_role("button", name="Save JSON").click()
    alert = page.get_by_role("alert")
    alert.wait_for()
    assert "properties.recurrence.frequency" in alert.inner_text()
    assert world.job("bad-one").status_code == 404

    simple = page.get_by_role("form", name="Create or replace a job")
    simple.get_by_label("Job name").fill("made-in-form")
    simple.get_by_label("Target URI").fill("http://127.0.0.1:9/form")
    simple.get_by_label("Repeat").select_option("Hour")
    simple.get_by_label("Every (interval)").fill("2")
    simple.get_by_role("button", name="Save job").click()
    wait_until(lambda: world.job("made-in-form").status_code == 200, 10, "the form's job")
    assert world.job("made-in-form").json()["properties"]["recurrence"] == {"frequency": "hour", "interval": 2}


def test_markup_in_user_values_shows_as_text(page: Any, world: World) -> None:
    payload = "<img src=x onerror=window.__xss=1><script>window.__xss=2</script>"
    properties = every_15_minutes("http://127.0.0.1:9/x")
    properties["action"]["request"]["body"] = payload
    properties["action"]["request"]["headers"] = {"x-note": payload}
    properties["action"]["request"]["authentication"] = {
        "type": "Basic",
        "username": payload,
        "password": "hunter2-secret",
    }
    world.put_job("markup", properties)
    page.goto(job_page(world, "markup"))
    definition = page.locator("#definition")
    definition.wait_for()
    text = definition.inner_text()
    assert payload in text
    assert "hunter2-secret" not in page.content()
    assert '"password": "********"' in text
    assert page.evaluate("window.__xss") is None
    assert page.locator("#definition img, #definition script").count() == 0


def test_with_a_token_the_page_asks_for_it_and_shows_no_data_without_it(
    page: Any, servers: tuple[ServerProcess, ServerProcess]
) -> None:
    guarded = servers[1]
    world = World(guarded, headers={"Authorization": f"Bearer {TOKEN}"})
    world.create_collection()
    page.goto(f"{guarded.url}/_emulator/ui/")
    page.get_by_label("API token").wait_for()
    assert world.collection not in page.content()
    page.get_by_label("API token").fill("wrong")
    page.get_by_role("button", name="Use token").click()
    page.get_by_label("API token").wait_for()
    assert world.collection not in page.content()
    page.get_by_label("API token").fill(TOKEN)
    page.get_by_role("button", name="Use token").click()
    page.get_by_role("link", name=world.collection).wait_for()
    assert page.context.cookies() == []


def test_the_schedule_calculator(page: Any, server: ServerProcess) -> None:
    page.goto(f"{server.url}/_emulator/ui/#/calculator")
    start = soon("-08:00")
    page.get_by_label("Start time (ISO-8601, optional)").fill(start)
    page.get_by_label("How many").fill("3")
    page.get_by_role("button", name="Show occurrences").click()
    output = page.locator("#calc-output")
    output.locator("li").nth(2).wait_for()
    assert "on the last Friday of each month at 09:00 (UTC\u221208:00)" in output.inner_text()
    recurrence = {
        "frequency": "Month",
        "interval": 1,
        "schedule": {"monthlyOccurrences": [{"day": "Friday", "occurrence": -1}]},
    }
    preview = httpx.post(
        server.url + "/_emulator/recurrence/preview", json={"startTime": start, "recurrence": recurrence, "count": 3}
    ).json()["occurrences"]
    shown = [item.inner_text() for item in output.locator("li").all()]
    assert shown == [t.replace("T", " ").replace("Z", " UTC") for t in preview]
    assert all(t.endswith("17:00:00 UTC") for t in shown)


def test_the_page_and_its_assets_are_served_offline_from_the_package(server: ServerProcess) -> None:
    with httpx.Client(base_url=server.url) as client:
        page = client.get("/_emulator/ui/")
        assert page.status_code == 200
        assert "content-security-policy" in page.headers
        for asset in ("app.js", "app.css"):
            assert client.get(f"/_emulator/ui/{asset}").status_code == 200
        assert "http://" not in page.text and "https://" not in page.text  # no CDN: everything from this server
        assert client.get("/_emulator/ui/other.js").status_code == 404
