"""Job history on the wire (docs/reference/arm-api.md#history): entries written through the project's own store (jobs do
not fire during these tests), then listed: newest first, paging with absolute nextLinks, status filter, shape."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import func, select
from starlette.testclient import TestClient
from support.api_calls import (
    assert_arm_error,
    create_collection,
    create_job,
    delete,
    expect_ok,
    get,
    list_all,
    unchanged,
)
from support.server_store import store, stored_job
from support.times import iso_seconds

from scheduler_emulator.domain.history import history_id
from scheduler_emulator.domain.states import ActionName, AttemptStatus
from scheduler_emulator.store import repository
from scheduler_emulator.store.dispatch_batches import batches_for
from scheduler_emulator.store.dispatch_records import AttemptRecord
from scheduler_emulator.store.models import JobHistoryRow


@pytest.fixture
def http(app: TestClient) -> TestClient:
    """This module's requests go to the API in-process (conftest's ``app``): nothing process-level is under test."""
    return app


HISTORY_TYPE = "Microsoft.Scheduler/jobCollections/jobs/history"
BASE = datetime(2024, 3, 1, 12, 0, 0, tzinfo=UTC)
STATUSES = ["Completed", "Failed", "Failed", "Postponed", "Completed", "Failed", "Completed"]


def record(backend, names, job: str, statuses: list[str], start: datetime = BASE) -> list[str]:
    """One history entry per status, a minute apart, oldest first; returns their history ids."""
    job_id = stored_job(backend, names, job)["id"]
    ids = []
    with store(backend).session() as session:
        for index, status in enumerate(statuses):
            moment = start + timedelta(minutes=index)
            entry = JobHistoryRow(
                history_id=history_id(moment),
                start_time=moment,
                end_time=moment + timedelta(seconds=2),
                expected_execution_time=moment - timedelta(milliseconds=500),
                action_name="ErrorAction" if status == "Failed" and index == 2 else "MainAction",
                status=status,
                message=f"entry {index}: {status}",
                retry_count=index % 3,
                repeat_count=index + 1,
            )
            repository.record_history(session, job_id, entry)
            ids.append(entry.history_id)
            session.flush()
    return ids


@pytest.fixture
def job(http, backend, names) -> list[str]:
    """A job with seven history entries; their ids, oldest first."""
    create_collection(http, names)
    create_job(http, names, "job")
    return record(backend, names, "job", STATUSES)


def history_path(names, job: str = "job") -> str:
    return names.job_path(job) + "/history"


def test_history_lists_newest_first(http, names, job):
    body = expect_ok(get(http, history_path(names)))
    assert "nextLink" not in body
    assert [entry["name"].rsplit("/", 1)[1] for entry in body["value"]] == list(reversed(job))
    assert [entry["properties"]["message"] for entry in body["value"]] == [
        f"entry {i}: {s}" for i, s in reversed(list(enumerate(STATUSES)))
    ]
    # history ids sort newest first as text
    ids = [entry["name"].rsplit("/", 1)[1] for entry in body["value"]]
    assert ids == sorted(ids)
    assert len(set(ids)) == len(ids)


def test_history_entry_shape(http, names, job):
    newest = expect_ok(get(http, history_path(names)))["value"][0]
    history = job[-1]
    moment = BASE + timedelta(minutes=6)
    assert newest == {
        "id": f"{names.job_path('job')}/history/{history}",
        "type": HISTORY_TYPE,
        "name": f"{names.collection}/job/{history}",
        "properties": {
            "startTime": iso_seconds(moment),
            "endTime": iso_seconds(moment + timedelta(seconds=2)),
            "expectedExecutionTime": (moment - timedelta(milliseconds=500)).isoformat().replace("+00:00", "Z"),
            "actionName": "MainAction",
            "status": "Completed",
            "message": "entry 6: Completed",
            "retryCount": 0,
            "repeatCount": 7,
        },
    }
    third = expect_ok(get(http, history_path(names)))["value"][4]
    assert third["properties"]["actionName"] == "ErrorAction"
    assert third["properties"]["retryCount"] == 2


def test_entries_of_different_jobs_may_share_a_history_id(http, backend, names):
    """Dispatcher processes sharing one database can stamp entries of different jobs in the same tick with the
    same id (a table-wide unique key refused the second, and that occurrence never finished): each is
    stored and listed under its own job, whether written in one dispatcher batch or one at a time."""
    create_collection(http, names)
    for job in ("first", "second", "third"):
        create_job(http, names, job)
    shared = history_id(BASE)
    job_ids = {job: stored_job(backend, names, job)["id"] for job in ("first", "second", "third")}

    def entry(job: str) -> AttemptRecord:
        return AttemptRecord(
            job_id=job_ids[job], history_id=shared, start_time=BASE, end_time=BASE, expected_time=BASE,
            action_name=ActionName.MainAction, status=AttemptStatus.Completed, message=job, retry_count=0,
            repeat_count=1,
        )  # fmt: skip

    database = store(backend)
    batches = batches_for(database.dialect)
    with database.session() as session:  # one dispatcher batch: the first two jobs
        batches.add_history(session, [entry("first"), entry("second")])
    with database.session() as session:  # another process, a moment later
        batches.add_history(session, [entry("third")])
    for job in ("first", "second", "third"):
        [listed] = expect_ok(get(http, history_path(names, job)))["value"]
        assert listed["name"] == f"{names.collection}/{job}/{shared}"
        assert listed["properties"]["message"] == job


def test_history_keeps_the_creation_casing_of_names(http, backend, names):
    names.collection = "Jc-" + names.collection
    create_collection(http, names)
    create_job(http, names, "MixedCase")
    [history] = record(backend, names, "MixedCase", ["Completed"])
    shouted = names.job_path("MIXEDCASE").upper() + "/HISTORY"
    entry = expect_ok(get(http, shouted))["value"][0]
    assert entry["id"] == f"{names.job_path('MixedCase')}/history/{history}"
    assert entry["name"] == f"{names.collection}/MixedCase/{history}"


def test_history_pages_with_absolute_next_links(http, names, job):
    items, links = list_all(http, history_path(names), **{"$top": "3"})
    assert [entry["name"].rsplit("/", 1)[1] for entry in items] == list(reversed(job))
    assert len(links) == 2
    for link in links:
        assert link.startswith(str(http.base_url).rstrip("/") + history_path(names) + "?"), link
        assert "api-version=" in link
    page = expect_ok(get(http, history_path(names), **{"$top": "2", "$skip": "5"}))
    assert [entry["name"].rsplit("/", 1)[1] for entry in page["value"]] == [job[1], job[0]]
    assert "nextLink" not in page
    page = expect_ok(get(http, history_path(names), **{"$skip": "7"}))
    assert page == {"value": []}


def test_next_link_follows_the_requests_host(http, names, job):
    response = get(http, history_path(names), **{"$top": "2"})
    assert response.status_code == 200
    proxied = http.get(
        history_path(names),
        params={"api-version": "2016-03-01", "$top": "2"},
        headers={"host": "scheduler.example.test:8443"},
    )
    assert proxied.status_code == 200, proxied.text
    assert proxied.json()["nextLink"].startswith("https://scheduler.example.test:8443" + history_path(names) + "?")


def test_history_filters_by_status(http, names, job):
    def statuses(expression: str) -> list[str]:
        body = expect_ok(get(http, history_path(names), **{"$filter": expression}))
        return [entry["properties"]["status"] for entry in body["value"]]

    assert statuses("status eq 'Failed'") == ["Failed", "Failed", "Failed"]
    assert statuses("status eq 'completed'") == ["Completed"] * 3
    assert statuses("status eq 'Postponed'") == ["Postponed"]
    assert statuses("status eq Completed") == ["Completed"] * 3  # bare, as the .NET SDK sent it (recorded)
    failed, links = list_all(http, history_path(names), **{"$filter": "status eq 'Failed'", "$top": "2"})
    assert [entry["properties"]["message"] for entry in failed] == [
        "entry 5: Failed",
        "entry 2: Failed",
        "entry 1: Failed",
    ]
    assert len(links) == 1
    for bad in (
        "status eq 'Broken'",
        "state eq 'Failed'",
        "status eq Broken",
        "status eq 'Failed",
        "status gt 'Failed'",
    ):
        with unchanged(http, history_path(names)):
            assert_arm_error(get(http, history_path(names), **{"$filter": bad}), 400, "BadRequest", "$filter")


@pytest.mark.parametrize(("param", "value"), [("$top", "0"), ("$top", "101"), ("$top", "many"), ("$skip", "-1")])
def test_history_paging_parameters_are_checked(http, names, job, param, value):
    with unchanged(http, history_path(names)):
        assert_arm_error(get(http, history_path(names), **{param: value}), 400, "BadRequest", param)


def test_history_top_accepts_1_to_100(http, backend, names):
    create_collection(http, names)
    create_job(http, names, "job")
    record(backend, names, "job", ["Failed"] * 101)
    assert len(expect_ok(get(http, history_path(names), **{"$top": "1"}))["value"]) == 1
    page = expect_ok(get(http, history_path(names), **{"$top": "100"}))
    assert len(page["value"]) == 100 and "nextLink" in page
    whole = expect_ok(get(http, history_path(names)))  # default page size is at most 100
    assert len(whole["value"]) <= 100 and "nextLink" in whole
    items, _ = list_all(http, history_path(names))
    assert len(items) == 101


def test_history_of_one_job_only(http, backend, names, job):
    create_job(http, names, "other")
    [other] = record(backend, names, "other", ["Completed"], start=BASE + timedelta(hours=1))
    assert [e["name"].rsplit("/", 1)[1] for e in expect_ok(get(http, history_path(names, "other")))["value"]] == [other]
    assert len(expect_ok(get(http, history_path(names)))["value"]) == len(STATUSES)


def test_empty_history(http, names):
    create_collection(http, names)
    create_job(http, names, "job")
    assert expect_ok(get(http, history_path(names))) == {"value": []}


def test_history_of_missing_job_or_collection_is_404(http, names):
    assert_arm_error(get(http, history_path(names)), 404, "ResourceNotFound")
    create_collection(http, names)
    assert_arm_error(get(http, history_path(names)), 404, "ResourceNotFound")


def test_deleting_a_job_deletes_its_history(http, backend, names, job):
    job_id = stored_job(backend, names, "job")["id"]
    assert delete(http, names.job_path("job")).status_code == 200
    with store(backend).session() as session:
        remaining = session.scalar(
            select(func.count()).select_from(JobHistoryRow).where(JobHistoryRow.job_id == job_id)
        )
    assert remaining == 0
    create_job(http, names, "job")  # a new job of the same name starts with no history
    assert expect_ok(get(http, history_path(names))) == {"value": []}
