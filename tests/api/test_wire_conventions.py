"""The wire conventions and limits (docs/reference/arm-api.md#wire-conventions, docs/reference/arm-api.md#limits) on
the wire: api-version, request-id headers, the ARM error shape on every kind of failure, case-insensitive paths and
names, and the URL length limit."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient
from support.api_calls import (
    ACCEPTED_API_VERSIONS,
    assert_arm_error,
    call,
    collection_body,
    create_collection,
    create_job,
    delete,
    expect_ok,
    get,
    job_body,
    put,
    unchanged,
)
from support.names import Names


@pytest.fixture
def http(app: TestClient) -> TestClient:
    """This module's requests go to the API in-process (conftest's ``app``): nothing process-level is under test."""
    return app


# ------------------------------------------------------------------------------------------ api-version


def test_missing_api_version_is_refused_on_read(http, names):
    create_collection(http, names)
    response = call(http, "GET", names.collection_path, api_version=None)
    assert_arm_error(response, 400, "MissingApiVersionParameter")


def test_missing_api_version_is_refused_on_write_and_stores_nothing(http, names):
    with unchanged(http, names.collection_path, names.rg_path + "/jobCollections"):
        response = call(http, "PUT", names.collection_path, collection_body(), api_version=None)
        assert_arm_error(response, 400, "MissingApiVersionParameter")


def test_empty_api_version_counts_as_missing(http, names):
    with unchanged(http, names.collection_path):
        response = call(http, "PUT", names.collection_path, collection_body(), api_version="")
        assert_arm_error(response, 400, "MissingApiVersionParameter")


@pytest.mark.parametrize("version", ["2015-01-01", "2016-03-01-preview", "latest", "2016-3-1"])
def test_unknown_api_version_is_refused_listing_the_accepted_ones(http, names, version):
    with unchanged(http, names.collection_path):
        response = call(http, "PUT", names.collection_path, collection_body(), api_version=version)
        error = assert_arm_error(response, 400, "InvalidApiVersionParameter")
    for accepted in ACCEPTED_API_VERSIONS:
        assert accepted in error["message"]


def test_unknown_api_version_is_refused_on_an_existing_job(http, names):
    create_collection(http, names)
    create_job(http, names, "job")
    with unchanged(http, names.job_path("job")):
        response = call(http, "PUT", names.job_path("job"), job_body(state="Disabled"), api_version="2099-01-01")
        assert_arm_error(response, 400, "InvalidApiVersionParameter")
        response = call(http, "DELETE", names.job_path("job"), api_version="2099-01-01")
        assert_arm_error(response, 400, "InvalidApiVersionParameter")


@pytest.mark.parametrize("version", ACCEPTED_API_VERSIONS)
def test_every_accepted_api_version_works(http, names, version):
    created = call(http, "PUT", names.collection_path, collection_body(), api_version=version)
    assert created.status_code == 201, created.text
    job = call(http, "PUT", names.job_path("job"), job_body(), api_version=version)
    assert job.status_code == 201, job.text
    for path in (
        names.collection_path,
        names.job_path("job"),
        names.job_path("job") + "/history",
        names.collection_path + "/jobs",
        names.rg_path + "/jobCollections",
    ):
        response = call(http, "GET", path, api_version=version)
        assert response.status_code == 200, (path, response.text)
    assert call(http, "DELETE", names.collection_path, api_version=version).status_code == 200


# --------------------------------------------------------------------------------------------- headers


def test_request_id_is_new_per_request(http, names):
    create_collection(http, names)
    ids = [get(http, names.collection_path).headers.get("x-ms-request-id") for _ in range(3)]
    assert all(ids), ids
    assert len(set(ids)) == 3


def test_request_ids_are_on_error_responses_too(http, names):
    responses = [
        get(http, names.collection_path),  # 404
        call(http, "GET", names.collection_path, api_version=None),  # 400 from the pipeline
        call(http, "PUT", names.collection_path, content="{nope"),  # 400 from a handler
    ]
    ids = [r.headers.get("x-ms-request-id") for r in responses]
    assert all(ids), [dict(r.headers) for r in responses]
    assert len(set(ids)) == len(ids)
    assert all(r.headers.get("x-ms-correlation-request-id") for r in responses)


def test_correlation_request_id_is_echoed(http, names):
    create_collection(http, names)
    response = call(http, "GET", names.collection_path, headers={"x-ms-correlation-request-id": "corr-42"})
    assert response.headers["x-ms-correlation-request-id"] == "corr-42"
    error = call(http, "GET", names.job_path("absent"), headers={"x-ms-correlation-request-id": "corr-43"})
    assert error.status_code == 404
    assert error.headers["x-ms-correlation-request-id"] == "corr-43"


def test_correlation_request_id_is_new_when_not_sent(http, names):
    create_collection(http, names)
    first = get(http, names.collection_path).headers.get("x-ms-correlation-request-id")
    second = get(http, names.collection_path).headers.get("x-ms-correlation-request-id")
    assert first and second and first != second


def test_client_request_id_is_echoed(http, names):
    create_collection(http, names)
    response = call(http, "GET", names.collection_path, headers={"x-ms-client-request-id": "client-7"})
    assert response.headers["x-ms-client-request-id"] == "client-7"
    error = call(http, "GET", names.collection_path, api_version="bad", headers={"x-ms-client-request-id": "c-8"})
    assert error.status_code == 400
    assert error.headers["x-ms-client-request-id"] == "c-8"


# ---------------------------------------------------------------------------------------- error shape


@pytest.mark.parametrize(
    "path",
    [
        "/no/such/route",
        "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg/providers/Microsoft.Scheduler/things",
        "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg/providers/Microsoft.Scheduler"
        "/jobCollections/jc/jobs/j/unknown",
    ],
)
def test_unknown_route_is_an_arm_404(http, path):
    response = get(http, path)
    assert response.status_code == 404
    assert response.headers.get("x-ms-request-id")
    body = response.json()
    assert "detail" not in body
    assert_arm_error(response, 404, body["error"]["code"])


@pytest.mark.parametrize(
    ("method", "suffix"),
    [("POST", ""), ("PUT", "/jobs"), ("DELETE", "/jobs"), ("GET", "/enable"), ("PATCH", "/disable")],
)
def test_wrong_method_is_an_arm_error(http, names, method, suffix):
    create_collection(http, names)
    with unchanged(http, names.collection_path, names.collection_path + "/jobs"):
        response = call(http, method, names.collection_path + suffix, {"location": "westus"})
        assert response.status_code == 405, response.text
        body = response.json()
        assert "detail" not in body
        assert_arm_error(response, 405, body["error"]["code"])


def test_missing_resource_is_resource_not_found(http, names):
    assert_arm_error(get(http, names.collection_path), 404, "ResourceNotFound")
    create_collection(http, names)
    assert_arm_error(get(http, names.job_path("absent")), 404, "ResourceNotFound")


# ----------------------------------------------------------------------------------------- path casing


def _shout(names, job: str | None = None) -> str:
    """The collection (or job) path with every literal segment and every name in another casing."""
    path = (
        f"/SUBSCRIPTIONS/{names.subscription.upper()}/RESOURCEGROUPS/{names.resource_group.upper()}"
        f"/PROVIDERS/MICROSOFT.SCHEDULER/JOBCOLLECTIONS/{names.collection.upper()}"
    )
    return f"{path}/JOBS/{job.upper()}" if job else path


def test_literal_segments_and_names_match_case_insensitively(http, names):
    names.collection = "MyCollection-" + names.collection
    create_collection(http, names)
    create_job(http, names, "MyJob")
    collection = expect_ok(get(http, _shout(names)))
    assert collection["name"] == names.collection
    assert collection["id"] == names.collection_path
    job = expect_ok(get(http, _shout(names, "MyJob")))
    assert job["id"] == names.job_path("MyJob")
    assert job["name"] == f"{names.collection}/MyJob"
    assert expect_ok(get(http, names.collection_path.lower()))["id"] == names.collection_path
    jobs = expect_ok(get(http, _shout(names) + "/JoBs"))
    assert [j["name"] for j in jobs["value"]] == [f"{names.collection}/MyJob"]
    history = get(http, _shout(names, "MyJob") + "/HISTORY")
    assert expect_ok(history) == {"value": []}
    shouted_list = f"/subscriptions/{names.subscription.upper()}/PROVIDERS/microsoft.scheduler/JobCollections"
    listed = expect_ok(get(http, shouted_list))
    assert [c["id"] for c in listed["value"]] == [names.collection_path]
    listed = expect_ok(get(http, _shout(names).rsplit("/", 1)[0]))
    assert [c["id"] for c in listed["value"]] == [names.collection_path]


def test_names_keep_their_creation_casing_when_written_in_another(http, names):
    names.collection = "Original-" + names.collection
    create_collection(http, names)
    create_job(http, names, "CamelJob")
    replaced = put(http, _shout(names), collection_body(tags={"k": "v"}))
    assert replaced.status_code == 201, replaced.text  # a replace, answered 201 as the service did
    assert replaced.json()["name"] == names.collection
    assert replaced.json()["id"] == names.collection_path
    job = put(http, _shout(names, "camelJob"), job_body(state="Disabled"))
    assert job.status_code == 200, job.text
    assert job.json()["name"] == f"{names.collection}/CamelJob"
    assert job.json()["id"] == names.job_path("CamelJob")
    jobs = expect_ok(get(http, names.collection_path + "/jobs"))["value"]
    assert [j["name"] for j in jobs] == [f"{names.collection}/CamelJob"]


def test_enable_and_disable_segments_are_case_insensitive(http, names):
    create_collection(http, names)
    assert call(http, "POST", _shout(names) + "/DISABLE").status_code == 200
    assert expect_ok(get(http, names.collection_path))["properties"]["state"] == "Disabled"
    assert call(http, "POST", _shout(names) + "/Enable").status_code == 200
    assert expect_ok(get(http, names.collection_path))["properties"]["state"] == "Enabled"


# ------------------------------------------------------------------------------------------ URL length


def test_url_over_2048_characters_is_refused(http, names):
    create_collection(http, names)
    long_name = "j" * 2100
    with unchanged(http, names.collection_path, names.collection_path + "/jobs"):
        response = put(http, names.job_path(long_name), job_body())
        assert response.status_code == 400, response.text
        body = response.json()
        assert_arm_error(response, 400, body["error"]["code"])
        assert "2048" in body["error"]["message"]
    response = get(http, names.collection_path, padding="x" * 2100)
    assert response.status_code == 400
    assert "detail" not in response.json()


def test_url_under_2048_characters_is_served(http, names):
    create_collection(http, names)
    # Path and query well under the limit: served normally (a missing job is a plain 404).
    name = "j" * (1900 - len(names.job_path("")))
    assert_arm_error(get(http, names.job_path(name)), 404, "ResourceNotFound")


# ---------------------------------------------------------------------------------------- name length


@pytest.mark.parametrize("part", ["subscription", "resource_group", "collection", "job"])
def test_overlong_names_are_refused_not_a_server_error(http, part):
    names = Names()
    job = "job"
    if part == "job":
        create_collection(http, names)
        job = "n" * 101
    else:
        setattr(names, part, "n" * 101)
    path, body = (names.job_path(job), job_body()) if part == "job" else (names.collection_path, collection_body())
    listing = f"/subscriptions/{names.subscription}/providers/Microsoft.Scheduler/jobCollections"
    with unchanged(http, listing, names.rg_path + "/jobCollections", path):
        response = put(http, path, body)
        assert response.status_code == 400, response.text
        error = assert_arm_error(response, 400, response.json()["error"]["code"])
        assert "100" in error["message"]


def test_names_of_100_characters_are_accepted(http):
    names = Names(subscription="s" * 100, resource_group="r" * 100, collection="c" * 100)
    created = create_collection(http, names)
    assert created["id"] == names.collection_path
    job = create_job(http, names, "j" * 100)
    assert job["name"] == f"{names.collection}/{'j' * 100}"
    assert expect_ok(get(http, names.job_path("J" * 100)))["id"] == names.job_path("j" * 100)
    assert delete(http, names.collection_path).status_code == 200


# ------------------------------------------------------------------------------------------- body size


def test_body_over_one_mebibyte_is_refused(http, names):
    create_collection(http, names)
    huge = '{"location": "westus", "tags": {"t": "' + "x" * (1024 * 1024 + 10) + '"}}'
    with unchanged(http, names.collection_path):
        response = call(http, "PUT", names.collection_path, content=huge)
        assert response.status_code in (400, 413), response.text
        body = response.json()
        assert_arm_error(response, response.status_code, body["error"]["code"])
        assert body["error"]["code"] not in ("BadRequest", "InvalidRequestContent")


def test_body_over_one_mebibyte_is_refused_when_sent_chunked(http, names):
    def chunks():
        yield b'{"location": "westus", "tags": {"t": "'
        for _ in range(1025):
            yield b"x" * 1024
        yield b'"}}'

    with unchanged(http, names.collection_path):
        response = call(http, "PUT", names.collection_path, content=chunks())
        assert response.status_code in (400, 413), response.text[:300]
        body = response.json()
        assert_arm_error(response, response.status_code, body["error"]["code"])
        assert body["error"]["code"] not in ("BadRequest", "InvalidRequestContent")


@pytest.mark.parametrize(
    "content",
    ["{", '{"location": "westus",}', "not json", "", "[]", '"westus"', "\xff\xfe{}"],
    ids=["unclosed", "trailing-comma", "text", "empty", "array", "string", "not-utf8"],
)
def test_malformed_json_is_invalid_request_content(http, names, content):
    create_collection(http, names)
    raw = content.encode("latin-1")
    with unchanged(http, names.collection_path, names.job_path("job")):
        assert_arm_error(call(http, "PUT", names.collection_path, content=raw), 400, "InvalidRequestContent")
        assert_arm_error(call(http, "PATCH", names.collection_path, content=raw), 400, "InvalidRequestContent")
        assert_arm_error(call(http, "PUT", names.job_path("job"), content=raw), 400, "InvalidRequestContent")
