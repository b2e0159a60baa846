"""Security rules on the API (SPEC §11): the Service Bus namespace rule, and a stored secret that follows
its target (kept on PUT/PATCH only while the authentication type and the target stay the same)."""

from __future__ import annotations

from typing import Any

import pytest
from api_support import (
    assert_arm_error,
    create_collection,
    create_job,
    expect_ok,
    http_action,
    job_body,
    patch,
    put,
    stored_job,
    unchanged,
)
from conftest import Names

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
