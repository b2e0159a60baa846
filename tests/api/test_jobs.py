"""Jobs on the wire (docs/reference/arm-api.md#jobs): the shape, every validation rule with its field path, quotas,
final states, PATCH as JSON merge, write-only secrets, echoing the client's values, lists."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from starlette.testclient import TestClient
from support.api_calls import (
    LOOPBACK_URI,
    assert_arm_error,
    call,
    create_collection,
    create_job,
    delete,
    expect_ok,
    future,
    get,
    http_action,
    iso,
    job_body,
    job_properties,
    list_all,
    patch,
    post,
    put,
    unchanged,
)
from support.certificates import pfx as pfx_base64
from support.certificates import self_signed
from support.certificates import thumbprint as sha1_thumbprint
from support.names import Names
from support.server_store import stored_job, update_job_row


@pytest.fixture
def http(app: TestClient) -> TestClient:
    """This module's requests go to the API in-process (conftest's ``app``): nothing process-level is under test."""
    return app


JOB_TYPE = "Microsoft.Scheduler/jobCollections/jobs"

STORAGE_QUEUE = {
    "type": "StorageQueue",
    "queueMessage": {
        "storageAccount": "devstoreaccount1",
        "queueName": "jobs",
        "sasToken": "?sv=2015&sig=abc",
        "message": "hello",
    },
}
SERVICE_BUS_QUEUE = {
    "type": "ServiceBusQueue",
    "serviceBusQueueMessage": {
        "namespace": "localns",
        "queueName": "q",
        "message": "hi",
        "transportType": "AMQP",
        "authentication": {
            "type": "SharedAccessKey",
            "sasKeyName": "RootManageSharedAccessKey",
            "sasKey": "sb-secret-key-1",
        },
    },
}
SERVICE_BUS_TOPIC = {
    "type": "ServiceBusTopic",
    "serviceBusTopicMessage": {
        "namespace": "localns",
        "topicPath": "t",
        "message": "hi",
        "authentication": {"sasKeyName": "Send", "sasKey": "sb-secret-key-2"},
    },
}


@pytest.fixture
def collection(http, names) -> Names:
    create_collection(http, names)
    return names


def with_action(**changes: Any) -> dict[str, Any]:
    action = http_action()
    action.update(changes)
    return action


def set_in(document: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A copy of ``document`` with the dotted ``path`` set to ``value`` (``...`` deletes it)."""
    result = copy.deepcopy(document)
    *parents, last = path.split(".")
    node = result
    for key in parents:
        node = node.setdefault(key, {})
    if value is ...:
        node.pop(last, None)
    else:
        node[last] = value
    return result


def refuse(
    http,
    names: Names,
    properties: dict[str, Any],
    status: int,
    code: str,
    target: str | None,
    existing: str = "existing",
) -> None:
    """The definition is refused both as a new job and as a replacement of an existing one, and neither
    request changes what is stored."""
    if get(http, names.job_path(existing)).status_code == 404:
        create_job(http, names, existing)
    with unchanged(http, names.job_path("fresh"), names.job_path(existing), names.collection_path + "/jobs"):
        assert_arm_error(put(http, names.job_path("fresh"), {"properties": properties}), status, code, target)
        assert_arm_error(put(http, names.job_path(existing), {"properties": properties}), status, code, target)


# ------------------------------------------------------------------------------------------------ shape


def test_create_answers_201_with_the_arm_shape(http, collection):
    properties = job_properties()
    response = put(http, collection.job_path("job"), {"properties": properties})
    assert response.status_code == 201, response.text
    body = response.json()
    assert set(body) == {"id", "type", "name", "properties"}
    assert body["id"] == collection.job_path("job")
    assert body["type"] == JOB_TYPE
    assert body["name"] == f"{collection.collection}/job"
    assert body["properties"]["startTime"] == properties["startTime"]
    assert body["properties"]["action"] == properties["action"]
    assert body["properties"]["recurrence"] == {"frequency": "hour", "interval": 1}  # the service's spelling
    assert body["properties"]["state"] == "enabled"
    assert body["properties"]["status"] == {
        "executionCount": 0,
        "failureCount": 0,
        "faultedCount": 0,
        "nextExecutionTime": properties["startTime"],
    }
    assert expect_ok(get(http, collection.job_path("job"))) == body


def test_replace_answers_200(http, collection):
    create_job(http, collection, "job")
    properties = job_properties(action=STORAGE_QUEUE, recurrence=None)
    body = expect_ok(put(http, collection.job_path("job"), {"properties": properties}), 200)
    sent = {**STORAGE_QUEUE, "queueMessage": dict(STORAGE_QUEUE["queueMessage"])}
    del sent["queueMessage"]["sasToken"]  # write-only (docs/reference/arm-api.md#write-only-secrets)
    assert body["properties"]["action"] == sent
    assert "recurrence" not in body["properties"]
    assert expect_ok(get(http, collection.job_path("job"))) == body


def test_omitted_optional_objects_are_omitted(http, collection):
    body = create_job(http, collection, "job", {"properties": {"action": http_action(), "startTime": future()}})
    assert set(body["properties"]) == {"startTime", "action", "state", "status"}
    assert set(body["properties"]["action"]) == {"type", "request"}


@pytest.mark.parametrize(
    "action",
    [
        STORAGE_QUEUE,
        SERVICE_BUS_QUEUE,
        SERVICE_BUS_TOPIC,
        {
            "type": "Https",
            "request": {"uri": "https://127.0.0.1:9/x", "method": "POST", "body": "{}", "headers": {"A": "b"}},
        },
    ],
    ids=lambda a: a["type"],
)
def test_every_action_type_is_accepted(http, collection, action):
    body = create_job(http, collection, "job", job_body(action=action))
    assert body["properties"]["action"]["type"] == action["type"]


def test_unknown_collection_is_404_and_never_created(http, names):
    with unchanged(http, names.collection_path, names.rg_path + "/jobCollections", names.job_path("job")):
        assert_arm_error(put(http, names.job_path("job"), job_body()), 404, "ResourceNotFound")
        assert_arm_error(patch(http, names.job_path("job"), job_body()), 404, "ResourceNotFound")
        assert_arm_error(get(http, names.collection_path + "/jobs"), 404, "ResourceNotFound")
        assert_arm_error(delete(http, names.job_path("job")), 404, "ResourceNotFound")
        assert_arm_error(post(http, names.job_path("job") + "/run"), 404, "ResourceNotFound")


def test_missing_job_is_404(http, collection):
    with unchanged(http, collection.job_path("job"), collection.collection_path + "/jobs"):
        assert_arm_error(get(http, collection.job_path("job")), 404, "ResourceNotFound")
        assert_arm_error(
            patch(http, collection.job_path("job"), {"properties": {"state": "Disabled"}}), 404, "ResourceNotFound"
        )
        assert_arm_error(delete(http, collection.job_path("job")), 404, "ResourceNotFound")
        assert_arm_error(post(http, collection.job_path("job") + "/run"), 404, "ResourceNotFound")
        assert_arm_error(get(http, collection.job_path("job") + "/history"), 404, "ResourceNotFound")


def test_delete_answers_200_and_removes_the_job(http, collection):
    create_job(http, collection, "job")
    create_job(http, collection, "other")
    assert delete(http, collection.job_path("job")).status_code == 200
    assert_arm_error(get(http, collection.job_path("job")), 404, "ResourceNotFound")
    assert [j["name"] for j in expect_ok(get(http, collection.collection_path + "/jobs"))["value"]] == [
        f"{collection.collection}/other"
    ]


def test_run_now_answers_200(http, collection):
    create_job(http, collection, "job")
    response = post(http, collection.job_path("job") + "/run")
    assert response.status_code == 200, response.text


# ---------------------------------------------------------------------------------------- validation

BAD_DEFINITIONS: list[tuple[str, dict[str, Any], str]] = [
    # payload present for the type, and only that one
    ("http-without-request", job_properties(action={"type": "Http"}), "properties.action.request"),
    ("https-without-request", job_properties(action={"type": "Https"}), "properties.action.request"),
    ("queue-without-message", job_properties(action={"type": "StorageQueue"}), "properties.action.queueMessage"),
    (
        "sbqueue-without-message",
        job_properties(action={"type": "ServiceBusQueue"}),
        "properties.action.serviceBusQueueMessage",
    ),
    (
        "sbtopic-without-message",
        job_properties(action={"type": "ServiceBusTopic"}),
        "properties.action.serviceBusTopicMessage",
    ),
    (
        "http-with-queue-message",
        job_properties(action={**http_action(), "queueMessage": STORAGE_QUEUE["queueMessage"]}),
        "properties.action.queueMessage",
    ),
    (
        "queue-with-request",
        job_properties(action={**STORAGE_QUEUE, "request": http_action()["request"]}),
        "properties.action.request",
    ),
    (
        "sbqueue-with-topic-message",
        job_properties(
            action={**SERVICE_BUS_QUEUE, "serviceBusTopicMessage": SERVICE_BUS_TOPIC["serviceBusTopicMessage"]}
        ),
        "properties.action.serviceBusTopicMessage",
    ),
    ("unknown-action-type", job_properties(action={**http_action(), "type": "Ftp"}), "properties.action.type"),
    ("no-action", {"startTime": future()}, "properties.action"),
    ("action-not-object", job_properties(action="http"), "properties.action"),
    # request
    ("relative-uri", job_properties(action=http_action(uri="/relative/path")), "properties.action.request.uri"),
    ("ftp-uri", job_properties(action=http_action(uri="ftp://127.0.0.1/x")), "properties.action.request.uri"),
    ("not-a-uri", job_properties(action=http_action(uri="not a uri")), "properties.action.request.uri"),
    ("no-uri", job_properties(action={"type": "Http", "request": {"method": "GET"}}), "properties.action.request.uri"),
    ("https-with-http-uri", job_properties(action={**http_action(), "type": "Https"}), "properties.action.request.uri"),
    ("unknown-method", job_properties(action=http_action(method="FETCH")), "properties.action.request.method"),
    (
        "no-method",
        job_properties(action={"type": "Http", "request": {"uri": LOOPBACK_URI}}),
        "properties.action.request.method",
    ),
    (
        "bad-header-name",
        job_properties(action=http_action(headers={"bad header": "x"})),
        "properties.action.request.headers",
    ),
    (
        "headers-not-strings",
        job_properties(action=http_action(headers={"n": 1})),
        "properties.action.request.headers.n",
    ),
    (
        "too-many-headers",
        job_properties(action=http_action(headers={f"h{i}": "v" for i in range(51)})),
        "properties.action.request.headers",
    ),
    (
        "headers-too-long",
        job_properties(action=http_action(headers={"a": "x" * 2100, "b": "y" * 2000})),
        "properties.action.request.headers",
    ),
    (
        "body-too-long",
        job_properties(action=http_action(method="POST", body="x" * 8193)),
        "properties.action.request.body",
    ),
    (
        "basic-without-password",
        job_properties(action=http_action(authentication={"type": "Basic", "username": "u"})),
        "properties.action.request.authentication.password",
    ),
    (
        "oauth-without-secret",
        job_properties(
            action=http_action(
                authentication={"type": "ActiveDirectoryOAuth", "tenant": "t", "audience": "a", "clientId": "c"}
            )
        ),
        "properties.action.request.authentication.secret",
    ),
    (
        "certificate-without-pfx",
        job_properties(action=http_action(authentication={"type": "ClientCertificate"})),
        "properties.action.request.authentication.pfx",
    ),
    (
        "certificate-not-base64",
        job_properties(
            action=http_action(authentication={"type": "ClientCertificate", "pfx": "not base64!", "password": "x"})
        ),
        "properties.action.request.authentication.pfx",
    ),
    (
        "unknown-authentication",
        job_properties(action=http_action(authentication={"type": "Kerberos"})),
        "properties.action.request.authentication.type",
    ),
    # storage queue
    *[
        (
            f"queue-without-{field}",
            job_properties(action=set_in(STORAGE_QUEUE, f"queueMessage.{field}", ...)),
            f"properties.action.queueMessage.{field}",
        )
        for field in ("storageAccount", "queueName", "sasToken", "message")
    ],
    (
        "queue-empty-account",
        job_properties(action=set_in(STORAGE_QUEUE, "queueMessage.storageAccount", "")),
        "properties.action.queueMessage.storageAccount",
    ),
    # service bus
    *[
        (
            f"sbqueue-without-{field}",
            job_properties(action=set_in(SERVICE_BUS_QUEUE, f"serviceBusQueueMessage.{field}", ...)),
            f"properties.action.serviceBusQueueMessage.{field}",
        )
        for field in ("namespace", "queueName", "authentication", "authentication.sasKeyName", "authentication.sasKey")
    ],
    *[
        (
            f"sbtopic-without-{field}",
            job_properties(action=set_in(SERVICE_BUS_TOPIC, f"serviceBusTopicMessage.{field}", ...)),
            f"properties.action.serviceBusTopicMessage.{field}",
        )
        for field in ("namespace", "topicPath", "authentication", "authentication.sasKeyName", "authentication.sasKey")
    ],
    # retry policy
    (
        "retry-count-negative",
        job_properties(action=with_action(retryPolicy={"retryType": "Fixed", "retryCount": -1})),
        "properties.action.retryPolicy.retryCount",
    ),
    (
        "retry-count-21",
        job_properties(action=with_action(retryPolicy={"retryType": "Fixed", "retryCount": 21})),
        "properties.action.retryPolicy.retryCount",
    ),
    (
        "retry-type-unknown",
        job_properties(action=with_action(retryPolicy={"retryType": "Exponential"})),
        "properties.action.retryPolicy.retryType",
    ),
    *[
        (
            f"retry-interval-{value}",
            job_properties(action=with_action(retryPolicy={"retryType": "Fixed", "retryInterval": value})),
            "properties.action.retryPolicy.retryInterval",
        )
        for value in ("PT14S", "00:00:14", "PT0S", "P19M", "P600D", "600.00:00:00", "soon", "PT", "25:00:00")
    ],
    (
        "error-action-bad-uri",
        job_properties(action=with_action(errorAction=http_action(uri="mailto:a@b"))),
        "properties.action.errorAction.request.uri",
    ),
    (
        "error-action-retry-count",
        job_properties(
            action=with_action(errorAction=http_action(retryPolicy={"retryType": "Fixed", "retryCount": 99}))
        ),
        "properties.action.errorAction.retryPolicy.retryCount",
    ),
    (
        "error-action-retry-interval",
        job_properties(
            action=with_action(errorAction=http_action(retryPolicy={"retryType": "Fixed", "retryInterval": "PT1S"}))
        ),
        "properties.action.errorAction.retryPolicy.retryInterval",
    ),
    # recurrence
    *[
        (
            f"interval-{frequency}-{interval}",
            job_properties(recurrence={"frequency": frequency, "interval": interval}),
            "properties.recurrence.interval",
        )
        for frequency, interval in (
            ("Minute", 0),
            ("Minute", 1001),
            ("Hour", 1001),
            ("Hour", -1),
            ("Day", 549),
            ("Week", 79),
            ("Month", 19),
            ("Month", 0),
        )
    ],
    ("no-frequency", job_properties(recurrence={"interval": 1}), "properties.recurrence.frequency"),
    ("unknown-frequency", job_properties(recurrence={"frequency": "Year"}), "properties.recurrence.frequency"),
    ("count-0", job_properties(recurrence={"frequency": "Hour", "count": 0}), "properties.recurrence.count"),
    ("count-negative", job_properties(recurrence={"frequency": "Hour", "count": -3}), "properties.recurrence.count"),
    (
        "end-time-past",
        job_properties(recurrence={"frequency": "Hour", "endTime": "2015-01-01T00:00:00Z"}),
        "properties.recurrence.endTime",
    ),
    (
        "end-time-garbage",
        job_properties(recurrence={"frequency": "Hour", "endTime": "tomorrow"}),
        "properties.recurrence.endTime",
    ),
    (
        "week-days-with-day",
        job_properties(recurrence={"frequency": "Day", "schedule": {"weekDays": ["Monday"]}}),
        "properties.recurrence.schedule.weekDays",
    ),
    (
        "week-days-with-month",
        job_properties(recurrence={"frequency": "Month", "schedule": {"weekDays": ["Monday"]}}),
        "properties.recurrence.schedule.weekDays",
    ),
    (
        "unknown-week-day",
        job_properties(recurrence={"frequency": "Week", "schedule": {"weekDays": ["Funday"]}}),
        "properties.recurrence.schedule.weekDays[0]",
    ),
    (
        "month-days-with-week",
        job_properties(recurrence={"frequency": "Week", "schedule": {"monthDays": [1]}}),
        "properties.recurrence.schedule.monthDays",
    ),
    (
        "month-days-with-day",
        job_properties(recurrence={"frequency": "Day", "schedule": {"monthDays": [1]}}),
        "properties.recurrence.schedule.monthDays",
    ),
    *[
        (
            f"month-day-{day}",
            job_properties(recurrence={"frequency": "Month", "schedule": {"monthDays": [1, day]}}),
            "properties.recurrence.schedule.monthDays[1]",
        )
        for day in (0, 32, -32)
    ],
    (
        "occurrences-with-week",
        job_properties(
            recurrence={"frequency": "Week", "schedule": {"monthlyOccurrences": [{"day": "Friday", "occurrence": 1}]}}
        ),
        "properties.recurrence.schedule.monthlyOccurrences",
    ),
    *[
        (
            f"occurrence-{n}",
            job_properties(
                recurrence={
                    "frequency": "Month",
                    "schedule": {"monthlyOccurrences": [{"day": "Friday", "occurrence": n}]},
                }
            ),
            "properties.recurrence.schedule.monthlyOccurrences[0].occurrence",
        )
        for n in (0, 6, -6)
    ],
    (
        "occurrence-bad-day",
        job_properties(recurrence={"frequency": "Month", "schedule": {"monthlyOccurrences": [{"day": "Someday"}]}}),
        "properties.recurrence.schedule.monthlyOccurrences[0].day",
    ),
    (
        "minute-60",
        job_properties(recurrence={"frequency": "Hour", "schedule": {"minutes": [0, 60]}}),
        "properties.recurrence.schedule.minutes[1]",
    ),
    (
        "minute-negative",
        job_properties(recurrence={"frequency": "Hour", "schedule": {"minutes": -1}}),
        "properties.recurrence.schedule.minutes[0]",
    ),
    (
        "hour-24",
        job_properties(recurrence={"frequency": "Day", "schedule": {"hours": [24]}}),
        "properties.recurrence.schedule.hours[0]",
    ),
    (
        "hours-not-numbers",
        job_properties(recurrence={"frequency": "Day", "schedule": {"hours": ["noon"]}}),
        "properties.recurrence.schedule.hours[0]",
    ),
    # times
    (
        "start-time-beyond-18-months",
        job_properties(startTime=iso(datetime.now(UTC) + timedelta(days=600))),
        "properties.startTime",
    ),
    ("start-time-garbage", job_properties(startTime="next tuesday"), "properties.startTime"),
    ("state-unknown", job_properties(state="Sleeping"), "properties.state"),
]


@pytest.mark.parametrize(
    ("properties", "target"), [(p, t) for _, p, t in BAD_DEFINITIONS], ids=[name for name, _, _ in BAD_DEFINITIONS]
)
def test_invalid_definition_is_refused_with_its_field_path(http, collection, properties, target):
    refuse(http, collection, properties, 400, "BadRequest", target)


def test_invalid_definition_is_refused_by_patch_too(http, collection):
    create_job(http, collection, "job")
    with unchanged(http, collection.job_path("job")):
        for patch_body, target in [
            ({"properties": {"action": {"request": {"uri": "/relative"}}}}, "properties.action.request.uri"),
            ({"properties": {"action": {"request": None}}}, "properties.action.request"),
            ({"properties": {"recurrence": {"interval": 5000}}}, "properties.recurrence.interval"),
            ({"properties": {"recurrence": {"frequency": None}}}, "properties.recurrence.frequency"),
            (
                {"properties": {"action": {"retryPolicy": {"retryCount": 21}}}},
                "properties.action.retryPolicy.retryCount",
            ),
            ({"properties": {"action": None}}, "properties.action"),
            ({"properties": "x"}, "properties"),
        ]:
            assert_arm_error(patch(http, collection.job_path("job"), patch_body), 400, "BadRequest", target)


@pytest.mark.parametrize(
    "properties",
    [
        job_properties(action=with_action(retryPolicy={"retryType": "Fixed", "retryCount": 0})),
        job_properties(action=with_action(retryPolicy={"retryType": "Fixed", "retryCount": 20})),
        job_properties(action=with_action(retryPolicy={"retryType": "Fixed", "retryInterval": "PT15S"})),
        job_properties(action=with_action(retryPolicy={"retryType": "Fixed", "retryInterval": "00:00:15"})),
        job_properties(action=with_action(retryPolicy={"retryType": "Fixed", "retryInterval": "P18M"})),
        job_properties(action=with_action(retryPolicy={"retryType": "Fixed", "retryInterval": "547.00:00:00"})),
        job_properties(action=with_action(retryPolicy={"retryType": "None"})),
        *[
            job_properties(recurrence={"frequency": f, "interval": i})
            for f, i in (("Minute", 1000), ("Hour", 1000), ("Day", 548), ("Week", 78), ("Month", 18))
        ],
        job_properties(recurrence={"frequency": "Month", "schedule": {"monthDays": [1, 31, -1, -31]}}),
        job_properties(
            recurrence={
                "frequency": "Month",
                "schedule": {
                    "monthlyOccurrences": [
                        {"day": "Friday", "occurrence": 5},
                        {"day": "Monday", "occurrence": -5},
                        {"day": "Sunday"},
                    ]
                },
            }
        ),
        job_properties(recurrence={"frequency": "Hour", "count": 1}),
        job_properties(action=http_action(headers={f"h{i}": "v" for i in range(50)})),
        job_properties(action=http_action(headers={"a": "x" * 4095})),
        job_properties(action=http_action(method="POST", body="x" * 8192)),
        job_properties(startTime=iso(datetime.now(UTC) + timedelta(days=500))),
        job_properties(startTime="2015-04-07T14:00:00Z"),
    ],
)
def test_values_at_the_limits_are_accepted(http, collection, properties):
    create_job(http, collection, "job", {"properties": properties})


@pytest.mark.parametrize("method", ["GET", "post", "Put", "DELETE", "PATCH", "HEAD", "OPTIONS"])
def test_http_methods_are_accepted_and_echoed(http, collection, method):
    body = create_job(http, collection, "job", job_body(action=http_action(method=method)))
    assert body["properties"]["action"]["request"]["method"] == method


def test_definition_over_16_kib_is_refused(http, collection):
    action = set_in(STORAGE_QUEUE, "queueMessage.message", "m" * (16 * 1024))
    with unchanged(http, collection.job_path("job")):
        response = put(http, collection.job_path("job"), job_body(action=action))
        assert response.status_code in (400, 413), response.text
        error = assert_arm_error(response, response.status_code, response.json()["error"]["code"])
        assert error["code"] not in ("BadRequest", "InvalidRequestContent")
        assert "16384" in error["message"]
    create_job(http, collection, "job", job_body(action=set_in(STORAGE_QUEUE, "queueMessage.message", "m" * 15000)))


def test_oversize_patch_is_refused(http, collection):
    create_job(http, collection, "job", job_body(action=STORAGE_QUEUE))
    with unchanged(http, collection.job_path("job")):
        response = patch(
            http, collection.job_path("job"), {"properties": {"action": {"queueMessage": {"message": "m" * 17000}}}}
        )
        assert response.status_code in (400, 413), response.text
        assert "16384" in response.json()["error"]["message"]


@pytest.mark.parametrize(
    "content",
    ['{"properties": {', '{"properties": {"action": }}', "nope", "", "[]", "null", '{"properties": 5}'],
    ids=["unclosed", "missing-value", "text", "empty", "array", "null", "properties-not-object"],
)
def test_malformed_job_body_is_refused(http, collection, content):
    create_job(http, collection, "job")
    with unchanged(http, collection.job_path("job"), collection.job_path("fresh")):
        for method, path in (
            ("PUT", collection.job_path("fresh")),
            ("PUT", collection.job_path("job")),
            ("PATCH", collection.job_path("job")),
        ):
            response = call(http, method, path, content=content)
            expected = "BadRequest" if content.startswith('{"properties": 5') else "InvalidRequestContent"
            assert_arm_error(response, 400, expected)


# ------------------------------------------------------------------------------------------------ quotas


def test_job_count_quota_is_a_conflict(http, names):
    create_collection(http, names, quota={"maxJobCount": 1})
    create_job(http, names, "one")
    with unchanged(http, names.job_path("two"), names.collection_path + "/jobs"):
        assert_arm_error(put(http, names.job_path("two"), job_body()), 409, "Conflict")
    assert put(http, names.job_path("one"), job_body(state="Disabled")).status_code == 200


@pytest.mark.parametrize(
    "recurrence",
    [
        {"frequency": "Minute", "interval": 15},
        {"frequency": "Minute", "interval": 59},
        {"frequency": "Hour", "schedule": {"minutes": [0, 15, 30, 45]}},
        {"frequency": "Day", "schedule": {"hours": [8], "minutes": [0, 30]}},
        {"frequency": "Week", "schedule": {"weekDays": ["Monday"], "hours": [8, 9], "minutes": [0, 59]}},
    ],
)
def test_recurrence_more_frequent_than_the_quota_is_a_conflict(http, names, recurrence):
    create_collection(http, names, quota={"maxRecurrence": {"frequency": "Hour", "interval": 1}})
    refuse(http, names, job_properties(recurrence=recurrence), 409, "Conflict", None)
    with unchanged(http, names.job_path("existing")):
        assert_arm_error(
            patch(http, names.job_path("existing"), {"properties": {"recurrence": recurrence}}), 409, "Conflict"
        )


@pytest.mark.parametrize(
    "recurrence",
    [
        {"frequency": "Hour"},
        {"frequency": "Minute", "interval": 60},
        {"frequency": "Day", "schedule": {"hours": [0, 1, 2], "minutes": [30]}},
    ],
)
def test_recurrence_within_the_quota_is_accepted(http, names, recurrence):
    create_collection(http, names, quota={"maxRecurrence": {"frequency": "Hour", "interval": 1}})
    create_job(http, names, "job", job_body(recurrence=recurrence))


def test_count_over_max_job_occurrence_is_a_conflict(http, names):
    create_collection(http, names, quota={"maxJobOccurrence": 10})
    refuse(http, names, job_properties(recurrence={"frequency": "Hour", "count": 11}), 409, "Conflict", None)
    create_job(http, names, "job", job_body(recurrence={"frequency": "Hour", "count": 10}))
    create_job(http, names, "uncounted", job_body(recurrence={"frequency": "Hour"}))


# ------------------------------------------------------------------------------------------ final states


@pytest.mark.parametrize("state", ["Completed", "Faulted"])
def test_final_job_refuses_put_and_patch_but_can_be_deleted(http, backend, collection, state):
    create_job(http, collection, "job")
    update_job_row(backend, collection, "job", state=state, next_execution_time=None)
    shown = expect_ok(get(http, collection.job_path("job")))
    assert shown["properties"]["state"] == state.lower()  # completed, faulted: the service's spelling
    assert "nextExecutionTime" not in shown["properties"]["status"]
    with unchanged(http, collection.job_path("job")):
        assert_arm_error(put(http, collection.job_path("job"), job_body()), 409, "Conflict")
        assert_arm_error(put(http, collection.job_path("JOB"), job_body(state="Disabled")), 409, "Conflict")
        assert_arm_error(patch(http, collection.job_path("job"), {"properties": {"state": "Enabled"}}), 409, "Conflict")
        assert_arm_error(patch(http, collection.job_path("job"), {}), 409, "Conflict")
    assert delete(http, collection.job_path("job")).status_code == 200
    assert_arm_error(get(http, collection.job_path("job")), 404, "ResourceNotFound")


# ------------------------------------------------------------------------------------------------- PATCH


def test_patch_is_a_json_merge(http, collection):
    properties = job_properties(
        action=http_action(
            method="POST",
            body="b",
            headers={"a": "1", "b": "2"},
            retryPolicy={"retryType": "Fixed", "retryCount": 3, "retryInterval": "PT1M"},
        ),
        recurrence={"frequency": "Hour", "interval": 2, "count": 9, "schedule": {"minutes": [0, 30]}},
    )
    create_job(http, collection, "job", {"properties": properties})
    path = collection.job_path("job")

    # objects merge, scalars replace
    body = expect_ok(patch(http, path, {"properties": {"action": {"request": {"headers": {"c": "3"}}}}}))
    assert body["properties"]["action"]["request"]["headers"] == {"a": "1", "b": "2", "c": "3"}
    assert body["properties"]["action"]["request"]["body"] == "b"
    assert body["properties"]["action"]["retryPolicy"] == {
        "retryType": "fixed",
        "retryCount": 3,
        "retryInterval": "PT1M",
    }
    body = expect_ok(patch(http, path, {"properties": {"action": {"retryPolicy": {"retryCount": 5}}}}))
    assert body["properties"]["action"]["retryPolicy"] == {
        "retryType": "fixed",
        "retryCount": 5,
        "retryInterval": "PT1M",
    }
    # arrays replace
    body = expect_ok(patch(http, path, {"properties": {"recurrence": {"schedule": {"minutes": [15]}, "interval": 3}}}))
    assert body["properties"]["recurrence"] == {
        "frequency": "hour",
        "interval": 3,
        "count": 9,
        "schedule": {"minutes": [15]},
    }
    # explicit null removes
    body = expect_ok(
        patch(
            http,
            path,
            {
                "properties": {
                    "action": {"request": {"headers": {"a": None}, "body": None}},
                    "recurrence": {"count": None},
                }
            },
        )
    )
    assert body["properties"]["action"]["request"]["headers"] == {"b": "2", "c": "3"}
    assert "body" not in body["properties"]["action"]["request"]
    assert "count" not in body["properties"]["recurrence"]
    body = expect_ok(patch(http, path, {"properties": {"recurrence": None}}))
    assert "recurrence" not in body["properties"]
    # unmentioned members stay
    assert body["properties"]["startTime"] == properties["startTime"]
    assert body["properties"]["action"]["request"]["uri"] == LOOPBACK_URI
    assert expect_ok(get(http, path)) == body


def test_patch_state_disables_and_enables(http, collection):
    create_job(http, collection, "job")
    body = expect_ok(patch(http, collection.job_path("job"), {"properties": {"state": "Disabled"}}))
    assert body["properties"]["state"] == "disabled"
    assert "nextExecutionTime" not in body["properties"]["status"]
    body = expect_ok(patch(http, collection.job_path("job"), {"properties": {"state": "ENABLED"}}))
    assert body["properties"]["state"] == "enabled"
    assert body["properties"]["status"]["nextExecutionTime"].endswith("Z")


def test_patch_with_authentication_null_removes_it(http, backend, collection):
    auth = {"type": "Basic", "username": "user", "password": "pw-remove-me"}
    create_job(http, collection, "job", job_body(action=http_action(authentication=auth)))
    body = expect_ok(
        patch(http, collection.job_path("job"), {"properties": {"action": {"request": {"authentication": None}}}})
    )
    assert "authentication" not in body["properties"]["action"]["request"]
    assert "authentication" not in stored_job(backend, collection, "job")["definition"]["action"]["request"]
    assert "pw-remove-me" not in json.dumps(stored_job(backend, collection, "job")["definition"])


# ----------------------------------------------------------------------------------------------- secrets


def _pfx(password: str) -> tuple[str, str]:
    """A base64 pfx with a self-signed certificate for CN=Scheduler Mgmt, and its SHA-1 thumbprint."""
    key, certificate = self_signed(
        "Scheduler Mgmt", not_before=datetime.now(UTC) - timedelta(days=1), not_after=datetime(2040, 1, 1, tzinfo=UTC)
    )
    return pfx_base64(key, certificate, password, b"scheduler"), sha1_thumbprint(certificate)


SECRETS = ("pw-basic-secret", "oauth-client-secret", "sb-secret-key-1", "sb-secret-key-2", "pfx-password-secret")


def _secret_jobs() -> dict[str, dict[str, Any]]:
    pfx, _ = _pfx("pfx-password-secret")
    return {
        "basic": job_body(
            action=http_action(authentication={"type": "Basic", "username": "user", "password": "pw-basic-secret"})
        ),
        "oauth": job_body(
            action=http_action(
                authentication={
                    "type": "ActiveDirectoryOAuth",
                    "tenant": "contoso.example",
                    "audience": "https://management.core.windows.net/",
                    "clientId": "client-1",
                    "secret": "oauth-client-secret",
                }
            )
        ),
        "certificate": job_body(
            action=http_action(
                authentication={"type": "ClientCertificate", "pfx": pfx, "password": "pfx-password-secret"}
            )
        ),
        "sbqueue": job_body(action=SERVICE_BUS_QUEUE),
        "sbtopic": job_body(action={**http_action(), "errorAction": SERVICE_BUS_TOPIC}),
    }


def _assert_no_secret(text: str, pfx: str | None = None) -> None:
    for secret in SECRETS:
        assert secret not in text
    if pfx:
        assert pfx[:40] not in text


def test_secrets_are_never_returned(http, backend, collection):
    jobs = _secret_jobs()
    pfx = jobs["certificate"]["properties"]["action"]["request"]["authentication"]["pfx"]
    for name, body in jobs.items():
        response = put(http, collection.job_path(name), body)
        assert response.status_code == 201, response.text
        _assert_no_secret(response.text, pfx)
        _assert_no_secret(get(http, collection.job_path(name)).text, pfx)
        response = patch(http, collection.job_path(name), {"properties": {"state": "Disabled"}})
        assert response.status_code == 200, response.text
        _assert_no_secret(response.text, pfx)
        response = put(http, collection.job_path(name), body)
        assert response.status_code == 200, response.text
        _assert_no_secret(response.text, pfx)
    _assert_no_secret(get(http, collection.collection_path + "/jobs").text, pfx)

    basic = expect_ok(get(http, collection.job_path("basic")))["properties"]["action"]["request"]["authentication"]
    assert basic == {"type": "Basic", "username": "user"}
    oauth = expect_ok(get(http, collection.job_path("oauth")))["properties"]["action"]["request"]["authentication"]
    assert oauth == {
        "type": "ActiveDirectoryOAuth",
        "tenant": "contoso.example",
        "audience": "https://management.core.windows.net/",
        "clientId": "client-1",
    }
    sb = expect_ok(get(http, collection.job_path("sbqueue")))["properties"]["action"]["serviceBusQueueMessage"]
    assert sb["authentication"] == {"type": "sharedAccessKey", "sasKeyName": "RootManageSharedAccessKey"}
    assert sb["transportType"] == "amqp"  # sent "AMQP": answered in the service's spelling
    topic = expect_ok(get(http, collection.job_path("sbtopic")))["properties"]["action"]["errorAction"]
    assert topic["serviceBusTopicMessage"]["authentication"] == {"sasKeyName": "Send"}
    # ... but stored for the dispatcher
    stored = json.dumps([stored_job(backend, collection, name)["definition"] for name in jobs])
    for secret in SECRETS:
        assert secret in stored


def test_client_certificate_details_are_read_from_the_pfx(http, collection):
    pfx, thumbprint = _pfx("pw")
    body = create_job(
        http,
        collection,
        "job",
        job_body(action=http_action(authentication={"type": "ClientCertificate", "pfx": pfx, "password": "pw"})),
    )
    auth = body["properties"]["action"]["request"]["authentication"]
    assert auth["type"] == "ClientCertificate"
    assert auth["certificateThumbprint"] == thumbprint
    assert auth["certificateSubjectName"] == "CN=Scheduler Mgmt"
    assert auth["certificateExpirationDate"] == "2040-01-01T00:00:00Z"  # the REST spec's name, the SDKs read it
    assert auth["certificateExpiration"] == "2040-01-01T00:00:00Z"  # the service's name (recorded)
    assert "pfx" not in auth and "password" not in auth


def test_client_certificate_with_wrong_password_is_refused(http, collection):
    pfx, _ = _pfx("right")
    refuse(
        http,
        collection,
        job_properties(
            action=http_action(authentication={"type": "ClientCertificate", "pfx": pfx, "password": "wrong"})
        ),
        400,
        "BadRequest",
        "properties.action.request.authentication.pfx",
    )


def test_patch_not_mentioning_secrets_keeps_them(http, backend, collection):
    jobs = _secret_jobs()
    for name, body in jobs.items():
        create_job(http, collection, name, body)
    before = {name: stored_job(backend, collection, name)["definition"] for name in jobs}
    for name in jobs:
        response = patch(
            http,
            collection.job_path(name),
            {"properties": {"action": {"retryPolicy": {"retryType": "None"}}, "recurrence": {"interval": 2}}},
        )
        assert response.status_code == 200, response.text
        after = stored_job(backend, collection, name)["definition"]
        assert after["action"].get("request", {}).get("authentication") == before[name]["action"].get(
            "request", {}
        ).get("authentication")
        for payload in ("serviceBusQueueMessage",):
            if payload in before[name]["action"]:
                assert after["action"][payload]["authentication"] == before[name]["action"][payload]["authentication"]
        if "errorAction" in before[name]["action"]:
            assert after["action"]["errorAction"] == before[name]["action"]["errorAction"]
    # changing another member of the authentication object keeps the secret too
    response = patch(
        http,
        collection.job_path("basic"),
        {"properties": {"action": {"request": {"authentication": {"username": "other"}}}}},
    )
    assert response.status_code == 200, response.text
    stored = stored_job(backend, collection, "basic")["definition"]["action"]["request"]["authentication"]
    assert stored == {"type": "Basic", "username": "other", "password": "pw-basic-secret"}
    response = patch(
        http,
        collection.job_path("sbqueue"),
        {"properties": {"action": {"serviceBusQueueMessage": {"message": "changed"}}}},
    )
    assert response.status_code == 200, response.text
    stored = stored_job(backend, collection, "sbqueue")["definition"]["action"]["serviceBusQueueMessage"]
    assert stored["authentication"]["sasKey"] == "sb-secret-key-1"
    assert stored["message"] == "changed"


def test_storage_queue_sas_token_is_write_only_and_kept_for_the_same_queue(http, backend, collection):
    """The service never returned a sasToken (recorded): not in any answer, stored for the dispatcher, kept
    over an update that omits it while the storage account and queue stay, asked for again otherwise."""
    body = create_job(http, collection, "job", job_body(action=STORAGE_QUEUE))
    assert "sasToken" not in body["properties"]["action"]["queueMessage"]
    for answer in (get(http, collection.job_path("job")), get(http, collection.collection_path + "/jobs")):
        assert answer.status_code == 200 and "sig=abc" not in answer.text, answer.text
    # GET-modify-PUT without the token, and a PATCH of the message: kept
    shown = expect_ok(get(http, collection.job_path("job")))["properties"]
    shown["action"]["queueMessage"]["message"] = "changed"
    answer = expect_ok(put(http, collection.job_path("job"), {"properties": shown}), 200)
    assert "sig=abc" not in json.dumps(answer)
    expect_ok(
        patch(http, collection.job_path("job"), {"properties": {"action": {"queueMessage": {"message": "again"}}}})
    )
    stored = stored_job(backend, collection, "job")["definition"]["action"]["queueMessage"]
    assert stored == {**STORAGE_QUEUE["queueMessage"], "message": "again"}
    # another queue or account without a token: refused, nothing changed
    for member, value in (("queueName", "other"), ("storageAccount", "otheraccount")):
        with unchanged(http, collection.job_path("job")):
            assert_arm_error(
                patch(http, collection.job_path("job"), {"properties": {"action": {"queueMessage": {member: value}}}}),
                400,
                "BadRequest",
                "properties.action.queueMessage.sasToken",
            )


# ------------------------------------------------------------------------------------------------ echoes


def test_values_are_echoed_with_the_clients_casing(http, collection):
    properties = job_properties(
        action={
            "type": "http",
            "request": {"uri": LOOPBACK_URI, "method": "get"},
            "retryPolicy": {"retryType": "fixed", "retryCount": 2, "retryInterval": "PT1M"},
        },
        recurrence={"frequency": "minute", "interval": 5},
        state="enabled",
    )
    body = create_job(http, collection, "job", {"properties": properties})
    assert body["properties"]["action"] == properties["action"]  # action.type as sent, as the service did
    assert body["properties"]["recurrence"] == properties["recurrence"]
    assert body["properties"]["state"] == "enabled"
    assert expect_ok(get(http, collection.job_path("job")))["properties"]["state"] == "enabled"
    weekly = job_properties(
        recurrence={"frequency": "WEEK", "schedule": {"weekDays": ["Monday", "FRIDAY"]}}, state="DISABLED"
    )
    body = expect_ok(put(http, collection.job_path("job"), {"properties": weekly}))
    # enumerations in the service's spelling whatever the client's; an omitted interval answered as 1
    assert body["properties"]["recurrence"] == {
        "frequency": "week",
        "interval": 1,
        "schedule": {"weekDays": ["monday", "friday"]},
    }
    assert body["properties"]["state"] == "disabled"


@pytest.mark.parametrize("key", ["occurrence", "Occurrence"])
def test_monthly_occurrence_key_in_either_casing_is_answered_as_the_spec_key(http, collection, key):
    recurrence = {"frequency": "Month", "schedule": {"monthlyOccurrences": [{"day": "Friday", key: -1}]}}
    body = create_job(http, collection, "job", job_body(recurrence=recurrence))
    # both keys, same value: the service wrote "occurrence", the SDKs read "Occurrence"
    answered = {
        "frequency": "month",
        "interval": 1,
        "schedule": {"monthlyOccurrences": [{"day": "friday", "Occurrence": -1, "occurrence": -1}]},
    }
    assert body["properties"]["recurrence"] == answered
    bad = {"frequency": "Month", "schedule": {"monthlyOccurrences": [{"day": "Friday", key: 9}]}}
    refuse(
        http,
        collection,
        job_properties(recurrence=bad),
        400,
        "BadRequest",
        "properties.recurrence.schedule.monthlyOccurrences[0].occurrence",
    )


def test_scalars_are_accepted_where_arrays_are_expected(http, collection):
    recurrence = {"frequency": "Hour", "schedule": {"minutes": 15}}
    body = create_job(http, collection, "hourly", job_body(recurrence=recurrence))
    assert body["properties"]["recurrence"] == {"frequency": "hour", "interval": 1, "schedule": {"minutes": 15}}
    monthly = {
        "frequency": "Month",
        "schedule": {
            "monthDays": -1,
            "hours": 6,
            "minutes": 0,
            "monthlyOccurrences": {"day": "Monday", "occurrence": 1},
        },
    }
    answered = copy.deepcopy(monthly)
    answered.update(frequency="month", interval=1)
    answered["schedule"]["monthlyOccurrences"] = {"day": "monday", "Occurrence": 1, "occurrence": 1}  # both keys
    assert create_job(http, collection, "monthly", job_body(recurrence=monthly))["properties"]["recurrence"] == answered
    weekly = {"frequency": "Week", "schedule": {"weekDays": "Sunday"}}
    answered = {"frequency": "week", "interval": 1, "schedule": {"weekDays": "sunday"}}
    assert create_job(http, collection, "weekly", job_body(recurrence=weekly))["properties"]["recurrence"] == answered


@pytest.mark.parametrize("interval", ["PT30S", "00:00:30", "1.02:03:04", "P1D", "PT1H30M", "01:00:00", "P1W"])
def test_retry_interval_in_iso_and_timespan_is_echoed_as_sent(http, collection, interval):
    policy = {"retryType": "Fixed", "retryCount": 3, "retryInterval": interval}
    body = create_job(http, collection, "job", job_body(action=http_action(retryPolicy=policy)))
    answered = {**policy, "retryType": "fixed"}
    assert body["properties"]["action"]["retryPolicy"] == answered
    assert expect_ok(get(http, collection.job_path("job")))["properties"]["action"]["retryPolicy"] == answered


@pytest.mark.parametrize("ttl", ["00:05:00", "PT5M", "1.00:00:00"])
def test_service_bus_time_to_live_is_echoed_as_sent(http, collection, ttl):
    brokered = {
        "timeToLive": ttl,
        "contentType": "application/json",
        "messageId": "m-1",
        "scheduledEnqueueTimeUtc": "2030-01-01T00:00:00Z",
        "forcePersistence": True,
    }
    action = set_in(SERVICE_BUS_QUEUE, "serviceBusQueueMessage.brokeredMessageProperties", brokered)
    action["serviceBusQueueMessage"]["customMessageProperties"] = {"Source": "test"}
    body = create_job(http, collection, "job", job_body(action=action))
    message = body["properties"]["action"]["serviceBusQueueMessage"]
    assert message["brokeredMessageProperties"] == brokered
    assert message["customMessageProperties"] == {"Source": "test"}
    bad = set_in(action, "serviceBusQueueMessage.brokeredMessageProperties.timeToLive", "soon")
    refuse(
        http,
        collection,
        job_properties(action=bad),
        400,
        "BadRequest",
        "properties.action.serviceBusQueueMessage.brokeredMessageProperties.timeToLive",
    )


def test_start_and_end_time_are_echoed_as_sent(http, collection):
    start_text = (datetime.now(UTC) + timedelta(days=3)).strftime("%Y-%m-%dT%H:%M:%S") + "-08:00"
    end_text = (datetime.now(UTC) + timedelta(days=30)).strftime("%Y-%m-%dT%H:%M:%S.1234567Z")
    body = create_job(
        http, collection, "job", job_body(startTime=start_text, recurrence={"frequency": "Day", "endTime": end_text})
    )
    assert body["properties"]["startTime"] == start_text
    assert body["properties"]["recurrence"]["endTime"] == end_text
    assert body["properties"]["status"]["nextExecutionTime"].endswith("Z")


def _nulls(value: Any, path: str = "") -> list[str]:
    if isinstance(value, dict):
        return [p for key, item in value.items() for p in _nulls(item, f"{path}.{key}")]
    if isinstance(value, list):
        return [p for index, item in enumerate(value) for p in _nulls(item, f"{path}[{index}]")]
    return [path] if value is None else []


def test_explicit_nulls_in_put_are_taken_as_omitted(http, collection):
    properties = job_properties(
        action={
            **http_action(headers=None, body=None, authentication=None),
            "retryPolicy": None,
            "errorAction": None,
            "queueMessage": None,
        },
        recurrence={
            "frequency": "Month",
            "interval": None,
            "count": None,
            "endTime": None,
            "schedule": {"monthDays": [1], "monthlyOccurrences": None, "hours": None},
        },
    )
    properties["state"] = None
    body = create_job(http, collection, "job", {"properties": properties})
    assert _nulls(body) == []
    assert body["properties"]["action"] == http_action()
    assert body["properties"]["recurrence"] == {"frequency": "month", "interval": 1, "schedule": {"monthDays": [1]}}
    assert body["properties"]["state"] == "enabled"
    assert _nulls(expect_ok(get(http, collection.job_path("job")))) == []
    replaced = expect_ok(put(http, collection.job_path("job"), {"properties": {**properties, "recurrence": None}}))
    assert _nulls(replaced) == [] and "recurrence" not in replaced["properties"]


def test_status_is_ignored_on_input(http, collection):
    properties = job_properties(
        status={
            "executionCount": 99,
            "failureCount": 9,
            "faultedCount": 1,
            "lastExecutionTime": "2016-01-01T00:00:00Z",
            "nextExecutionTime": "2016-01-01T00:00:00Z",
        }
    )
    body = create_job(http, collection, "job", {"properties": properties})
    assert body["properties"]["status"] == {
        "executionCount": 0,
        "failureCount": 0,
        "faultedCount": 0,
        "nextExecutionTime": properties["startTime"],
    }


def test_read_only_members_sent_back_are_ignored(http, collection):
    created = create_job(http, collection, "job")
    replaced = put(http, collection.job_path("job"), created)  # a GET-modify-PUT round trip
    assert replaced.status_code == 200, replaced.text
    assert replaced.json() == created


def test_replace_and_patch_keep_the_status_counters(http, backend, collection):
    create_job(http, collection, "job")
    last = datetime(2024, 5, 6, 7, 8, 9, tzinfo=UTC)
    update_job_row(
        backend, collection, "job", execution_count=7, failure_count=3, faulted_count=1, last_execution_time=last
    )
    new_start = future(days=2)
    body = expect_ok(put(http, collection.job_path("job"), job_body(startTime=new_start)))
    status = body["properties"]["status"]
    assert (status["executionCount"], status["failureCount"], status["faultedCount"]) == (7, 3, 1)
    assert status["lastExecutionTime"] == "2024-05-06T07:08:09Z"
    assert status["nextExecutionTime"] == new_start  # recomputed
    body = expect_ok(patch(http, collection.job_path("job"), {"properties": {"state": "Disabled"}}))
    status = body["properties"]["status"]
    assert (status["executionCount"], status["failureCount"], status["faultedCount"]) == (7, 3, 1)


# ------------------------------------------------------------------------------------------------- lists


def test_list_jobs_filters_by_state(http, backend, collection):
    for name, state in (("a", "Enabled"), ("b", "Disabled"), ("c", "Enabled"), ("d", "Enabled")):
        create_job(http, collection, name, job_body(state=state))
    update_job_row(backend, collection, "d", state="Completed", next_execution_time=None)
    path = collection.collection_path + "/jobs"

    def names_for(expression: str) -> list[str]:
        return [j["name"].split("/")[1] for j in expect_ok(get(http, path, **{"$filter": expression}))["value"]]

    assert names_for("state eq 'Enabled'") == ["a", "c"]
    assert names_for("state eq 'disabled'") == ["b"]
    assert names_for("state eq 'Completed'") == ["d"]
    assert names_for("state eq 'Faulted'") == []
    # bare values, as the .NET SDK sent them and the service accepted (recorded)
    assert names_for("state eq Disabled") == ["b"]
    assert names_for("state eq completed") == ["d"]
    for bad in (
        "state eq En abled",
        "state eq 'Enabled",
        "state eq Enabled)",
        "status eq 'Enabled'",
        "state eq 'Sleeping'",
        "state eq Sleeping",
        "state ne 'Enabled'",
    ):
        with unchanged(http, path):
            assert_arm_error(get(http, path, **{"$filter": bad}), 400, "BadRequest", "$filter")


def test_list_jobs_pages_with_absolute_next_links(http, collection):
    for index in range(5):
        create_job(http, collection, f"job{index}")
    path = collection.collection_path + "/jobs"
    items, links = list_all(http, path, **{"$top": "2"})
    assert [j["name"] for j in items] == [f"{collection.collection}/job{i}" for i in range(5)]
    assert all(j["type"] == JOB_TYPE for j in items)
    assert len(links) == 2
    for link in links:
        assert link.startswith(str(http.base_url).rstrip("/") + collection.collection_path + "/jobs?"), link
    filtered, links = list_all(http, path, **{"$top": "1", "$filter": "state eq 'Enabled'"})
    assert len(filtered) == 5 and len(links) == 4
    assert all("filter" in link for link in links)
    skipped = expect_ok(get(http, path, **{"$skip": "3"}))
    assert [j["name"] for j in skipped["value"]] == [f"{collection.collection}/job3", f"{collection.collection}/job4"]
    assert "nextLink" not in skipped
    assert len(expect_ok(get(http, path, **{"$top": "100"}))["value"]) == 5
    assert len(expect_ok(get(http, path, **{"$top": "1"}))["value"]) == 1


@pytest.mark.parametrize(
    ("param", "value"), [("$top", "0"), ("$top", "101"), ("$top", "-5"), ("$top", "x"), ("$skip", "-1"), ("$skip", "x")]
)
def test_list_jobs_paging_parameters_are_checked(http, collection, param, value):
    create_job(http, collection, "job")
    with unchanged(http, collection.collection_path + "/jobs"):
        assert_arm_error(get(http, collection.collection_path + "/jobs", **{param: value}), 400, "BadRequest", param)
