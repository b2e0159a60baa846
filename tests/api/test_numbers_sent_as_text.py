"""A number sent as its text is answered as the number, on every surface, and on every read after: the
definition is parsed once and its canonical form stored (schemas/job.py, JobProperties.canonical). A public ARM
template (tfitzmac/AppServiceTemplates WebAppWithWebJobs, 2015) writes "maxJobCount": "10" and "interval": "1";
Azure answered 10 and 1. Templates: tests/e2e/test_deployments.py."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from support.api_calls import (
    collection_body,
    create_collection,
    expect_ok,
    future,
    get,
    http_action,
    job_properties,
    list_all,
    patch,
    put,
)
from support.classic_api import Classic
from support.classic_api import job as classic_job
from support.names import Names


@dataclass(frozen=True, kw_only=True)
class IntegerField:
    """One integer member of a job definition: properties that carry it as text, how to read it back, the number."""

    name: str
    sent: dict[str, Any]
    read: Callable[[dict[str, Any]], Any]
    number: Any


def _retry(count: str) -> dict[str, Any]:
    return {"retryType": "Fixed", "retryCount": count, "retryInterval": "PT1M"}


def _schedule(properties: dict[str, Any]) -> dict[str, Any]:
    return properties["recurrence"]["schedule"]  # type: ignore[no-any-return]


JOB_FIELDS = (
    IntegerField(
        name="recurrence.interval",
        sent={"recurrence": {"frequency": "Minute", "interval": "10"}},
        read=lambda p: p["recurrence"]["interval"],
        number=10,
    ),
    IntegerField(
        name="recurrence.count",
        sent={"recurrence": {"frequency": "Minute", "count": "7"}},
        read=lambda p: p["recurrence"]["count"],
        number=7,
    ),
    IntegerField(
        name="schedule.minutes",
        sent={"recurrence": {"frequency": "Hour", "schedule": {"minutes": ["15", "45"]}}},
        read=lambda p: _schedule(p)["minutes"],
        number=[15, 45],
    ),
    IntegerField(
        name="schedule.minutes as one scalar",
        sent={"recurrence": {"frequency": "Hour", "schedule": {"minutes": "15"}}},
        read=lambda p: _schedule(p)["minutes"],
        number=15,
    ),
    IntegerField(
        name="schedule.hours",
        sent={"recurrence": {"frequency": "Day", "schedule": {"hours": ["6", "18"]}}},
        read=lambda p: _schedule(p)["hours"],
        number=[6, 18],
    ),
    IntegerField(
        name="schedule.monthDays",
        sent={"recurrence": {"frequency": "Month", "schedule": {"monthDays": ["1", "-1"]}}},
        read=lambda p: _schedule(p)["monthDays"],
        number=[1, -1],
    ),
    IntegerField(
        name="schedule.monthlyOccurrences[].occurrence",
        sent={
            "recurrence": {
                "frequency": "Month",
                "schedule": {"monthlyOccurrences": [{"day": "Monday", "occurrence": "-1"}]},
            }
        },
        read=lambda p: [(e["occurrence"], e["Occurrence"]) for e in _schedule(p)["monthlyOccurrences"]],
        number=[(-1, -1)],
    ),
    IntegerField(
        name="schedule.monthlyOccurrences[].Occurrence",
        sent={
            "recurrence": {
                "frequency": "Month",
                "schedule": {"monthlyOccurrences": [{"day": "Friday", "Occurrence": "2"}]},
            }
        },
        read=lambda p: [(e["occurrence"], e["Occurrence"]) for e in _schedule(p)["monthlyOccurrences"]],
        number=[(2, 2)],
    ),
    IntegerField(
        name="action.retryPolicy.retryCount",
        sent={"action": http_action(retryPolicy=_retry("4"))},
        read=lambda p: p["action"]["retryPolicy"]["retryCount"],
        number=4,
    ),
    IntegerField(
        name="action.errorAction.retryPolicy.retryCount",
        sent={"action": {**http_action(), "errorAction": http_action(retryPolicy=_retry("2"))}},
        read=lambda p: p["action"]["errorAction"]["retryPolicy"]["retryCount"],
        number=2,
    ),
)
BY_NAME = [pytest.param(field, id=field.name) for field in JOB_FIELDS]


@pytest.fixture
def collection(http: httpx.Client, names: Names) -> Names:
    create_collection(http, names)
    return names


def _listed(http: httpx.Client, names: Names, job: str) -> dict[str, Any]:
    items, _ = list_all(http, f"{names.collection_path}/jobs")
    return next(item["properties"] for item in items if item["name"].endswith(f"/{job}"))


@pytest.mark.parametrize("field", BY_NAME)
def test_arm_put_answers_the_number_and_so_do_get_and_list(
    http: httpx.Client, collection: Names, field: IntegerField
) -> None:
    created = expect_ok(put(http, collection.job_path("j"), {"properties": job_properties(**field.sent)}), 201)
    assert field.read(created["properties"]) == field.number
    assert field.read(expect_ok(get(http, collection.job_path("j")))["properties"]) == field.number
    assert field.read(_listed(http, collection, "j")) == field.number


@pytest.mark.parametrize("field", BY_NAME)
def test_arm_patch_answers_the_number_and_so_does_get(
    http: httpx.Client, collection: Names, field: IntegerField
) -> None:
    expect_ok(put(http, collection.job_path("j"), {"properties": job_properties()}), 201)
    patched = expect_ok(patch(http, collection.job_path("j"), {"properties": field.sent}))
    assert field.read(patched["properties"]) == field.number
    assert field.read(expect_ok(get(http, collection.job_path("j")))["properties"]) == field.number


def test_arm_patch_with_the_same_number_as_text_keeps_the_series(http: httpx.Client, collection: Names) -> None:
    """A PATCH that sends the stored interval as its text changes nothing of the timing."""
    created = expect_ok(put(http, collection.job_path("j"), {"properties": job_properties()}), 201)
    patched = expect_ok(patch(http, collection.job_path("j"), {"properties": {"recurrence": {"interval": "1"}}}))
    assert patched["properties"]["recurrence"]["interval"] == 1
    assert patched["properties"]["status"] == created["properties"]["status"]


QUOTA_FIELDS = (
    ("maxJobCount", "10", 10),
    ("maxJobOccurrence", "100", 100),
)


@pytest.mark.parametrize(("member", "text", "number"), QUOTA_FIELDS)
def test_collection_quota_numbers_sent_as_text_are_answered_as_numbers(
    http: httpx.Client, names: Names, member: str, text: str, number: int
) -> None:
    created = expect_ok(put(http, names.collection_path, collection_body(quota={member: text})), 201)
    assert created["properties"]["quota"][member] == number
    assert expect_ok(get(http, names.collection_path))["properties"]["quota"][member] == number
    patched = expect_ok(patch(http, names.collection_path, {"properties": {"quota": {member: str(number + 1)}}}))
    assert patched["properties"]["quota"][member] == number + 1
    listed = expect_ok(
        get(
            http,
            f"/subscriptions/{names.subscription}/resourceGroups/{names.resource_group}"
            "/providers/Microsoft.Scheduler/jobCollections",
        )
    )["value"]
    assert [c["properties"]["quota"][member] for c in listed] == [number + 1]


def test_collection_max_recurrence_interval_sent_as_text_is_answered_as_a_number(
    http: httpx.Client, names: Names
) -> None:
    quota = {"maxRecurrence": {"frequency": "Minute", "interval": "5"}}
    created = expect_ok(put(http, names.collection_path, collection_body(quota=quota)), 201)
    assert created["properties"]["quota"]["maxRecurrence"] == {"frequency": "minute", "interval": 5}
    got = expect_ok(get(http, names.collection_path))
    assert got["properties"]["quota"]["maxRecurrence"] == {"frequency": "minute", "interval": 5}


@pytest.mark.parametrize("field", BY_NAME)
def test_classic_put_patch_and_get_answer_the_number(http: httpx.Client, field: IntegerField) -> None:
    classic = Classic(http)
    classic.create_collection()
    body = {**classic_job(future()), **field.sent}
    created = classic.put_job("j", body)
    assert created.status_code == 201, created.text
    assert field.read(created.json()) == field.number
    got = classic.job_call("GET", f"{classic.jobs_path}/j")
    assert field.read(got.json()) == field.number
    classic.put_job("k", classic_job(future()))
    patched = classic.job_call("PATCH", f"{classic.jobs_path}/k", field.sent)
    assert patched.status_code == 200, patched.text
    assert field.read(patched.json()) == field.number
    assert field.read(classic.job_call("GET", f"{classic.jobs_path}/k").json()) == field.number
