"""The dashboard's read-only JSON (docs/reference/test-support.md#the-dashboard-and-its-api): overview, search across
collections and history export, on each store (their SQL differs: JSON paths, the bucketing CASE, the correlated
newest-try lookup). The session server is shared with other tests, so the overview is checked for this test's job and
for its own consistency, not for global totals (tests/e2e/test_dashboard_overview.py checks those on a server of its
own)."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime, timedelta

from support.api_calls import LOOPBACK_URI, assert_arm_error
from support.api_client import API, create_job
from support.waiting import unique, wait_until

OVERVIEW = "/_emulator/dashboard/overview"
SEARCH = "/_emulator/dashboard/jobs"


def later() -> str:
    return (datetime.now(UTC) + timedelta(days=2)).strftime("%Y-%m-%dT09:00:00Z")


def http_action(uri: str = LOOPBACK_URI) -> dict[str, object]:
    return {"type": "Http", "request": {"uri": uri, "method": "GET"}, "retryPolicy": {"retryType": "None"}}


def export_path(names, job: str) -> str:
    return (
        f"/_emulator/dashboard/subscriptions/{names.subscription}/resourceGroups/{names.resource_group}"
        f"/jobCollections/{names.collection}/jobs/{job}/export"
    )


def run_and_wait(http, names, job: str, entries: int) -> list[dict[str, object]]:
    assert http.post(f"{names.job_path(job)}/run", params={"api-version": API}).status_code in (200, 202)

    def history() -> list[dict[str, object]]:
        found = http.get(f"{names.job_path(job)}/history", params={"api-version": API}).json()["value"]
        return found if len(found) >= entries else []

    return wait_until(history, 20, f"{entries} history entries of {job}")


def test_the_overview_shows_a_failing_job_with_its_message_and_consistent_figures(http, names) -> None:
    job = unique("failing-")
    create_job(http, names, job, http_action(), startTime=later(), recurrence={"frequency": "Hour"})
    entry = run_and_wait(http, names, job, 1)[0]["properties"]
    assert entry["status"].lower() == "failed"

    answer = http.get(OVERVIEW)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    mine = [f for f in body["failing"] if f["job"]["name"] == job]
    assert len(mine) == 1
    assert mine[0]["job"] == {
        "subscriptionId": names.subscription,
        "resourceGroup": names.resource_group,
        "collection": names.collection,
        "name": job,
    }
    assert mine[0]["message"] == entry["message"] and mine[0]["status"].lower() == "failed"
    assert body["jobs"] == sum(body["jobStates"].values()) and body["jobs"] >= 1
    for name, slots, seconds in (("hour", 12, 300), ("day", 24, 3600)):
        window = body["attempts"][name]
        assert len(window["slots"]) == slots and window["slotSeconds"] == seconds
        assert window["failed"] == sum(s["failed"] for s in window["slots"]) >= 1
        assert window["succeeded"] == sum(s["succeeded"] for s in window["slots"])
        starts = [datetime.fromisoformat(s["start"].replace("Z", "+00:00")) for s in window["slots"]]
        assert all(b - a == timedelta(seconds=seconds) for a, b in zip(starts, starts[1:], strict=False))
        assert starts[0].timestamp() % seconds == 0
    assert body["attempts"]["day"]["failed"] >= body["attempts"]["hour"]["failed"]
    times = [run["time"] for run in body["nextRuns"]]
    assert times == sorted(times)


def test_search_filters_across_collections_case_insensitively(http, names) -> None:
    tag = unique("srch")
    create_job(http, names, f"{tag}-web", http_action("http://127.0.0.1:9/web?code=abc"), startTime=later())
    create_job(http, names, f"{tag}-off", http_action("http://localhost:9/off"), startTime=later(), state="Disabled")

    def found(**params: str) -> list[str]:
        answer = http.get(SEARCH, params=params)
        assert answer.status_code == 200, answer.text
        return sorted(item["job"]["name"] for item in answer.json()["value"])

    assert found(q=tag.upper()) == [f"{tag}-off", f"{tag}-web"]
    assert found(q=tag, state="DISABLED") == [f"{tag}-off"]
    assert found(q=tag, host="LOCALHOST") == [f"{tag}-off"]
    assert found(q=tag, actionType="http") == [f"{tag}-off", f"{tag}-web"]
    assert found(q=tag, actionType="storageQueue") == []
    assert found(q=names.collection) == [f"{tag}-off", f"{tag}-web"]  # the collection's name matches too
    assert found(q=tag + "%") == [] and found(q=tag[:-1] + "_") == []  # LIKE wildcards are plain characters
    item = http.get(SEARCH, params={"q": f"{tag}-web"}).json()["value"][0]
    assert item["actionType"] == "Http" and item["target"] == "http://127.0.0.1:9/web"  # no query: tokens hide there
    assert_arm_error(http.get(SEARCH, params={"host": "x" * 201}), 400, "BadRequest", "host")


def test_history_export_as_csv_and_json_matches_the_history_api(http, names) -> None:
    job = unique("export-")
    create_job(http, names, job, http_action(), startTime=later(), recurrence={"frequency": "Hour"})
    history = [h["properties"] for h in run_and_wait(http, names, job, 1)]

    as_json = http.get(export_path(names, job), params={"format": "json"})
    assert as_json.status_code == 200, as_json.text
    assert f'filename="{job}-history.json"' in as_json.headers["content-disposition"]
    as_csv = http.get(export_path(names, job), params={"format": "CSV"})
    assert as_csv.status_code == 200 and as_csv.headers["content-type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(as_csv.text)))
    for exported in (as_json.json()["value"], rows):
        assert [(e["status"].lower(), e["startTime"], e["message"]) for e in exported] == [
            (h["status"].lower(), h["startTime"], h["message"]) for h in history
        ]

    assert_arm_error(http.get(export_path(names, job), params={"format": "xml"}), 400, "BadRequest", "format")
    assert http.get(export_path(names, "no-such-job")).status_code == 404
