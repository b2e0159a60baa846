"""Security rules on the API (docs/reference/security.md#job-values-that-name-endpoints): the Service Bus namespace, SAS
key name and storage account rules; a stored secret that follows its target (kept on PUT/PATCH only while the
authentication type and the target stay the same); booleans refused in integer fields and ASCII digits only in durations
and dates."""

from __future__ import annotations

import copy
import typing
from typing import Any

import pytest
from pydantic import BaseModel
from pydantic.alias_generators import to_camel
from starlette.testclient import TestClient
from support.api_calls import (
    assert_arm_error,
    call,
    collection_body,
    create_collection,
    create_job,
    expect_ok,
    future,
    get,
    http_action,
    job_body,
    patch,
    put,
    unchanged,
)
from support.classic_api import Classic, assert_json_error, assert_xml_error
from support.classic_api import collection_body as classic_collection_body
from support.hostile_cases import SAS_KEY_NAMES, STORAGE_ACCOUNTS
from support.names import Names
from support.server_store import stored_job

from scheduler_emulator.api.preview import PreviewIn
from scheduler_emulator.schemas.job import JobDefinitionIn
from scheduler_emulator.schemas.job_collection import JobCollectionIn


@pytest.fixture
def http(app: TestClient) -> TestClient:
    """This module's requests go to the API in-process (conftest's ``app``): nothing process-level is under test."""
    return app


BASIC = {"type": "Basic", "username": "user", "password": "stored-password"}
SB_AUTH = {"type": "SharedAccessKey", "sasKeyName": "send", "sasKey": "stored-sas-key"}


def service_bus_action(namespace: str, **auth: Any) -> dict[str, Any]:
    return {
        "type": "ServiceBusQueue",
        "serviceBusQueueMessage": {
            "namespace": namespace,
            "queueName": "orders",
            "message": "m",
            "authentication": {**SB_AUTH, **auth},
        },
    }


# --- the Service Bus namespace ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "namespace",
    [
        "127.0.0.1:18010;UseDevelopmentEmulator=true;X=",  # would redirect the connection string
        "evil.example.com",
        "ns",  # too short
        "abcde",
        "a" * 51,
        "1abcdef",  # starts with a digit
        "-abcdef",
        "abcdef-",  # ends with a hyphen
        "abc_def",
        "abc def",
        "abc/def",
    ],
)
def test_invalid_service_bus_namespace_is_refused(http, names: Names, namespace: str) -> None:
    create_collection(http, names)
    path = "properties.action.serviceBusQueueMessage.namespace"
    with unchanged(http, names.job_path("sb")):
        response = put(http, names.job_path("sb"), job_body(action=service_bus_action(namespace)))
        assert_arm_error(response, 400, "BadRequest", path, message_contains="namespace name")


def test_invalid_namespace_in_an_error_action_is_refused(http, names: Names) -> None:
    create_collection(http, names)
    action = http_action()
    action["errorAction"] = {
        "type": "ServiceBusTopic",
        "serviceBusTopicMessage": {"namespace": "x;Endpoint=sb://evil", "topicPath": "t", "authentication": SB_AUTH},
    }
    response = put(http, names.job_path("sb"), job_body(action=action))
    assert_arm_error(response, 400, "BadRequest", "properties.action.errorAction.serviceBusTopicMessage.namespace")


@pytest.mark.parametrize("namespace", ["abcdef", "a" * 50, "My-Namespace-01", "contoso-sb"])
def test_valid_service_bus_namespace_is_accepted(http, names: Names, namespace: str) -> None:
    create_collection(http, names)
    created = create_job(http, names, "sb", job_body(action=service_bus_action(namespace)))
    assert created["properties"]["action"]["serviceBusQueueMessage"]["namespace"] == namespace


# --- a stored secret follows its target --------------------------------------------------------------


def _basic_job(uri: str) -> dict[str, Any]:
    return job_body(action=http_action(uri, authentication=BASIC))


def _without_password(uri: str, auth_type: str = "Basic") -> dict[str, Any]:
    return job_body(action=http_action(uri, authentication={"type": auth_type, "username": "user"}))


def test_put_keeps_an_omitted_secret_for_the_same_origin(http, backend, names: Names) -> None:
    create_collection(http, names)
    create_job(http, names, "job", _basic_job("https://api.example.test/hook"))
    # Same scheme, host and port (the default port written out, the host in other case, another path).
    expect_ok(put(http, names.job_path("job"), _without_password("https://API.example.test:443/other?x=1")))
    stored = stored_job(backend, names, "job")["definition"]
    assert stored["action"]["request"]["authentication"]["password"] == "stored-password"


@pytest.mark.parametrize(
    "uri",
    [
        "https://evil.example.test/hook",  # another host
        "http://api.example.test/hook",  # another scheme
        "https://api.example.test:8443/hook",  # another port
    ],
)
def test_put_omitting_a_secret_for_another_origin_is_refused(http, backend, names: Names, uri: str) -> None:
    create_collection(http, names)
    create_job(http, names, "job", _basic_job("https://api.example.test/hook"))
    field = "properties.action.request.authentication.password"
    with unchanged(http, names.job_path("job")):
        assert_arm_error(put(http, names.job_path("job"), _without_password(uri)), 400, "BadRequest", field)
    assert (
        stored_job(backend, names, "job")["definition"]["action"]["request"]["uri"] == "https://api.example.test/hook"
    )
    # Giving the secret again is fine.
    expect_ok(put(http, names.job_path("job"), _basic_job(uri)))


def test_patch_changing_the_target_must_repeat_the_secret(http, backend, names: Names) -> None:
    create_collection(http, names)
    create_job(http, names, "job", _basic_job("https://api.example.test/hook"))
    field = "properties.action.request.authentication.password"
    moved = {"properties": {"action": {"request": {"uri": "https://evil.example.test/hook"}}}}
    with unchanged(http, names.job_path("job")):
        assert_arm_error(patch(http, names.job_path("job"), moved), 400, "BadRequest", field)
    # A PATCH that keeps the origin keeps the secret; one that repeats it may move it.
    expect_ok(
        patch(
            http, names.job_path("job"), {"properties": {"action": {"request": {"uri": "https://api.example.test/x"}}}}
        )
    )
    assert (
        stored_job(backend, names, "job")["definition"]["action"]["request"]["authentication"]["password"]
        == "stored-password"
    )
    moved["properties"]["action"]["request"]["authentication"] = {"password": "new-password"}
    expect_ok(patch(http, names.job_path("job"), moved))
    stored = stored_job(backend, names, "job")["definition"]["action"]["request"]
    assert stored["uri"] == "https://evil.example.test/hook" and stored["authentication"]["password"] == "new-password"


def test_changing_the_authentication_type_does_not_carry_the_secret(http, backend, names: Names) -> None:
    create_collection(http, names)
    oauth = {"type": "ActiveDirectoryOAuth", "tenant": "t", "audience": "a", "clientId": "c", "secret": "stored-secret"}
    create_job(http, names, "job", job_body(action=http_action("https://api.example.test/", authentication=oauth)))
    response = put(http, names.job_path("job"), _without_password("https://api.example.test/"))
    assert_arm_error(response, 400, "BadRequest", "properties.action.request.authentication.password")


def test_service_bus_key_follows_its_namespace(http, backend, names: Names) -> None:
    create_collection(http, names)
    create_job(http, names, "sb", job_body(action=service_bus_action("first-namespace")))
    without_key = service_bus_action("first-namespace")
    del without_key["serviceBusQueueMessage"]["authentication"]["sasKey"]
    expect_ok(put(http, names.job_path("sb"), job_body(action=without_key)))
    stored = stored_job(backend, names, "sb")["definition"]["action"]["serviceBusQueueMessage"]
    assert stored["authentication"]["sasKey"] == "stored-sas-key"
    without_key["serviceBusQueueMessage"]["namespace"] = "other-namespace"
    field = "properties.action.serviceBusQueueMessage.authentication.sasKey"
    with unchanged(http, names.job_path("sb")):
        assert_arm_error(put(http, names.job_path("sb"), job_body(action=without_key)), 400, "BadRequest", field)
    moved = {"properties": {"action": {"serviceBusQueueMessage": {"namespace": "other-namespace"}}}}
    assert_arm_error(patch(http, names.job_path("sb"), moved), 400, "BadRequest", field)


# --- issue 28: credentials never spliced; types are types; a SAS token follows its queue ---------------------
# Each hostile value on both surfaces (ARM, and the classic surface over the same service) and both stores
# (the session server's backends): 400 naming the field, nothing stored, a stored job left as it was.

HOSTILE_KEY_NAMES = [*SAS_KEY_NAMES.values()]
SB_KEY_NAME = "properties.action.serviceBusQueueMessage.authentication.sasKeyName"
ACCOUNT = "properties.action.queueMessage.storageAccount"


def queue_action(account: str = "account1", queue: str = "orders", **extra: Any) -> dict[str, Any]:
    message = {"storageAccount": account, "queueName": queue, "message": "m", "sasToken": "sv=1&sig=stored", **extra}
    return {"type": "StorageQueue", "queueMessage": {k: v for k, v in message.items() if v is not None}}


def _classic(http: Any) -> Classic:
    classic = Classic(http)
    classic.create_collection()
    return classic


def _assert_classic_refusal(classic: Classic, name: str, properties: dict[str, Any], field: str) -> None:
    """A classic job PUT of ``properties`` over the stored job ``name`` is refused naming ``field`` and
    changes nothing."""
    path = f"{classic.jobs_path}/{name}"
    before = classic.job_call("GET", path).text
    message = assert_json_error(classic.put_job(name, properties), 400, "BadRequest")
    assert field.removeprefix("properties.") in message, message
    assert classic.job_call("GET", path).text == before


@pytest.mark.parametrize("key_name", HOSTILE_KEY_NAMES, ids=list(SAS_KEY_NAMES))
def test_a_sas_key_name_that_could_change_the_connection_is_refused(http, names: Names, key_name: str) -> None:
    create_collection(http, names)
    create_job(http, names, "sb", job_body(action=service_bus_action("contoso-sb")))
    with unchanged(http, names.job_path("sb"), names.job_path("new")):
        for job in ("sb", "new"):
            body = job_body(action=service_bus_action("contoso-sb", sasKeyName=key_name))
            assert_arm_error(put(http, names.job_path(job), body), 400, "BadRequest", SB_KEY_NAME)
        changed = {"properties": {"action": {"serviceBusQueueMessage": {"authentication": {"sasKeyName": key_name}}}}}
        assert_arm_error(patch(http, names.job_path("sb"), changed), 400, "BadRequest", SB_KEY_NAME)
    classic = _classic(http)
    classic_body = {"action": service_bus_action("contoso-sb"), "startTime": future()}
    assert classic.put_job("sb", classic_body).status_code == 201
    hostile = {"action": service_bus_action("contoso-sb", sasKeyName=key_name), "startTime": future()}
    _assert_classic_refusal(classic, "sb", hostile, SB_KEY_NAME)


@pytest.mark.parametrize("key_name", ["k" * 256, "Send Only/ünï-_.~", "RootManageSharedAccessKey"])
def test_a_valid_sas_key_name_is_accepted(http, names: Names, key_name: str) -> None:
    create_collection(http, names)
    created = create_job(http, names, "sb", job_body(action=service_bus_action("contoso-sb", sasKeyName=key_name)))
    assert created["properties"]["action"]["serviceBusQueueMessage"]["authentication"]["sasKeyName"] == key_name


@pytest.mark.parametrize("account", [*STORAGE_ACCOUNTS.values()], ids=list(STORAGE_ACCOUNTS))
def test_a_storage_account_name_outside_azures_rule_is_refused_at_write_time(http, names: Names, account: str) -> None:
    create_collection(http, names)
    create_job(http, names, "queue", job_body(action=queue_action()))
    with unchanged(http, names.job_path("queue"), names.job_path("new")):
        for job in ("queue", "new"):
            response = put(http, names.job_path(job), job_body(action=queue_action(account)))
            assert_arm_error(response, 400, "BadRequest", ACCOUNT, message_contains="storage account name")
        changed = {"properties": {"action": {"queueMessage": {"storageAccount": account, "sasToken": "s"}}}}
        assert_arm_error(patch(http, names.job_path("queue"), changed), 400, "BadRequest", ACCOUNT)
    classic = _classic(http)
    assert classic.put_job("queue", {"action": queue_action(), "startTime": future()}).status_code == 201
    _assert_classic_refusal(classic, "queue", {"action": queue_action(account), "startTime": future()}, ACCOUNT)


@pytest.mark.parametrize("account", ["abc", "a" * 24, "devstoreaccount1", "0123"])
def test_a_valid_storage_account_name_is_accepted(http, names: Names, account: str) -> None:
    create_collection(http, names)
    created = create_job(http, names, "queue", job_body(action=queue_action(account)))
    assert created["properties"]["action"]["queueMessage"]["storageAccount"] == account


def test_a_sas_token_follows_its_storage_account_and_queue(http, backend, names: Names) -> None:
    create_collection(http, names)
    create_job(http, names, "queue", job_body(action=queue_action()))
    got = expect_ok(get(http, names.job_path("queue")))["properties"]
    assert "sasToken" not in got["action"]["queueMessage"]  # write-only
    # The GET's body sent back (no sasToken) keeps the stored one: same account and queue.
    expect_ok(put(http, names.job_path("queue"), {"properties": {k: v for k, v in got.items() if k != "status"}}))
    assert stored_job(backend, names, "queue")["definition"]["action"]["queueMessage"]["sasToken"] == "sv=1&sig=stored"
    field = "properties.action.queueMessage.sasToken"
    with unchanged(http, names.job_path("queue")):
        for moved in (queue_action("account2", sasToken=None), queue_action(queue="other", sasToken=None)):
            response = put(http, names.job_path("queue"), job_body(action=moved))
            assert_arm_error(response, 400, "BadRequest", field, message_contains="must be given again")
        changed = {"properties": {"action": {"queueMessage": {"queueName": "elsewhere"}}}}
        assert_arm_error(patch(http, names.job_path("queue"), changed), 400, "BadRequest", field)
    expect_ok(patch(http, names.job_path("queue"), {"properties": {"action": {"queueMessage": {"message": "x"}}}}))
    stored = stored_job(backend, names, "queue")["definition"]["action"]["queueMessage"]
    assert (stored["sasToken"], stored["message"]) == ("sv=1&sig=stored", "x")


# --- types are types: every integer field refuses a boolean ----------------------------------------------


# Every integer field of every body, as (target, path, body builder). The test below proves by walking the
# wire models that nothing is missing here.
def _job(**recurrence: Any) -> dict[str, Any]:
    return {
        "properties": {
            "startTime": future(),
            "action": {
                **http_action(retryPolicy={"retryType": "Fixed", "retryInterval": "PT30S", "retryCount": 1}),
                "errorAction": http_action(
                    retryPolicy={"retryType": "Fixed", "retryInterval": "PT1M", "retryCount": 1}
                ),
            },
            "recurrence": {
                "frequency": "Month",
                "interval": 1,
                "count": 5,
                "schedule": {
                    "hours": [1],
                    "minutes": [2],
                    "monthDays": [3],
                    "monthlyOccurrences": [{"day": "Monday", "occurrence": 1}],
                },
                **recurrence,
            },
        }
    }


JOB_INTEGERS = [
    "properties.action.retryPolicy.retryCount",
    "properties.action.errorAction.retryPolicy.retryCount",
    "properties.recurrence.interval",
    "properties.recurrence.count",
    "properties.recurrence.schedule.hours",
    "properties.recurrence.schedule.minutes",
    "properties.recurrence.schedule.monthDays",
    "properties.recurrence.schedule.monthlyOccurrences.occurrence",
]
COLLECTION_INTEGERS = [
    "properties.quota.maxJobCount",
    "properties.quota.maxJobOccurrence",
    "properties.quota.maxRecurrence.interval",
]
PREVIEW_INTEGERS = [
    "count",
    "recurrence.interval",
    "recurrence.count",
    "recurrence.schedule.hours",
    "recurrence.schedule.minutes",
    "recurrence.schedule.monthDays",
    "recurrence.schedule.monthlyOccurrences.occurrence",
]


def _integer_paths(model: Any, prefix: str = "") -> set[str]:
    """The wire path of every integer field in ``model`` and the models below it."""
    found: set[str] = set()
    for name, info in model.model_fields.items():
        wire = info.alias or to_camel(name)
        path = f"{prefix}{wire}"
        stack: list[Any] = [info.annotation]
        while stack:  # bounded: an annotation's arguments are finite and models are walked by recursion
            annotation = stack.pop()
            if annotation is int:
                found.add(path)
            elif isinstance(annotation, type) and issubclass(annotation, BaseModel):
                found |= _integer_paths(annotation, f"{path}.")
            else:
                stack.extend(typing.get_args(annotation))
    return found


def test_the_integer_fields_listed_are_every_integer_field_of_the_wire_models() -> None:
    assert _integer_paths(JobDefinitionIn) == set(JOB_INTEGERS)
    assert _integer_paths(JobCollectionIn) == set(COLLECTION_INTEGERS)
    assert _integer_paths(PreviewIn) == set(PREVIEW_INTEGERS)


def _with(body: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """``body`` with ``value`` at ``path``; a path through a list changes its first entry."""
    result = copy.deepcopy(body)
    node: Any = result
    parts = path.split(".")
    for part in parts[:-1]:
        node = node[part]
        if isinstance(node, list):
            node = node[0]
    node[parts[-1]] = value
    return result


@pytest.mark.parametrize("value", [True, False], ids=["true", "false"])
def test_a_boolean_in_any_integer_field_is_refused_on_both_surfaces(http, names: Names, value: bool) -> None:
    create_collection(http, names)
    create_job(http, names, "victim", _job())
    classic = _classic(http)
    assert classic.put_job("victim", _job()["properties"]).status_code == 201
    problems = []
    with unchanged(http, names.job_path("victim"), names.job_path("new"), names.collection_path):
        for path in JOB_INTEGERS:
            for job in ("victim", "new"):
                response = put(http, names.job_path(job), _with(_job(), path, value))
                error = response.json().get("error", {}) if response.status_code == 400 else {}
                if path.rsplit(".", 1)[-1] not in error.get("target", ""):
                    problems.append(f"ARM job {job} {path}: {response.status_code} {response.text[:200]}")
            classic_body = _with(_job(), path, value)["properties"]
            response = classic.put_job("victim", classic_body)
            if response.status_code != 400 or path.rsplit(".", 1)[-1] not in response.text:
                problems.append(f"classic job {path}: {response.status_code} {response.text[:200]}")
        collection = collection_body(
            quota={"maxJobCount": 5, "maxJobOccurrence": 5, "maxRecurrence": {"frequency": "Minute", "interval": 1}}
        )
        for path in COLLECTION_INTEGERS:
            response = put(http, names.collection_path, _with(collection, path, value))
            if response.status_code != 400 or response.json()["error"].get("target") != path:
                problems.append(f"ARM collection {path}: {response.status_code} {response.text[:200]}")
        preview = {"count": 3, **{k: v for k, v in _job()["properties"].items() if k != "action"}}
        for path in PREVIEW_INTEGERS:
            response = call(http, "POST", "/_emulator/recurrence/preview", _with(preview, path, value))
            if response.status_code != 400 or path.rsplit(".", 1)[-1] not in response.json()["error"].get("target", ""):
                problems.append(f"preview {path}: {response.status_code} {response.text[:200]}")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("element", ["MaxJobCount", "MaxJobOccurrence", "MaxRecurrence/Interval"])
@pytest.mark.parametrize("value", ["true", "\u0665", "5.0"])
def test_classic_collection_integers_take_ascii_digits_only(http, element: str, value: str) -> None:
    classic = Classic(http)
    classic.create_cloud_service()
    body = classic_collection_body(max_jobs=7)
    if element == "MaxRecurrence/Interval":
        body = body.replace("<Interval>1</Interval>", f"<Interval>{value}</Interval>")
    else:
        body = body.replace("<MaxJobCount>7</MaxJobCount>", f"<{element}>{value}</{element}>")
    response = classic.call(
        "PUT", classic.collection_path(tilde=False), body.encode(), headers={"content-type": "application/xml"}
    )
    message = assert_xml_error(response, 400, "BadRequest")
    assert element.split("/")[-1] in message, message
    assert classic.call("GET", classic.collection_path()).status_code == 404


# --- durations and dates: ASCII digits only --------------------------------------------------------------

NON_ASCII = [
    ("properties.action.retryPolicy.retryInterval", "PT\u0663\u0660S"),
    ("properties.action.retryPolicy.retryInterval", "00:00:\u0663\u0660"),
    ("properties.action.errorAction.retryPolicy.retryInterval", "PT\uff13\uff10S"),
    ("properties.startTime", "\u0662\u0660\u0663\u0660-01-01T00:00:00Z"),
    ("properties.recurrence.endTime", "2031-01-01T00:00:0\u0663Z"),
]


@pytest.mark.parametrize(
    ("path", "value"), NON_ASCII, ids=[f"{p.rsplit('.', 1)[-1]}-{i}" for i, (p, _) in enumerate(NON_ASCII)]
)
def test_durations_and_dates_take_ascii_digits_only_on_both_surfaces(http, names: Names, path: str, value: str) -> None:
    create_collection(http, names)
    create_job(http, names, "victim", _job())
    with unchanged(http, names.job_path("victim")):
        assert_arm_error(put(http, names.job_path("victim"), _with(_job(), path, value)), 400, "BadRequest", path)
    classic = _classic(http)
    assert classic.put_job("victim", _job()["properties"]).status_code == 201
    _assert_classic_refusal(classic, "victim", _with(_job(), path, value)["properties"], path)
