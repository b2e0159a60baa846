"""Job collections on the wire (docs/reference/arm-api.md#job-collections): create/replace/patch/delete, location
normalisation, plans and quotas, enable/disable, listing with paging."""

from __future__ import annotations

import copy
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import func, select
from starlette.testclient import TestClient
from support.api_calls import (
    assert_arm_error,
    call,
    collection_body,
    create_collection,
    create_job,
    delete,
    expect_ok,
    future,
    get,
    http_action,
    job_body,
    list_all,
    patch,
    post,
    put,
    unchanged,
)
from support.names import Names
from support.server_store import store, stored_job, update_job_row
from support.waiting import unique

from scheduler_emulator.domain.history import history_id
from scheduler_emulator.store import repository
from scheduler_emulator.store.models import JobHistoryRow, JobRow


@pytest.fixture
def http(app: TestClient) -> TestClient:
    """This module's requests go to the API in-process (conftest's ``app``): nothing process-level is under test."""
    return app


COLLECTION_TYPE = "Microsoft.Scheduler/jobCollections"

# ------------------------------------------------------------------------------------- create / replace


def test_create_answers_201_with_the_arm_shape(http, names):
    response = put(http, names.collection_path, {"location": "westus"})
    assert response.status_code == 201, response.text
    body = response.json()
    assert body == {
        "id": names.collection_path,
        "type": COLLECTION_TYPE,
        "name": names.collection,
        "location": "West US",
        "properties": {"sku": {"name": "Standard"}, "state": "Enabled"},
    }
    assert expect_ok(get(http, names.collection_path)) == body


def test_replace_answers_201_and_replaces(http, names):
    """The service answered a replace 201 too (recorded)."""
    create_collection(http, names, tags={"a": "1"}, quota={"maxJobCount": 5})
    response = put(http, names.collection_path, {"location": "eastus", "properties": {"sku": {"name": "P20Premium"}}})
    assert response.status_code == 201, response.text
    body = response.json()
    assert body["location"] == "East US"
    assert "tags" not in body
    assert body["properties"] == {"sku": {"name": "P20Premium"}, "state": "Enabled"}
    assert expect_ok(get(http, names.collection_path)) == body


def test_tags_sku_state_and_quota_are_echoed(http, names):
    quota = {"maxJobCount": 10, "maxJobOccurrence": 100, "maxRecurrence": {"frequency": "Hour", "interval": 2}}
    body = {
        "location": "West Europe",
        "tags": {"team": "Ops", "Env": "test"},
        "properties": {"sku": {"name": "p10premium"}, "state": "disabled", "quota": quota},
    }
    created = expect_ok(put(http, names.collection_path, body), 201)
    assert created["tags"] == {"team": "Ops", "Env": "test"}
    answered_quota = {**quota, "maxRecurrence": {"frequency": "hour", "interval": 2}}  # lower-case, as the service
    assert created["properties"] == {"sku": {"name": "p10premium"}, "state": "disabled", "quota": answered_quota}
    assert created["location"] == "West Europe"
    assert expect_ok(get(http, names.collection_path)) == created


def test_explicit_nulls_are_taken_as_omitted(http, names):
    body = {"location": "westus", "tags": None, "properties": {"sku": None, "state": None, "quota": None}}
    created = expect_ok(put(http, names.collection_path, body), 201)
    assert created["properties"] == {"sku": {"name": "Standard"}, "state": "Enabled"}
    assert "tags" not in created
    body["properties"] = {
        "sku": {"name": "Standard"},
        "quota": {"maxJobCount": 5, "maxJobOccurrence": None, "maxRecurrence": None},
    }
    replaced = expect_ok(put(http, names.collection_path, body), 201)
    assert replaced["properties"]["quota"] == {"maxJobCount": 5}
    assert expect_ok(get(http, names.collection_path)) == replaced


@pytest.mark.parametrize(
    ("sent", "stored"),
    [
        ("westus", "West US"),
        ("southeastasia", "Southeast Asia"),
        ("WESTEUROPE", "West Europe"),
        ("North Central US", "North Central US"),
        ("moon-base-1", "moon-base-1"),
        ("Local Lab", "Local Lab"),
    ],
)
def test_location_is_normalised_when_known_and_kept_otherwise(http, names, sent, stored):
    created = expect_ok(put(http, names.collection_path, {"location": sent}), 201)
    assert created["location"] == stored
    assert expect_ok(get(http, names.collection_path))["location"] == stored


@pytest.mark.parametrize(
    ("body", "target"),
    [
        ({}, "location"),
        ({"location": ""}, "location"),
        ({"location": "x" * 101}, "location"),
        ({"location": 12}, "location"),
        ({"location": "westus", "tags": ["a"]}, "tags"),
        ({"location": "westus", "properties": {"sku": {"name": "Gold"}}}, "properties.sku.name"),
        ({"location": "westus", "properties": {"state": "Deleted"}}, "properties.state"),
        ({"location": "westus", "properties": {"state": "Paused"}}, "properties.state"),
        ({"location": "westus", "properties": {"quota": {"maxJobCount": 0}}}, "properties.quota.maxJobCount"),
        ({"location": "westus", "properties": {"quota": {"maxJobCount": "many"}}}, "properties.quota.maxJobCount"),
        ({"location": "westus", "properties": {"quota": {"maxJobOccurrence": 0}}}, "properties.quota.maxJobOccurrence"),
        (
            {"location": "westus", "properties": {"quota": {"maxRecurrence": {"interval": 1}}}},
            "properties.quota.maxRecurrence.frequency",
        ),
        (
            {"location": "westus", "properties": {"quota": {"maxRecurrence": {"frequency": "Year"}}}},
            "properties.quota.maxRecurrence.frequency",
        ),
        (
            {"location": "westus", "properties": {"quota": {"maxRecurrence": {"frequency": "Hour", "interval": 0}}}},
            "properties.quota.maxRecurrence.interval",
        ),
    ],
)
def test_invalid_collection_is_refused_with_the_field_path(http, names, body, target):
    other = Names(subscription=names.subscription, resource_group=names.resource_group)
    create_collection(http, other, tags={"keep": "me"})
    with unchanged(http, names.collection_path, other.collection_path):
        assert_arm_error(put(http, names.collection_path, body), 400, "BadRequest", target)
        assert_arm_error(put(http, other.collection_path, body), 400, "BadRequest", target)


# ------------------------------------------------------------------------------------------------ patch


def test_patch_replaces_tags_as_a_whole_and_merges_properties(http, names):
    create_collection(http, names, tags={"a": "1", "b": "2"}, quota={"maxJobCount": 10})
    body = expect_ok(patch(http, names.collection_path, {"tags": {"c": "3"}}))
    assert body["tags"] == {"c": "3"}
    assert body["properties"]["quota"] == {"maxJobCount": 10}
    assert body["location"] == "West US"

    body = expect_ok(patch(http, names.collection_path, {"properties": {"quota": {"maxJobOccurrence": 7}}}))
    assert body["tags"] == {"c": "3"}  # not mentioned: kept
    assert body["properties"]["quota"] == {"maxJobCount": 10, "maxJobOccurrence": 7}
    assert body["properties"]["sku"] == {"name": "Standard"}

    body = expect_ok(patch(http, names.collection_path, {"properties": {"state": "Disabled"}}))
    assert body["properties"]["state"] == "Disabled"
    assert body["properties"]["quota"] == {"maxJobCount": 10, "maxJobOccurrence": 7}

    body = expect_ok(patch(http, names.collection_path, {"properties": {"quota": {"maxJobCount": None}}}))
    assert body["properties"]["quota"] == {"maxJobOccurrence": 7}
    body = expect_ok(patch(http, names.collection_path, {"properties": {"quota": None}}))
    assert "quota" not in body["properties"]

    body = expect_ok(patch(http, names.collection_path, {"location": "southeastasia"}))
    assert body["location"] == "Southeast Asia"
    assert body["tags"] == {"c": "3"}
    assert expect_ok(get(http, names.collection_path)) == body


def test_patch_of_missing_collection_is_404_and_creates_nothing(http, names):
    with unchanged(http, names.collection_path, names.rg_path + "/jobCollections"):
        assert_arm_error(patch(http, names.collection_path, {"location": "westus"}), 404, "ResourceNotFound")


def test_rejected_patch_changes_nothing(http, names):
    create_collection(http, names, tags={"a": "1"}, quota={"maxJobCount": 10})
    with unchanged(http, names.collection_path):
        assert_arm_error(
            patch(http, names.collection_path, {"properties": {"sku": {"name": "Gold"}}}),
            400,
            "BadRequest",
            "properties.sku.name",
        )
        assert_arm_error(
            patch(http, names.collection_path, {"properties": {"quota": {"maxJobCount": 51}}}),
            400,
            "BadRequest",
            "properties.quota.maxJobCount",
        )
        assert_arm_error(patch(http, names.collection_path, {"location": None}), 400, "BadRequest", "location")


# ------------------------------------------------------------------------------------------- quotas


@pytest.mark.parametrize(
    ("sku", "quota", "target"),
    [
        ("Standard", {"maxJobCount": 51}, "properties.quota.maxJobCount"),
        ("Free", {"maxJobCount": 6}, "properties.quota.maxJobCount"),
        ("P20Premium", {"maxJobCount": 1001}, "properties.quota.maxJobCount"),
        ("Free", {"maxRecurrence": {"frequency": "Minute", "interval": 59}}, "properties.quota.maxRecurrence"),
        ("Free", {"maxRecurrence": {"frequency": "Minute", "interval": 30}}, "properties.quota.maxRecurrence"),
    ],
)
def test_quota_may_not_loosen_the_plan(http, names, sku, quota, target):
    with unchanged(http, names.collection_path):
        assert_arm_error(
            put(http, names.collection_path, collection_body(sku=sku, quota=quota)), 400, "BadRequest", target
        )


@pytest.mark.parametrize(
    ("sku", "quota"),
    [
        ("Standard", {"maxJobCount": 50}),
        ("Free", {"maxJobCount": 5, "maxRecurrence": {"frequency": "Minute", "interval": 60}}),
        ("Free", {"maxRecurrence": {"frequency": "Day", "interval": 1}}),
        ("P20Premium", {"maxJobCount": 1000, "maxJobOccurrence": 3}),
    ],
)
def test_quota_may_tighten_the_plan(http, names, sku, quota):
    created = create_collection(http, names, sku=sku, quota=quota)
    answered = copy.deepcopy(quota)
    if "maxRecurrence" in answered:
        answered["maxRecurrence"]["frequency"] = answered["maxRecurrence"]["frequency"].lower()  # as the service
    assert created["properties"]["quota"] == answered


def test_quota_job_count_limits_jobs(http, names):
    create_collection(http, names, quota={"maxJobCount": 2})
    create_job(http, names, "one")
    create_job(http, names, "two")
    with unchanged(http, names.collection_path + "/jobs", names.job_path("three")):
        assert_arm_error(put(http, names.job_path("three"), job_body()), 409, "Conflict")
    assert put(http, names.job_path("two"), job_body(state="Disabled")).status_code == 200  # replace is fine


# ---------------------------------------------------------------------------------------------- Free plan


def test_only_one_free_collection_per_subscription(http, names):
    create_collection(http, names, sku="Free")
    second = Names(subscription=names.subscription)
    with unchanged(
        http,
        second.collection_path,
        f"/subscriptions/{names.subscription}/providers/Microsoft.Scheduler/jobCollections",
    ):
        assert_arm_error(put(http, second.collection_path, collection_body(sku="free")), 409, "Conflict")
    # A Standard one may not become Free either; the existing Free one may be replaced.
    create_collection(http, second, sku="Standard")
    with unchanged(http, second.collection_path):
        assert_arm_error(
            patch(http, second.collection_path, {"properties": {"sku": {"name": "Free"}}}), 409, "Conflict"
        )
    assert put(http, names.collection_path, collection_body(sku="Free", tags={"x": "y"})).status_code == 201
    # Another subscription has its own Free collection.
    create_collection(http, Names(), sku="Free")


def test_free_collection_holds_five_jobs(http, names):
    create_collection(http, names, sku="Free")
    for index in range(5):
        create_job(http, names, f"job{index}")
    with unchanged(http, names.collection_path + "/jobs", names.job_path("job5")):
        assert_arm_error(put(http, names.job_path("job5"), job_body()), 409, "Conflict")


@pytest.mark.parametrize(
    "recurrence",
    [
        {"frequency": "Minute", "interval": 30},
        {"frequency": "minute", "interval": 59},
        {"frequency": "Hour", "interval": 1, "schedule": {"minutes": [0, 30]}},
        {"frequency": "Day", "interval": 1, "schedule": {"hours": [9], "minutes": [0, 15]}},
    ],
)
def test_free_collection_refuses_recurrence_more_than_hourly(http, names, recurrence):
    create_collection(http, names, sku="Free")
    create_job(http, names, "existing")
    with unchanged(http, names.job_path("job"), names.job_path("existing")):
        assert_arm_error(put(http, names.job_path("job"), job_body(recurrence=recurrence)), 409, "Conflict")
        assert_arm_error(put(http, names.job_path("existing"), job_body(recurrence=recurrence)), 409, "Conflict")
        assert_arm_error(
            patch(http, names.job_path("existing"), {"properties": {"recurrence": recurrence}}), 409, "Conflict"
        )


@pytest.mark.parametrize(
    "recurrence",
    [
        {"frequency": "Minute", "interval": 60},
        {"frequency": "Hour", "interval": 1},
        {"frequency": "Day", "schedule": {"hours": [1, 2, 3]}},
    ],
)
def test_free_collection_accepts_hourly_or_slower(http, names, recurrence):
    create_collection(http, names, sku="Free")
    create_job(http, names, "job", job_body(recurrence=recurrence))


@pytest.mark.parametrize("interval", ["PT30S", "PT59M", "00:59:59", "PT15S"])
def test_free_collection_needs_retry_interval_of_an_hour(http, names, interval):
    create_collection(http, names, sku="Free")
    action = http_action(retryPolicy={"retryType": "Fixed", "retryInterval": interval, "retryCount": 2})
    with unchanged(http, names.job_path("job")):
        assert_arm_error(
            put(http, names.job_path("job"), job_body(action=action)),
            400,
            "BadRequest",
            "properties.action.retryPolicy.retryInterval",
        )
    for accepted in ("PT1H", "01:00:00", "P1D"):
        action["retryPolicy"]["retryInterval"] = accepted
        assert put(http, names.job_path("job"), job_body(action=action)).status_code in (200, 201)


@pytest.mark.parametrize(
    "authentication",
    [
        {"type": "Basic", "username": "u", "password": "p"},
        {"type": "ActiveDirectoryOAuth", "tenant": "t", "audience": "a", "clientId": "c", "secret": "s"},
    ],
)
def test_free_collection_refuses_authentication(http, names, authentication):
    create_collection(http, names, sku="Free")
    action = http_action(authentication=authentication)
    with unchanged(http, names.job_path("job")):
        assert_arm_error(put(http, names.job_path("job"), job_body(action=action)), 409, "Conflict")
    error_action = {**http_action(), "errorAction": http_action(authentication=authentication)}
    with unchanged(http, names.job_path("job")):
        assert_arm_error(put(http, names.job_path("job"), job_body(action=error_action)), 409, "Conflict")


@pytest.mark.parametrize(
    ("job", "reason"),
    [
        (job_body(recurrence={"frequency": "Minute", "interval": 5}), "too frequent"),
        (
            job_body(action=http_action(authentication={"type": "Basic", "username": "u", "password": "p"})),
            "authentication",
        ),
        (job_body(action=http_action(retryPolicy={"retryType": "Fixed", "retryInterval": "PT30S"})), "retry interval"),
    ],
    ids=lambda value: value if isinstance(value, str) else None,
)
def test_change_to_free_refused_when_jobs_break_its_rules(http, names, job, reason):
    create_collection(http, names, sku="Standard")
    create_job(http, names, "job", job)
    with unchanged(http, names.collection_path, names.job_path("job")):
        assert_arm_error(patch(http, names.collection_path, {"properties": {"sku": {"name": "Free"}}}), 409, "Conflict")
        assert_arm_error(put(http, names.collection_path, collection_body(sku="Free")), 409, "Conflict")


def test_change_to_free_refused_with_more_than_five_jobs(http, names):
    create_collection(http, names, sku="Standard")
    for index in range(6):
        create_job(http, names, f"job{index}")
    with unchanged(http, names.collection_path, names.collection_path + "/jobs"):
        assert_arm_error(patch(http, names.collection_path, {"properties": {"sku": {"name": "Free"}}}), 409, "Conflict")


def test_change_to_free_accepted_when_jobs_fit(http, names):
    create_collection(http, names, sku="Standard")
    create_job(http, names, "job")
    body = expect_ok(patch(http, names.collection_path, {"properties": {"sku": {"name": "Free"}}}))
    assert body["properties"]["sku"] == {"name": "Free"}


def test_tightening_quota_refused_when_jobs_break_it(http, names):
    create_collection(http, names)
    create_job(http, names, "a")
    create_job(http, names, "b", job_body(recurrence={"frequency": "Minute", "interval": 10}))
    with unchanged(http, names.collection_path):
        assert_arm_error(
            patch(http, names.collection_path, {"properties": {"quota": {"maxJobCount": 1}}}), 409, "Conflict"
        )
        assert_arm_error(
            patch(
                http,
                names.collection_path,
                {"properties": {"quota": {"maxRecurrence": {"frequency": "Hour", "interval": 1}}}},
            ),
            409,
            "Conflict",
        )


# ------------------------------------------------------------------------------------- enable / disable


def test_enable_and_disable_set_every_job_state_but_final_ones(http, backend, names):
    create_collection(http, names)
    for job in ("on", "off", "done", "broken"):
        create_job(http, names, job, job_body(state="Disabled" if job == "off" else "Enabled"))
    update_job_row(backend, names, "done", state="Completed", next_execution_time=None)
    update_job_row(backend, names, "broken", state="Faulted", next_execution_time=None)

    def states() -> dict[str, str]:
        jobs = expect_ok(get(http, names.collection_path + "/jobs"))["value"]
        return {j["name"].split("/")[1]: j["properties"]["state"] for j in jobs}

    response = post(http, names.collection_path + "/disable")
    assert response.status_code == 200, response.text
    assert expect_ok(get(http, names.collection_path))["properties"]["state"] == "Disabled"
    assert states() == {"on": "disabled", "off": "disabled", "done": "completed", "broken": "faulted"}
    assert "nextExecutionTime" not in expect_ok(get(http, names.job_path("on")))["properties"]["status"]

    response = post(http, names.collection_path + "/enable")
    assert response.status_code == 200, response.text
    assert expect_ok(get(http, names.collection_path))["properties"]["state"] == "Enabled"
    assert states() == {"on": "enabled", "off": "enabled", "done": "completed", "broken": "faulted"}
    status = expect_ok(get(http, names.job_path("off")))["properties"]["status"]
    assert status["nextExecutionTime"].endswith("Z")


@pytest.mark.parametrize("action", ["enable", "disable"])
def test_enable_disable_of_missing_collection_is_404(http, names, action):
    with unchanged(http, names.collection_path):
        assert_arm_error(post(http, names.collection_path + "/" + action), 404, "ResourceNotFound")


# ------------------------------------------------------------------------------------------------ delete


def test_delete_removes_the_collection_its_jobs_and_their_history(http, backend, names):
    create_collection(http, names)
    create_job(http, names, "job")
    job_id = stored_job(backend, names, "job")["id"]
    with store(backend).session() as session:
        now = datetime.now(UTC)
        repository.record_history(
            session,
            job_id,
            JobHistoryRow(
                history_id=history_id(now),
                start_time=now,
                end_time=now,
                expected_execution_time=now,
                action_name="MainAction",
                status="Completed",
                message="OK",
                retry_count=0,
                repeat_count=1,
            ),
        )
    assert len(expect_ok(get(http, names.job_path("job") + "/history"))["value"]) == 1

    response = delete(http, names.collection_path)
    assert response.status_code == 200, response.text
    assert_arm_error(get(http, names.collection_path), 404, "ResourceNotFound")
    assert_arm_error(get(http, names.job_path("job")), 404, "ResourceNotFound")
    with store(backend).session() as session:
        assert session.scalar(select(func.count()).select_from(JobRow).where(JobRow.id == job_id)) == 0
        assert (
            session.scalar(select(func.count()).select_from(JobHistoryRow).where(JobHistoryRow.job_id == job_id)) == 0
        )

    create_collection(http, names)  # the name is free again, and nothing of the old one comes back
    assert expect_ok(get(http, names.collection_path + "/jobs")) == {"value": []}
    assert_arm_error(get(http, names.job_path("job")), 404, "ResourceNotFound")


def test_delete_of_missing_collection_is_404(http, names):
    other = Names(subscription=names.subscription, resource_group=names.resource_group)
    create_collection(http, other)
    with unchanged(http, names.collection_path, names.rg_path + "/jobCollections"):
        assert_arm_error(delete(http, names.collection_path), 404, "ResourceNotFound")


# ------------------------------------------------------------------------------------------------ lists


def test_list_by_subscription_and_resource_group_with_paging(http, names):
    first_rg = [Names(subscription=names.subscription, resource_group=names.resource_group) for _ in range(3)]
    second_rg = [Names(subscription=names.subscription, resource_group=unique("rg-")) for _ in range(2)]
    for n in first_rg + second_rg:
        create_collection(http, n)
    create_collection(http, Names())  # another subscription: never listed

    subscription_list = f"/subscriptions/{names.subscription}/providers/Microsoft.Scheduler/jobCollections"
    items, links = list_all(http, subscription_list, **{"$top": "2"})
    assert [c["id"] for c in items] == [n.collection_path for n in first_rg + second_rg]
    assert len(links) == 2
    for link in links:
        assert link.startswith(str(http.base_url).rstrip("/") + "/subscriptions/"), link
        assert "api-version=" in link
    assert all(c["type"] == COLLECTION_TYPE for c in items)

    items, links = list_all(http, names.rg_path + "/jobCollections", **{"$top": "2"})
    assert [c["id"] for c in items] == [n.collection_path for n in first_rg]
    assert len(links) == 1

    whole = expect_ok(get(http, names.rg_path + "/jobCollections"))
    assert "nextLink" not in whole
    assert [c["name"] for c in whole["value"]] == [n.collection for n in first_rg]


def test_same_names_in_other_resource_groups_and_subscriptions_are_other_collections(http, names):
    same_rg_name = Names(
        subscription=names.subscription, resource_group=names.resource_group.upper() + "-2", collection=names.collection
    )
    other_subscription = Names(resource_group=names.resource_group, collection=names.collection)
    create_collection(http, names, location="westus")
    create_collection(http, same_rg_name, location="eastus")
    create_collection(http, other_subscription, location="northeurope")
    create_job(http, names, "only-here")
    for n, location in ((names, "West US"), (same_rg_name, "East US"), (other_subscription, "North Europe")):
        assert expect_ok(get(http, n.collection_path))["location"] == location
    assert_arm_error(get(http, same_rg_name.job_path("only-here")), 404, "ResourceNotFound")
    assert_arm_error(get(http, other_subscription.job_path("only-here")), 404, "ResourceNotFound")
    assert delete(http, same_rg_name.collection_path).status_code == 200
    assert expect_ok(get(http, names.job_path("only-here")))["name"] == f"{names.collection}/only-here"


def test_empty_lists_have_no_next_link(http, names):
    assert expect_ok(get(http, names.rg_path + "/jobCollections")) == {"value": []}
    assert expect_ok(
        get(http, f"/subscriptions/{names.subscription}/providers/Microsoft.Scheduler/jobCollections")
    ) == {"value": []}


@pytest.mark.parametrize(("param", "value"), [("$top", "0"), ("$top", "101"), ("$top", "ten"), ("$skip", "-1")])
def test_list_paging_parameters_are_checked(http, names, param, value):
    create_collection(http, names)
    with unchanged(http, names.rg_path + "/jobCollections", names.collection_path):
        assert_arm_error(get(http, names.rg_path + "/jobCollections", **{param: value}), 400, "BadRequest", param)


# ---------------------------------------------------------------------------------------- concurrency


def test_a_suspended_collection_is_accepted_echoed_and_runs_nothing_until_enabled(http, names):
    """The service answered a PUT with state Suspended 201 and echoed it (recorded): like a Disabled one, its
    jobs have no next run; PATCH, enable and disable work on it."""
    created = expect_ok(
        put(http, names.collection_path, {"location": "westus", "properties": {"state": "Suspended"}}), 201
    )
    assert created["properties"]["state"] == "Suspended"
    job = create_job(http, names, "job")
    assert job["properties"]["state"] == "enabled"
    assert "nextExecutionTime" not in job["properties"]["status"]
    patched = expect_ok(patch(http, names.collection_path, {"properties": {"state": "Enabled"}}))
    assert patched["properties"]["state"] == "Enabled"
    assert "nextExecutionTime" in expect_ok(get(http, names.job_path("job")))["properties"]["status"]
    expect_ok(patch(http, names.collection_path, {"properties": {"state": "suspended"}}))
    assert "nextExecutionTime" not in expect_ok(get(http, names.job_path("job")))["properties"]["status"]
    assert post(http, names.collection_path + "/disable").status_code == 200
    assert expect_ok(get(http, names.collection_path))["properties"]["state"] == "Disabled"
    expect_ok(put(http, names.collection_path, {"location": "westus", "properties": {"state": "Suspended"}}), 201)
    assert post(http, names.collection_path + "/enable").status_code == 200
    assert expect_ok(get(http, names.collection_path))["properties"]["state"] == "Enabled"
    assert "nextExecutionTime" in expect_ok(get(http, names.job_path("job")))["properties"]["status"]


def _concurrently(server, requests: list[tuple[str, str, dict[str, Any]]]) -> list[int]:
    """Send the requests at the same time, each on its own connection; their status codes."""
    barrier = threading.Barrier(len(requests))

    def send(request: tuple[str, str, dict[str, Any]]) -> int:
        method, path, body = request
        with server.client() as client:
            client.get("/")  # connect first, so that the requests below really overlap
            barrier.wait()
            return call(client, method, path, body).status_code

    with ThreadPoolExecutor(len(requests)) as pool:
        return list(pool.map(send, requests))


def test_concurrent_creates_of_one_collection_make_one(http, server, names):
    statuses = _concurrently(server, [("PUT", names.collection_path, collection_body())] * 8)
    assert statuses == [201] * 8, statuses  # create and replace alike (recorded)
    assert len(expect_ok(get(http, names.rg_path + "/jobCollections"))["value"]) == 1


def test_concurrent_free_collections_make_one(http, server, names):
    others = [Names(subscription=names.subscription) for _ in range(8)]
    statuses = _concurrently(server, [("PUT", n.collection_path, collection_body(sku="Free")) for n in others])
    assert sorted(statuses) == [201] + [409] * 7, statuses
    listing = f"/subscriptions/{names.subscription}/providers/Microsoft.Scheduler/jobCollections"
    assert len(expect_ok(get(http, listing))["value"]) == 1


def test_concurrent_job_creates_respect_the_job_count(http, server, names):
    create_collection(http, names, quota={"maxJobCount": 3})
    statuses = _concurrently(server, [("PUT", names.job_path(f"job{i}"), job_body()) for i in range(8)])
    assert sorted(statuses) == [201] * 3 + [409] * 5, statuses
    assert len(expect_ok(get(http, names.collection_path + "/jobs"))["value"]) == 3


def test_concurrent_creates_of_one_job_make_one(http, server, names):
    create_collection(http, names)
    statuses = _concurrently(server, [("PUT", names.job_path("job"), job_body())] * 8)
    assert sorted(statuses) == [200] * 7 + [201], statuses
    assert len(expect_ok(get(http, names.collection_path + "/jobs"))["value"]) == 1


def test_a_stored_job_that_todays_rules_refuse_does_not_break_collection_writes(http, backend, names):
    """A job stored before a stricter rule (here a tab in a header value) must not turn the collection's
    enable, disable or plan change into a 500: the dispatcher sets such a job aside, and so do these."""
    create_collection(http, names)
    create_job(http, names, "old", job_body(startTime=future()))
    definition = stored_job(backend, names, "old")["definition"]
    definition["action"]["request"]["headers"] = {"x-old": "tab\there"}
    update_job_row(backend, names, "old", definition=definition)
    assert post(http, names.collection_path + "/disable").status_code == 200
    assert post(http, names.collection_path + "/enable").status_code == 200
    changed = patch(http, names.collection_path, {"properties": {"sku": {"name": "P10Premium"}}})
    assert changed.status_code == 200, changed.text
    job = expect_ok(get(http, names.job_path("old")))
    assert job["properties"]["state"] == "enabled"
