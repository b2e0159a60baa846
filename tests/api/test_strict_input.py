"""The poisoning cases of issue 13, one by one: each was stored (or answered 500) and broke later reads;
now each is refused with a 400/404/415 naming what is wrong, and reads keep working
(docs/reference/arm-api.md#request-bodies)."""

from __future__ import annotations

import json

import pytest
from starlette.testclient import TestClient
from support.api_calls import (
    assert_arm_error,
    call,
    collection_body,
    create_collection,
    create_job,
    expect_ok,
    get,
    job_body,
    put,
    unchanged,
)
from support.api_client import API
from support.raw_http import RawClient


@pytest.fixture
def http(app: TestClient) -> TestClient:
    """This module's requests go to the API in-process (conftest's ``app``): nothing process-level is under test."""
    return app


def _raw_put(http, path, text):
    return call(http, "PUT", path, content=text.encode("utf-8"))


@pytest.mark.parametrize(
    "value",
    ['"\\ud800"', '"a\\udfffb"', "NaN", "Infinity", "-Infinity", "1e400"],
    ids=["lone-high-surrogate", "lone-low-surrogate", "nan", "infinity", "minus-infinity", "1e400"],
)
def test_values_no_json_reader_can_store_are_refused_and_lists_keep_working(http, names, value):
    create_collection(http, names)
    create_job(http, names, "good")
    body = job_body()
    text = json.dumps(body).replace('"Hour"', '"Hour", "extra": ' + value)
    with unchanged(http, names.collection_path + "/jobs", names.job_path("poison")):
        assert_arm_error(_raw_put(http, names.job_path("poison"), text), 400, "InvalidRequestContent")
    expect_ok(get(http, names.collection_path + "/jobs"))
    expect_ok(get(http, names.job_path("good")))


@pytest.mark.parametrize("depth", [33, 500, 30000])
def test_nesting_deeper_than_32_is_invalid_content(http, names, depth):
    create_collection(http, names)
    text = '{"location": "westus", "tags": {"t": "x"}, "extra": ' + "[" * depth + "]" * depth + "}"
    with unchanged(http, names.collection_path):
        assert_arm_error(
            _raw_put(http, names.collection_path, text), 400, "InvalidRequestContent", message_contains="32"
        )


def test_nesting_of_32_is_accepted(http, names):
    text = '{"location": "westus", "extra": ' + "[" * 31 + "]" * 31 + "}"
    assert _raw_put(http, names.collection_path, text).status_code == 201


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("recurrence.count", 2**63),
        ("recurrence.count", 2**31),
        ("recurrence.interval", 2**64),
        ("recurrence.schedule.minutes", [2**63]),
        ("action.retryPolicy.retryInterval", "P99999999999Y"),
        ("action.retryPolicy.retryInterval", "99999999999.00:00:00"),
        ("startTime", "0001-01-01T00:00:00+14:00"),
        ("recurrence.endTime", "9999-12-31T23:59:59-14:00"),
        ("action.request.uri", "http://127.0.0.1:99999/x"),
        ("action.request.uri", "http://127.0.0.1:9/a\u0000b"),
        ("action.request.uri", "http://127.0.0.1:9/a\nb"),
        ("action.request.body", "a\u0000b"),
        ("action.request.headers.x-test", "1\r\nX-Injected: 1"),
    ],
)
def test_out_of_range_values_are_refused_naming_the_field(http, names, field, value):
    create_collection(http, names)
    create_job(http, names, "victim")
    body = job_body(
        action={
            "type": "Http",
            "request": {"uri": "http://127.0.0.1:9/x", "method": "GET", "headers": {"x-test": "1"}},
            "retryPolicy": {"retryType": "Fixed", "retryInterval": "PT30S", "retryCount": 1},
        },
        recurrence={"frequency": "Minute", "interval": 1, "schedule": {"minutes": [0]}},
    )
    node = body["properties"]
    *parents, last = field.split(".")
    for part in parents:
        node = node.setdefault(part, {})
    node[last] = value
    path = "properties." + (field if not field.startswith("action.request.headers") else "action.request.headers")
    with unchanged(http, names.job_path("victim"), names.collection_path + "/jobs"):
        error = assert_arm_error(put(http, names.job_path("victim"), body), 400, "BadRequest")
    assert error["target"].startswith(path), error
    expect_ok(get(http, names.collection_path + "/jobs"))


@pytest.mark.parametrize("parameter", ["$skip", "$top"])
@pytest.mark.parametrize("value", [str(2**63), str(2**64), "9" * 40])
def test_paging_numbers_beyond_range_are_refused(http, names, parameter, value):
    create_collection(http, names)
    assert_arm_error(get(http, names.collection_path + "/jobs", **{parameter: value}), 400, "BadRequest", parameter)


@pytest.mark.parametrize("now", ["9999-12-31T00:00:00Z", "9998-12-01T00:00:00Z", "9999-12-31T23:59:59-14:00"])
def test_preview_near_year_9999_is_refused(http, now):
    response = call(
        http,
        "POST",
        "/_emulator/recurrence/preview",
        {"now": now, "recurrence": {"frequency": "Month"}},
        api_version=None,
    )
    assert_arm_error(response, 400, "BadRequest")


def test_control_characters_in_location_and_tags_are_refused(http, names):
    for body, target in (
        (collection_body(location="west\u0000us"), "location"),
        (collection_body(location="west\nus"), "location"),
        (collection_body(tags={"a": "b\u0000"}), "tags.a"),
        (collection_body(tags={"a\u0000": "b"}), "tags"),
    ):
        with unchanged(http, names.collection_path, names.rg_path + "/jobCollections"):
            assert_arm_error(put(http, names.collection_path, body), 400, "BadRequest", target)


@pytest.mark.parametrize(
    "segment", [".", "..", "%2e%2e", "a%00b", "a%0Ab", "a%3Fb", "a%23b", "a%5Cb", "abc.", "-abc", "caf%C3%A9"]
)
def test_names_that_cannot_name_a_resource_are_refused_and_never_reach_one(server, http, names, segment):
    create_collection(http, names)
    create_job(http, names, "victim")
    raw = RawClient(server)
    query = f"?api-version={API}"
    try:
        job_text = json.dumps(job_body()).encode()
        headers = {"content-type": "application/json"}
        status, data, _ = raw.request("PUT", f"{names.collection_path}/jobs/{segment}{query}", headers, job_text)
        assert status == 400 and b"InvalidResourceName" in data, (status, data)
        status, data, _ = raw.request(
            "PUT", f"{names.rg_path}/jobCollections/{segment}{query}", headers, b'{"location": "westus"}'
        )
        assert status == 400 and b"InvalidResourceName" in data, (status, data)
        for method in ("DELETE", "GET"):
            status, data, _ = raw.request(method, f"{names.collection_path}/jobs/{segment}{query}", {}, None)
            assert status == 404, (method, status, data)
        status, _, _ = raw.request("DELETE", f"{names.rg_path}/jobCollections/{segment}{query}", {}, None)
        assert status == 404
    finally:
        raw.close()
    expect_ok(get(http, names.collection_path))
    expect_ok(get(http, names.job_path("victim")))
    jobs = expect_ok(get(http, names.collection_path + "/jobs"))["value"]
    assert [job["name"] for job in jobs] == [f"{names.collection}/victim"]


def test_names_of_every_allowed_character_are_accepted(http, names):
    create_collection(http, names)
    for name in ("a", "A-b_c.d", "9" * 100, "x.y.z"):
        create_job(http, names, name)


@pytest.mark.parametrize(
    "content_type", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"]
)
def test_a_cross_site_form_post_cannot_run_or_change_anything(http, names, content_type):
    create_collection(http, names)
    create_job(http, names, "victim")
    with unchanged(http, names.job_path("victim"), names.job_path("victim") + "/history", names.collection_path):
        for method, path, content in (
            ("POST", names.job_path("victim") + "/run", ""),
            ("POST", names.collection_path + "/disable", ""),
            ("PATCH", names.job_path("victim"), '{"properties": {"state": "Disabled"}}'),
            ("PUT", names.collection_path, '{"location": "northeurope"}'),
        ):
            response = call(http, method, path, content=content, headers={"content-type": content_type})
            assert_arm_error(response, 415, "UnsupportedMediaType")


@pytest.mark.parametrize("content_type", ["application/json", "application/json; charset=utf-8", "text/x+json"])
def test_json_content_types_are_accepted(http, names, content_type):
    response = call(
        http, "PUT", names.collection_path, content=b'{"location": "westus"}', headers={"content-type": content_type}
    )
    assert response.status_code == 201, response.text


def test_a_body_less_post_may_omit_the_content_type(http, names):
    create_collection(http, names)
    create_job(http, names, "victim")
    response = http.post(names.job_path("victim") + "/run", params={"api-version": API})
    assert "content-type" not in response.request.headers
    assert response.status_code == 200, response.text


def test_a_chunked_body_over_the_cap_is_refused_while_read(http, names):
    """No Content-Length to refuse up front: the body is counted as it arrives (64 KiB by default)."""
    create_collection(http, names)

    def chunks():
        yield b'{"location": "westus", "tags": {"t": "'
        for _ in range(80):  # 80 KiB in all
            yield b"x" * 1024
        yield b'"}}'

    with unchanged(http, names.collection_path):
        response = http.put(
            names.collection_path,
            params={"api-version": API},
            content=chunks(),
            headers={"content-type": "application/json"},
        )
        assert "content-length" not in response.request.headers
        assert_arm_error(response, 413, "RequestEntityTooLarge")
