"""Durations written for the client that reads them (api/client_dialects.py), told apart by the
User-Agent each official client really sends, and ``Occurrence`` as the key of monthly occurrences.
Raw HTTP here, with each client's User-Agent; tests/e2e/test_client_matrix.py drives the clients
themselves."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.testclient import TestClient
from support.api_calls import call, create_collection, create_job, expect_ok, get, http_action, job_body, list_all
from support.names import Names


@pytest.fixture
def http(app: TestClient) -> TestClient:
    """This module's requests go to the API in-process (conftest's ``app``): nothing process-level is under test."""
    return app


# What each client sends (printed by each SDK against a recording server).
UA_2_0_0 = (
    "python/3.11.7 (Linux-6.1-x86_64-with-glibc2.36) msrest/0.7.1 msrest_azure/0.6.4.post1 "
    "azure-mgmt-scheduler/2.0.0 Azure-SDK-For-Python"
)
UA_1_1_3 = "python/3.11.7 (Linux) msrest/0.7.1 msrest_azure/0.4.34 schedulermanagementclient/1.1.3 Azure-SDK-For-Python"
UA_1_1_2 = "python/3.11.7 (Linux) msrest/0.7.1 msrest_azure/0.4.34 schedulermanagementclient/1.1.2 Azure-SDK-For-Python"
UA_1_0_0 = "python/3.5.2 (Linux) requests/2.11 msrest/0.4.4 msrest_azure/0.4.3 schedulermanagementclient/1.0.0"
UA_7_0_0 = "azsdk-python-mgmt-scheduler/7.0.0 Python/3.11.7 (Linux-6.1-x86_64-with-glibc2.36)"
UA_CURL = "curl/8.5.0"

SERVICE_BUS_ERROR_ACTION = {
    "type": "ServiceBusQueue",
    "serviceBusQueueMessage": {
        "namespace": "localns",
        "queueName": "q",
        "message": "hi",
        "brokeredMessageProperties": {"timeToLive": "00:05:00"},
        "authentication": {"type": "SharedAccessKey", "sasKeyName": "Send", "sasKey": "sb-secret"},
    },
    "retryPolicy": {"retryType": "Fixed", "retryCount": 1, "retryInterval": "PT30S"},
}


@pytest.fixture
def collection(http, names) -> Names:
    create_collection(http, names)
    return names


def as_client(http, agent: str | None, method: str, path: str, body: Any = None, **params: str):
    headers = {"user-agent": agent} if agent else {}
    return call(http, method, path, body, params=params or None, headers=headers)


def durations(job: dict[str, Any]) -> tuple[str, str, str]:
    """(retryInterval, error action's retryInterval, error action's timeToLive) of a job as answered."""
    action = job["properties"]["action"]
    error = action["errorAction"]
    return (
        action["retryPolicy"]["retryInterval"],
        error["retryPolicy"]["retryInterval"],
        error["serviceBusQueueMessage"]["brokeredMessageProperties"]["timeToLive"],
    )


def job_with_durations(retry: str = "1.02:03:04") -> dict[str, Any]:
    policy = {"retryType": "Fixed", "retryCount": 2, "retryInterval": retry}
    action = {**http_action(retryPolicy=policy), "errorAction": SERVICE_BUS_ERROR_ACTION}
    return job_body(action=action)


SENT = ("1.02:03:04", "PT30S", "00:05:00")
ISO = ("P1DT2H3M4S", "PT30S", "PT5M")
SDK_TIMESPAN = ("30.02:03:04", "00:00:30", "00:05:00")  # days x30, two-digit hours


@pytest.mark.parametrize(
    ("agent", "one_job", "job_list"),
    [
        pytest.param(None, SENT, SENT, id="no-user-agent"),
        pytest.param(UA_CURL, SENT, SENT, id="curl"),
        pytest.param(UA_2_0_0, SDK_TIMESPAN, ISO, id="2.0.0"),
        pytest.param(UA_1_1_3, SDK_TIMESPAN, ISO, id="1.1.3"),
        pytest.param(UA_1_1_2, ISO, ISO, id="1.1.2"),
        pytest.param(UA_1_0_0, ISO, ISO, id="1.0.0"),
        pytest.param(UA_7_0_0, ISO, ISO, id="7.0.0"),
    ],
)
def test_each_client_generation_reads_durations_in_its_own_format(http, collection, agent, one_job, job_list):
    create_job(http, collection, "job", job_with_durations())
    assert durations(expect_ok(as_client(http, agent, "GET", collection.job_path("job")))) == one_job
    listed = expect_ok(as_client(http, agent, "GET", collection.collection_path + "/jobs"))["value"]
    assert [durations(job) for job in listed] == [job_list]
    patched = as_client(http, agent, "PATCH", collection.job_path("job"), {"properties": {"state": "Enabled"}})
    assert durations(expect_ok(patched)) == one_job
    replaced = as_client(http, agent, "PUT", collection.job_path("job"), job_with_durations(one_job[0]))
    assert durations(expect_ok(replaced)) == one_job


@pytest.mark.parametrize("agent", [UA_2_0_0, UA_1_1_3])
def test_days_from_the_thirtieths_generation_mean_what_it_meant(http, collection, agent):
    # Their patch.py writes 2 days as 60.00:00:00 and reads 60.00:00:00 back as 2 days.
    body = job_with_durations("60.00:00:00")
    assert durations(expect_ok(as_client(http, agent, "PUT", collection.job_path("job"), body), 201))[0] == (
        "60.00:00:00"
    )
    assert durations(expect_ok(as_client(http, agent, "GET", collection.job_path("job"))))[0] == "60.00:00:00"
    # Every other client sees 2 days: curl in the writer's format, the ISO clients in ISO-8601.
    assert durations(expect_ok(as_client(http, UA_CURL, "GET", collection.job_path("job"))))[0] == "2.00:00:00"
    assert durations(expect_ok(as_client(http, UA_7_0_0, "GET", collection.job_path("job"))))[0] == "P2D"
    listed = expect_ok(as_client(http, agent, "GET", collection.collection_path + "/jobs"))["value"]
    assert durations(listed[0])[0] == "P2D"
    # The same in a PATCH, including the error action's Service Bus time to live.
    ttl = {"brokeredMessageProperties": {"timeToLive": "30.01:00:00"}}
    patch = {"properties": {"action": {"errorAction": {"serviceBusQueueMessage": ttl}}}}
    expect_ok(as_client(http, agent, "PATCH", collection.job_path("job"), patch))
    assert durations(expect_ok(as_client(http, UA_CURL, "GET", collection.job_path("job"))))[2] == "1.01:00:00"


def test_limits_apply_to_the_length_the_client_meant(http, collection):
    # 600.00:00:00 is 20 days from 2.0.0 and 600 days (over 18 months) from anyone else.
    accepted = as_client(http, UA_2_0_0, "PUT", collection.job_path("ok"), job_with_durations("600.00:00:00"))
    assert durations(expect_ok(accepted, 201))[0] == "600.00:00:00"
    assert durations(expect_ok(get(http, collection.job_path("ok"))))[0] == "20.00:00:00"
    refused = as_client(http, UA_CURL, "PUT", collection.job_path("no"), job_with_durations("600.00:00:00"))
    assert refused.status_code == 400
    assert refused.json()["error"]["target"] == "properties.action.retryPolicy.retryInterval"
    # 16500.00:00:00 from 2.0.0 is 550 days: over 18 months for it too.
    too_long = as_client(http, UA_2_0_0, "PUT", collection.job_path("no"), job_with_durations("16500.00:00:00"))
    assert too_long.status_code == 400
    assert get(http, collection.job_path("no")).status_code == 404


@pytest.mark.parametrize("key", ["occurrence", "Occurrence"])
@pytest.mark.parametrize("agent", [None, UA_2_0_0, UA_7_0_0])
def test_monthly_occurrences_answer_with_the_spec_key(http, collection, key, agent):
    schedule = {"monthlyOccurrences": [{"day": "Friday", key: -1}, {"day": "Monday"}, {"day": "Sunday", key: 2}]}
    recurrence = {"frequency": "Month", "interval": 1, "schedule": schedule}
    # both keys, same value (the service wrote "occurrence", the SDKs read "Occurrence"); days as the service
    answered = [
        {"day": "friday", "Occurrence": -1, "occurrence": -1},
        {"day": "monday"},
        {"day": "sunday", "Occurrence": 2, "occurrence": 2},
    ]
    created = expect_ok(as_client(http, agent, "PUT", collection.job_path("job"), job_body(recurrence=recurrence)), 201)
    assert created["properties"]["recurrence"]["schedule"]["monthlyOccurrences"] == answered
    got = expect_ok(as_client(http, agent, "GET", collection.job_path("job")))
    assert got["properties"]["recurrence"]["schedule"]["monthlyOccurrences"] == answered
    listed, _ = list_all(http, collection.collection_path + "/jobs")
    assert listed[0]["properties"]["recurrence"]["schedule"]["monthlyOccurrences"] == answered
