"""Emulator extensions (docs/reference/test-support.md): recurrence preview and health."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient
from support.api_client import API
from support.server import ServerProcess


@pytest.fixture
def http(app: TestClient) -> TestClient:
    """This module's requests go to the API in-process (conftest's ``app``): nothing process-level is under test."""
    return app


PREVIEW = "/_emulator/recurrence/preview"


def test_preview_follows_the_past_start_rule_of_the_docs(http) -> None:
    response = http.post(
        PREVIEW,
        json={
            "startTime": "2015-04-07T14:00:00Z",
            "recurrence": {"frequency": "Day", "interval": 2},
            "now": "2015-04-08T13:00:00Z",
            "count": 3,
        },
    )
    assert response.status_code == 200
    assert response.json() == {
        "occurrences": ["2015-04-09T14:00:00Z", "2015-04-11T14:00:00Z", "2015-04-13T14:00:00Z"],
        "complete": False,
    }


def test_preview_reports_a_complete_finite_series(http) -> None:
    response = http.post(
        PREVIEW,
        json={
            "startTime": "2030-01-01T08:00:00-08:00",
            "now": "2029-12-31T00:00:00Z",
            "recurrence": {"frequency": "Week", "count": 3, "schedule": {"weekDays": ["Monday"], "hours": [9]}},
        },
    )
    assert response.status_code == 200
    # 2030-01-01 is a Tuesday; Mondays at 09:00 in -08:00 are 17:00 UTC.
    assert response.json() == {
        "occurrences": ["2030-01-07T17:00:00Z", "2030-01-14T17:00:00Z", "2030-01-21T17:00:00Z"],
        "complete": True,
    }


def test_preview_of_a_one_time_job_in_the_future(http) -> None:
    response = http.post(PREVIEW, json={"startTime": "2030-05-01T10:00:00Z", "now": "2030-04-01T00:00:00Z"})
    assert response.json() == {"occurrences": ["2030-05-01T10:00:00Z"], "complete": True}


def test_preview_defaults_to_ten_occurrences_from_now(http) -> None:
    response = http.post(PREVIEW, json={"recurrence": {"frequency": "Hour"}})
    assert response.status_code == 200
    body = response.json()
    assert len(body["occurrences"]) == 10 and body["complete"] is False


@pytest.mark.parametrize(
    ("body", "target"),
    [
        ({"recurrence": {"frequency": "Day", "interval": 549}}, "recurrence.interval"),
        ({"recurrence": {"frequency": "Fortnight"}}, "recurrence.frequency"),
        ({"recurrence": {"frequency": "Day", "schedule": {"weekDays": ["Monday"]}}}, "recurrence.schedule.weekDays"),
        ({"recurrence": {"frequency": "Hour", "schedule": {"minutes": [60]}}}, "recurrence.schedule.minutes[0]"),
        ({"recurrence": {"frequency": "Hour"}, "count": 1001}, "count"),
        ({"recurrence": {"frequency": "Hour"}, "count": 0}, "count"),
        (
            {"recurrence": {"frequency": "Hour", "endTime": "2020-01-01T00:00:00Z"}, "now": "2021-01-01T00:00:00Z"},
            "recurrence.endTime",
        ),
        ({"startTime": "2040-01-01T00:00:00Z", "now": "2030-01-01T00:00:00Z"}, "startTime"),
        ({"startTime": "yesterday"}, "startTime"),
    ],
)
def test_preview_validates_like_a_job_put(http, body: dict, target: str) -> None:
    response = http.post(PREVIEW, json=body)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "BadRequest"
    assert error["target"] == target
    assert target in error["message"]


def test_preview_refuses_malformed_json(http) -> None:
    response = http.post(PREVIEW, content=b"{not json", headers={"content-type": "application/json"})
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "InvalidRequestContent"


def test_preview_needs_no_api_version(http) -> None:
    assert http.post(PREVIEW, json={}, params={"api-version": API}).status_code == 200
    assert http.post(PREVIEW, json={}).status_code == 200


def test_health_reports_store_and_dispatcher(server: ServerProcess, backend) -> None:
    with server.client() as client:  # the started process, whose dispatcher runs
        response = client.get("/_emulator/health")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok"
    assert body["database"] == backend.name
    assert body["dispatcher"] == "running"
    assert body["version"]
