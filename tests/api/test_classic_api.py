"""The classic (2014) surface on the wire (docs/reference/classic-api.md), driven over plain HTTP(S) against the session
server on both stores: cloud services, job collections (XML), jobs (flat JSON), history, operations, errors, and one
store shared with ARM. The official clients drive the same server in tests/e2e/test_classic_clients.py."""

from __future__ import annotations

import base64
import json
import re
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from starlette.testclient import TestClient
from support.api_calls import future, http_action
from support.classic_api import (
    CS_BODY,
    NS,
    Classic,
    assert_json_error,
    assert_xml_error,
    collection_body,
    job,
    text,
    xml,
)
from support.clocks import SetClock
from support.server import ServerProcess
from support.target_server import TargetServer
from support.waiting import wait_until


@pytest.fixture
def http(app: TestClient) -> TestClient:
    """This module's requests go to the API in-process (conftest's ``app``): nothing process-level is under test."""
    return app


@pytest.fixture
def classic(http: httpx.Client) -> Classic:
    return Classic(http)


# --- cross-cutting ------------------------------------------------------------------------------------


def test_x_ms_version_is_required_and_any_date_from_2013_03_01_is_accepted(classic: Classic) -> None:
    path = f"/{classic.subscription}/CloudServices"
    assert_xml_error(classic.http.get(path), 400, "MissingOrIncorrectVersionHeader")
    assert_xml_error(
        classic.http.get(path, headers={"x-ms-version": "2012-08-01"}), 400, "MissingOrIncorrectVersionHeader"
    )
    assert_xml_error(classic.http.get(path, headers={"x-ms-version": "latest"}), 400, "MissingOrIncorrectVersionHeader")
    for version in ("2013-03-01", "2014-10-01", "2099-01-01"):
        assert classic.http.get(path, headers={"x-ms-version": version}).status_code == 200


def test_a_wrong_api_version_is_refused_and_none_is_fine(classic: Classic) -> None:
    classic.create_collection()
    assert classic.call("GET", classic.collection_path()).status_code == 200
    response = classic.call("GET", classic.collection_path(), params={"api-version": "2016-03-01"})
    assert_xml_error(response, 400, "BadRequest")


def test_the_preview_api_version_of_blog_era_clients_is_answered_as_2014_04_01(classic: Classic) -> None:
    """2013-10-31_Preview, with the x-ms-version a February 2014 PowerShell walk-through sent (2013-08-01): the
    collection, the job calls it made (list, get, patch) and the rest of a job's life answer as with 2014-04-01."""
    classic.create_collection()
    blog = {"x-ms-version": "2013-08-01", "content-type": "application/json; charset=utf-8"}

    def preview(method: str, path: str, body: Any = None, version: str = "2013-10-31_Preview") -> httpx.Response:
        content = None if body is None else json.dumps(body).encode()
        return classic.call(method, path, content, params={"api-version": version}, headers=blog)

    collection = preview("GET", classic.collection_path())
    assert collection.status_code == 200, collection.text
    assert text(xml(collection), "Name") == classic.collection
    start = future()
    created = preview("PUT", classic.jobs_path + "/send_newsletter", job(start))
    assert created.status_code == 201, created.text
    assert preview("GET", classic.jobs_path).json() == classic.job_call("GET", classic.jobs_path).json()
    got = preview("GET", classic.jobs_path + "/send_newsletter")
    assert got.status_code == 200 and got.json()["startTime"] == start
    patched = preview("PATCH", classic.jobs_path + "/send_newsletter", {"state": "Disabled"})
    assert patched.status_code == 200, patched.text
    assert classic.job_call("GET", classic.jobs_path + "/send_newsletter").json()["state"] == "disabled"
    assert preview("GET", classic.jobs_path + "/send_newsletter/history").json() == []
    assert preview("GET", classic.jobs_path + "/send_newsletter", version="2013-10-31_PREVIEW").status_code == 200
    refused = preview("GET", classic.jobs_path, version="2013-10-30_Preview")
    assert "2013-10-31_Preview" in assert_json_error(refused, 400, "BadRequest")
    assert preview("DELETE", classic.jobs_path + "/send_newsletter").status_code == 200
    assert classic.job_call("GET", classic.jobs_path + "/send_newsletter").status_code == 404


def test_paths_match_in_any_case_with_or_without_tilde_and_trailing_slash(classic: Classic) -> None:
    classic.create_collection()
    for path in (
        classic.collection_path(tilde=True),
        classic.collection_path(tilde=False),
        classic.collection_path().replace("JobCollections", "jobCollections").replace("cloudservices", "CLOUDSERVICES"),
        classic.collection_path() + "/",
    ):
        response = classic.call("GET", path)
        assert response.status_code == 200, (path, response.text)
        assert text(xml(response), "Name") == classic.collection
    assert classic.put_job("j1").status_code == 201
    listed = classic.call("GET", classic.jobs_path + "/", params={"api-version": "2014-04-01"})
    assert [item["id"] for item in listed.json()] == ["j1"]


def test_register_properties_and_entitle(classic: Classic) -> None:
    register = classic.call(
        "PUT", f"/{classic.subscription}/services", params={"service": "scheduler.JobCollections", "action": "register"}
    )
    assert register.status_code == 200
    properties = xml(classic.call("GET", f"/{classic.subscription}/resourceproviders/scheduler/Properties"))
    keys = [item.findtext(NS + "Key") for item in properties]
    assert keys == ["plans", "regions"]
    entitle = classic.call(
        "POST",
        f"/{classic.subscription}/EntitleResource",
        "<EntitleResource xmlns='http://schemas.microsoft.com/windowsazure'><ResourceProviderNameSpace>scheduler"
        "</ResourceProviderNameSpace><Type>JobCollections</Type></EntitleResource>",
        headers={"content-type": "application/xml"},
    )
    assert entitle.status_code == 202


# --- cloud services -----------------------------------------------------------------------------------


def test_cloud_service_create_poll_get_list_delete(classic: Classic) -> None:
    created = classic.create_cloud_service()
    operation_id = created.headers["x-ms-request-id"]
    operation = xml(classic.call("GET", f"/{classic.subscription}/operations/{operation_id}"))
    assert operation.tag == NS + "Operation"
    assert text(operation, "Status") == "Succeeded"
    assert text(operation, "HttpStatusCode") == "200"
    assert operation.find(NS + "Error") is None  # the Python waiter treats any Error element as failure

    got = xml(classic.call("GET", classic.cs_path.replace("CloudServices", "cloudservices")))
    assert (text(got, "Name"), text(got, "Label"), text(got, "Description")) == (
        classic.cloud_service,
        "classic demo",
        "demo service",
    )
    assert text(got, "GeoRegion") == text(got, "GeoLocation") == "West US"
    listed = xml(classic.call("GET", f"/{classic.subscription}/CloudServices"))
    assert [text(item, "Name") for item in listed] == [classic.cloud_service]

    assert classic.call("DELETE", classic.cs_path).status_code == 202
    assert_xml_error(classic.call("GET", classic.cs_path), 404, "ResourceNotFound")
    assert_xml_error(classic.call("DELETE", classic.cs_path), 404, "ResourceNotFound")
    assert_xml_error(classic.call("GET", f"/{classic.subscription}/operations/nope"), 404, "ResourceNotFound")


def test_creating_an_existing_cloud_service_is_a_conflict(classic: Classic) -> None:
    classic.create_cloud_service()
    again = classic.call(
        "PUT", classic.cs_path.upper().replace(classic.subscription.upper(), classic.subscription), CS_BODY
    )
    assert_xml_error(again, 409, "ConflictError")


def test_deleting_a_cloud_service_deletes_its_collections_and_jobs(classic: Classic) -> None:
    classic.create_collection()
    assert classic.put_job("j1").status_code == 201
    assert classic.call("DELETE", classic.cs_path).status_code == 202
    assert classic.arm("GET", classic.arm_collection()).status_code == 404
    assert_json_error(classic.job_call("GET", classic.jobs_path + "/j1"), 404, "ResourceNotFound")


# --- job collections ----------------------------------------------------------------------------------


def test_collection_create_get_and_its_arm_view(classic: Classic) -> None:
    classic.create_collection()
    got = xml(classic.call("GET", classic.collection_path()))
    assert text(got, "Name") == classic.collection
    assert text(got, "IntrinsicSettings/Plan") == text(got, "Plan") == "Standard"
    assert text(got, "IntrinsicSettings/Quota/MaxJobCount") == "50"
    assert text(got, "IntrinsicSettings/Quota/MaxRecurrence/Frequency") == "Minute"
    assert base64.b64decode(text(got, "Label") or "").decode() == "bar collection"
    assert text(got, "State") == "Started"
    assert text(got, "Type") == "jobcollections"
    assert text(got, "ResourceProviderNamespace") == "scheduler"
    assert re.fullmatch(r"[0-9a-f]{32}", text(got, "ETag") or "")
    arm = classic.arm("GET", classic.arm_collection()).json()
    assert arm["location"] == "West US"
    assert arm["properties"]["sku"]["name"] == "Standard"
    assert arm["properties"]["quota"]["maxJobCount"] == 50
    service = xml(classic.call("GET", classic.cs_path))
    assert [text(item, "Name") for item in service.iter(NS + "Resource")] == [classic.collection]


def test_python_client_body_with_lower_case_plan_and_no_quota(classic: Classic) -> None:
    classic.create_cloud_service()
    body = (
        '<Resource xmlns:i="http://www.w3.org/2001/XMLSchema-instance" xmlns="http://schemas.microsoft.com/windowsazure">'
        "<IntrinsicSettings><plan>Free</plan></IntrinsicSettings></Resource>"
    )
    response = classic.call(
        "PUT",
        classic.collection_path(tilde=False).replace("JobCollections", "jobCollections"),
        body,
        headers={"content-type": "application/atom+xml;type=entry;charset=utf-8"},
    )
    assert response.status_code == 202, response.text
    assert text(xml(classic.call("GET", classic.collection_path())), "IntrinsicSettings/Plan") == "Free"
    assert classic.arm("GET", classic.arm_collection()).json()["properties"]["sku"]["name"] == "Free"


def test_name_availability_npm_and_python_shapes(classic: Classic) -> None:
    classic.create_cloud_service()
    base = f"/{classic.subscription}/cloudservices/{classic.cloud_service}/resources/scheduler/JobCollections/"
    params = {"op": "checknameavailability", "resourceName": classic.collection}

    def npm() -> str | None:
        return text(xml(classic.call("GET", base, params=params)), "IsAvailable")

    def python() -> str | None:
        return text(xml(classic.call("POST", base.rstrip("/"), b"", params=params)), "Result")

    assert (npm(), python()) == ("true", "true")
    classic.create_collection(cloud_service=False)
    params["resourceName"] = classic.collection.upper()
    assert (npm(), python()) == ("false", "false")
    assert_xml_error(classic.call("GET", base), 400, "BadRequest")


def test_update_needs_the_current_etag(classic: Classic, app_clock: SetClock) -> None:
    classic.create_collection()
    before = xml(classic.call("GET", classic.collection_path()))
    etag = text(before, "ETag")
    update = collection_body(max_jobs=40, label=None).replace("<IntrinsicSettings>", "<ETag/><IntrinsicSettings>")
    path = classic.collection_path(tilde=False)
    assert_xml_error(classic.call("PUT", path, update), 409, "ConflictError")
    assert_xml_error(classic.call("PUT", path, update, headers={"if-match": "0" * 32}), 412, "PreconditionFailed")
    assert ET.tostring(xml(classic.call("GET", classic.collection_path()))) == ET.tostring(before)

    app_clock.moment += timedelta(seconds=1)  # time passes between two writes (the ETag follows the update time)
    assert classic.call("PUT", path, update, headers={"if-match": etag or ""}).status_code == 202
    after = xml(classic.call("GET", classic.collection_path()))
    assert text(after, "IntrinsicSettings/Quota/MaxJobCount") == "40"
    assert base64.b64decode(text(after, "Label") or "").decode() == "bar collection"  # an omitted label is kept
    assert text(after, "ETag") != etag
    assert_xml_error(classic.call("PUT", path, update, headers={"if-match": etag or ""}), 412, "PreconditionFailed")
    assert classic.call("PUT", path, collection_body(plan="Premium"), headers={"if-match": "*"}).status_code == 202
    assert classic.arm("GET", classic.arm_collection()).json()["properties"]["sku"]["name"] == "P10Premium"
    missing = classic.call(
        "PUT", classic.collection_path(tilde=False, collection="nojc"), update, headers={"if-match": "*"}
    )
    assert_xml_error(missing, 404, "ResourceNotFound")


def test_collection_in_a_missing_cloud_service_is_not_created(classic: Classic) -> None:
    response = classic.call("PUT", classic.collection_path(tilde=False), collection_body())
    assert_xml_error(response, 404, "ResourceNotFound")
    assert classic.arm("GET", classic.arm_collection()).status_code == 404


def test_collection_rules_are_the_arm_rules(classic: Classic) -> None:
    classic.create_cloud_service()
    path = classic.collection_path(tilde=False)
    assert_xml_error(classic.call("PUT", path, collection_body(plan="Gold")), 400, "BadRequest")
    second = collection_body().replace("Minute", "Second")
    assert "frequency" in assert_xml_error(classic.call("PUT", path, second), 400, "BadRequest")
    # A quota above the plan is the core's field error on both surfaces (400, naming the field)
    above = assert_xml_error(classic.call("PUT", path, collection_body(max_jobs=100_000)), 400, "BadRequest")
    assert "maxJobCount" in above
    assert classic.arm("GET", classic.arm_collection()).status_code == 404
    # ...and a second Free collection in the subscription a conflict
    assert classic.call("PUT", path, collection_body(plan="Free", max_jobs=5, frequency="Hour")).status_code == 202
    other = classic.collection_path(tilde=False, collection="second-free")
    assert_xml_error(
        classic.call("PUT", other, collection_body(plan="Free", max_jobs=5, frequency="Hour")), 409, "ConflictError"
    )


def test_collection_delete(classic: Classic) -> None:
    classic.create_collection()
    assert classic.put_job("j1").status_code == 201
    assert classic.call("DELETE", classic.collection_path(tilde=False)).status_code == 202
    assert_xml_error(classic.call("GET", classic.collection_path()), 404, "ResourceNotFound")
    assert_xml_error(classic.call("DELETE", classic.collection_path(tilde=False)), 404, "ResourceNotFound")


def test_an_arm_resource_group_is_a_cloud_service(classic: Classic) -> None:
    created = classic.arm(
        "PUT", classic.arm_collection(), {"location": "northeurope", "properties": {"sku": {"name": "Standard"}}}
    )
    assert created.status_code == 201, created.text
    service = xml(classic.call("GET", classic.cs_path))
    assert text(service, "GeoRegion") == "North Europe"
    assert [text(item, "Name") for item in service.iter(NS + "Resource")] == [classic.collection]
    listed = xml(classic.call("GET", f"/{classic.subscription}/CloudServices"))
    assert [text(item, "Name") for item in listed] == [classic.cloud_service]
    assert classic.put_job("from-classic").status_code == 201


# --- jobs ---------------------------------------------------------------------------------------------


def test_job_put_get_replace_and_post_with_a_generated_id(classic: Classic) -> None:
    classic.create_collection()
    start = future()
    created = classic.put_job("put-job", job(start))
    assert created.status_code == 201, created.text
    body = created.json()
    assert body["id"] == "put-job"
    assert body["startTime"] == start
    assert body["state"].lower() == "enabled"
    assert body["status"]["executionCount"] == 0
    assert "nextExecutionTime" in body["status"]
    assert classic.put_job("put-job", job(start, uri="http://127.0.0.1:9/other")).status_code == 200
    got = classic.job_call("GET", classic.jobs_path + "/PUT-JOB").json()
    assert got["action"]["request"]["uri"] == "http://127.0.0.1:9/other"

    posted = classic.job_call("POST", classic.jobs_path, job(start))
    assert posted.status_code == 201, posted.text
    generated = posted.json()["id"]
    assert re.fullmatch(r"[0-9a-f]{32}", generated)
    assert classic.job_call("GET", f"{classic.jobs_path}/{generated}").json()["id"] == generated


def test_secrets_are_never_returned(classic: Classic) -> None:
    classic.create_collection()
    body = job(future())
    body["action"]["request"]["authentication"] = {"type": "Basic", "username": "u", "password": "s3cret-pw"}
    created = classic.put_job("auth", body)
    assert created.status_code == 201, created.text
    for response in (
        created,
        classic.job_call("GET", classic.jobs_path + "/auth"),
        classic.job_call("GET", classic.jobs_path),
    ):
        assert "s3cret-pw" not in response.text
        assert "password" not in response.text


def test_job_list_pages_by_id_and_filters_by_state_unquoted_or_quoted(classic: Classic) -> None:
    classic.create_collection()
    for name in ("d", "b", "a", "c", "e"):
        assert classic.put_job(name).status_code == 201
    assert classic.job_call("PATCH", classic.jobs_path + "/b", {"state": "Disabled"}).status_code == 200
    everything = classic.job_call("GET", classic.jobs_path)
    assert isinstance(everything.json(), list)
    assert [item["id"] for item in everything.json()] == ["a", "b", "c", "d", "e"]
    first = classic.job_call("GET", classic.jobs_path, **{"$top": "2"}).json()
    second = classic.job_call("GET", classic.jobs_path, **{"$skip": "2", "$top": "2"}).json()
    assert [item["id"] for item in first + second] == ["a", "b", "c", "d"]
    for expression in ("state eq Disabled", "state eq 'disabled'", "STATE EQ DISABLED"):
        filtered = classic.job_call("GET", classic.jobs_path, **{"$filter": expression}).json()
        assert [item["id"] for item in filtered] == ["b"], expression
    assert_json_error(classic.job_call("GET", classic.jobs_path, **{"$filter": "name eq a"}), 400, "BadRequest")
    assert_json_error(classic.job_call("GET", classic.jobs_path, **{"$top": "0"}), 400, "BadRequest")


def test_state_patch_of_one_job_and_of_the_whole_collection(classic: Classic) -> None:
    classic.create_collection()
    for name in ("p1", "p2"):
        assert classic.put_job(name).status_code == 201
    patched = classic.job_call("PATCH", classic.jobs_path + "/p1", {"state": "Disabled", "stateDetails": "paused"})
    assert patched.status_code == 200, patched.text
    assert patched.json()["state"] == "disabled"
    assert "nextExecutionTime" not in patched.json()["status"]
    assert patched.json()["action"]["request"]["uri"] == "http://127.0.0.1:9/classic"  # definition kept
    assert_json_error(classic.job_call("PATCH", classic.jobs_path + "/p1", {"state": "Completed"}), 400, "BadRequest")

    everything = classic.call(
        "PATCH", classic.jobs_path, b'{"state":"Disabled"}', headers={"content-type": "application/json; charset=utf-8"}
    )
    assert everything.status_code == 200, everything.text
    assert [(item["id"], item["state"]) for item in everything.json()] == [("p1", "disabled"), ("p2", "disabled")]
    enabled = classic.call(
        "PATCH", classic.jobs_path, b'{"state":"enabled"}', headers={"content-type": "application/json"}
    )
    assert {item["state"] for item in enabled.json()} == {"enabled"}
    assert all("nextExecutionTime" in item["status"] for item in enabled.json())


def test_every_job_write_is_an_operation_the_client_can_poll(classic: Classic) -> None:
    """The classic Python client polls GET /{s}/operations/{x-ms-request-id} after job PUT, PATCH and DELETE
    too (recorded); each answers Succeeded with the write's status, as for cloud services."""
    classic.create_collection()
    writes = [
        classic.put_job("polled"),
        classic.job_call("PATCH", classic.jobs_path + "/polled", {"state": "Disabled"}),
        classic.call("PATCH", classic.jobs_path, b'{"state":"Enabled"}', headers={"content-type": "application/json"}),
        classic.job_call("POST", classic.jobs_path, job(future())),
        classic.job_call("DELETE", classic.jobs_path + "/polled"),
    ]
    for write in writes:
        assert write.status_code in (200, 201), write.text
        operation = xml(classic.call("GET", f"/{classic.subscription}/operations/{write.headers['x-ms-request-id']}"))
        assert (text(operation, "Status"), text(operation, "HttpStatusCode")) == ("Succeeded", "200"), write.request
    # a write that failed is no operation
    refused = classic.job_call("DELETE", classic.jobs_path + "/polled")
    assert refused.status_code == 404
    assert_xml_error(
        classic.call("GET", f"/{classic.subscription}/operations/{refused.headers['x-ms-request-id']}"),
        404,
        "ResourceNotFound",
    )


def test_job_delete_is_200_and_a_missing_job_is_resource_not_found(classic: Classic) -> None:
    classic.create_collection()
    assert classic.put_job("gone").status_code == 201
    deleted = classic.job_call("DELETE", classic.jobs_path + "/gone")
    assert (deleted.status_code, deleted.content) == (200, b"")
    assert_json_error(classic.job_call("GET", classic.jobs_path + "/gone"), 404, "ResourceNotFound")
    assert_json_error(classic.job_call("DELETE", classic.jobs_path + "/gone"), 404, "ResourceNotFound")
    missing_collection = classic.job_call("PUT", classic.collection_path(collection="nojc") + "/jobs/j", job(future()))
    assert_json_error(missing_collection, 404, "ResourceNotFound")


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        (b'{"action": ', "could not be deserialized"),
        (b"[1, 2]", "JSON object"),
        (b'{"action": {"type": "Http", "request": {"uri": "ftp://x", "method": "GET"}}}', "uri"),
        (
            b'{"action": {"type": "Http", "request": {"uri": "http://127.0.0.1:9/", "method": "GET"}},'
            b' "recurrence": {"frequency": "Fortnight", "interval": 1}}',
            "recurrence.frequency",
        ),
    ],
)
def test_bad_job_bodies_are_refused_and_change_nothing(classic: Classic, body: bytes, needle: str) -> None:
    classic.create_collection()
    assert classic.put_job("kept").status_code == 201
    before = classic.job_call("GET", classic.jobs_path).json()
    for method, path in (("PUT", "/kept"), ("PUT", "/new"), ("POST", "")):
        message = assert_json_error(classic.job_call(method, classic.jobs_path + path, body), 400, "BadRequest")
        assert needle in message
    assert classic.job_call("GET", classic.jobs_path).json() == before


def test_the_quota_of_the_collection_applies(classic: Classic) -> None:
    classic.create_collection(collection_body(max_jobs=1))
    assert classic.put_job("one").status_code == 201
    assert_json_error(classic.put_job("two"), 409, "ConflictError")
    assert [item["id"] for item in classic.job_call("GET", classic.jobs_path).json()] == ["one"]


# --- one store with ARM -------------------------------------------------------------------------------


def test_a_classic_job_is_an_arm_job_and_an_arm_job_a_classic_one(classic: Classic) -> None:
    classic.create_collection()
    assert classic.put_job("from-classic").status_code == 201
    arm_job = classic.arm("GET", classic.arm_collection() + "/jobs/from-classic")
    assert arm_job.status_code == 200
    assert arm_job.json()["name"] == f"{classic.collection}/from-classic"
    disabled = classic.arm(
        "PATCH", classic.arm_collection() + "/jobs/from-classic", {"properties": {"state": "Disabled"}}
    )
    assert disabled.status_code == 200
    assert classic.job_call("GET", classic.jobs_path + "/from-classic").json()["state"] == "disabled"

    properties = {"startTime": future(), "action": http_action(), "recurrence": {"frequency": "Day", "interval": 1}}
    made = classic.arm("PUT", classic.arm_collection() + "/jobs/from-arm", {"properties": properties})
    assert made.status_code == 201, made.text
    seen = classic.job_call("GET", classic.jobs_path + "/from-arm").json()
    assert seen["recurrence"] == {"frequency": "day", "interval": 1}
    edited = classic.job_call("PATCH", classic.jobs_path + "/from-arm", {"state": "Disabled"})
    assert edited.status_code == 200
    assert classic.arm("GET", classic.arm_collection() + "/jobs/from-arm").json()["properties"]["state"] == "disabled"


@pytest.fixture
def classic_on_server(server: ServerProcess) -> Iterator[Classic]:
    """Classic calls to the session server: a started process, whose dispatcher fires jobs."""
    with server.client() as client:
        yield Classic(client)


def test_a_classic_job_fires_and_its_history_reads_back_through_classic(
    classic_on_server: Classic, target: TargetServer
) -> None:
    classic = classic_on_server
    classic.create_collection()
    path = f"/classic-fire/{uuid.uuid4().hex}"
    start = (datetime.now(UTC) + timedelta(seconds=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    body = {
        "startTime": start,
        "action": {"type": "Http", "request": {"uri": target.url(path), "method": "POST", "body": "hello"}},
    }
    assert classic.put_job("fire-job", body).status_code == 201
    wait_until(lambda: [r for r in target.received if r.path == path], 20, "the classic job to fire")

    def history() -> list[dict[str, Any]]:
        return classic.job_call("GET", classic.jobs_path + "/fire-job/history").json()

    entries = wait_until(history, 20, "its history entry")
    assert entries[0]["jobId"] == "fire-job"
    assert entries[0]["status"] == "Completed"
    assert entries[0]["actionName"] == "MainAction"
    assert {"timestamp", "startTime", "endTime", "message", "retryCount", "repeatCount", "state"} <= entries[0].keys()
    assert entries[0]["state"] == "completed"  # the job's state, spelt as the job answers it
    for expression in ("status eq Completed", "status eq 'completed'", "state eq completed"):
        assert (
            len(classic.job_call("GET", classic.jobs_path + "/fire-job/history", **{"$filter": expression}).json()) == 1
        )
    assert (
        classic.job_call("GET", classic.jobs_path + "/fire-job/history", **{"$filter": "status eq Failed"}).json() == []
    )
    done = classic.job_call("GET", classic.jobs_path + "/fire-job").json()
    assert done["state"] == "completed"
    assert done["status"]["executionCount"] == 1
    arm_history = classic.arm("GET", classic.arm_collection() + "/jobs/fire-job/history").json()["value"]
    assert len(arm_history) == 1


# --- hostile XML --------------------------------------------------------------------------------------

BILLION_LAUGHS = (
    '<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;'
    '&lol;&lol;&lol;"><!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">]>'
    "<CloudService><Label>&lol3;</Label><Description>d</Description><GeoRegion>West US</GeoRegion></CloudService>"
)
EXTERNAL = (
    '<?xml version="1.0"?><!DOCTYPE x [<!ENTITY ext SYSTEM "file:///etc/passwd">]>'
    "<CloudService><Label>&ext;</Label><Description>d</Description><GeoRegion>West US</GeoRegion></CloudService>"
)
PARAMETER_ENTITY = (
    '<?xml version="1.0"?><!DOCTYPE x [<!ENTITY % p SYSTEM "http://127.0.0.1:9/x.dtd"> %p;]><CloudService/>'
)
DEEP = "<CloudService>" + "<a>" * 5000 + "</a>" * 5000 + "</CloudService>"


@pytest.mark.parametrize(
    "body",
    [
        BILLION_LAUGHS,
        EXTERNAL,
        PARAMETER_ENTITY,
        DEEP,
        "<CloudService><Label>x</Label>",
        "not xml at all",
        "",
        "<Resource><Label>x</Label></Resource>",
        CS_BODY.replace("classic demo", "x" * 5000),
    ],
    ids=[
        "billion-laughs",
        "external-entity",
        "parameter-entity",
        "deep",
        "unclosed",
        "text",
        "empty",
        "wrong-root",
        "huge-label",
    ],
)
def test_hostile_cloud_service_xml_is_refused_and_stores_nothing(classic: Classic, body: str) -> None:
    response = classic.call("PUT", classic.cs_path, body.encode(), headers={"content-type": "application/xml"})
    assert response.status_code == 400, response.text
    assert text(xml(response), "Code") in ("InvalidXmlRequest", "BadRequest")
    assert "root:" not in response.text  # nothing of /etc/passwd
    assert_xml_error(classic.call("GET", classic.cs_path), 404, "ResourceNotFound")


@pytest.mark.parametrize(
    "body",
    [
        BILLION_LAUGHS.replace("CloudService>", "Resource>"),
        collection_body(label="y" * 1000),
        collection_body().replace("<Label>", "<Label>!!not base64!!"),
        collection_body().replace("<MaxJobCount>50", "<MaxJobCount>fifty"),
        collection_body().replace("<MaxJobCount>50", "<MaxJobCount>99999999999999999999"),
    ],
    ids=["billion-laughs", "huge-label", "label-not-base64", "count-not-a-number", "count-huge"],
)
def test_hostile_collection_xml_is_refused_and_stores_nothing(classic: Classic, body: str) -> None:
    classic.create_cloud_service()
    response = classic.call("PUT", classic.collection_path(tilde=False), body.encode())
    assert response.status_code == 400, response.text
    assert_xml_error(classic.call("GET", classic.collection_path()), 404, "ResourceNotFound")


def test_a_body_over_the_cap_is_refused(classic: Classic) -> None:
    body = CS_BODY.replace("demo service", "d" * 70_000)
    response = classic.call("PUT", classic.cs_path, body.encode(), headers={"content-type": "application/xml"})
    assert response.status_code == 413
    assert_xml_error(classic.call("GET", classic.cs_path), 404, "ResourceNotFound")


def test_unknown_classic_paths_and_methods(classic: Classic) -> None:
    assert_xml_error(classic.call("GET", f"/{classic.subscription}/cloudservices/cs/other"), 404, "ResourceNotFound")
    assert_xml_error(classic.call("POST", classic.cs_path), 405, "MethodNotAllowed")
    arm_unknown = classic.http.get("/nothing-here", params={"api-version": "2016-03-01"})
    assert arm_unknown.status_code == 404
    assert arm_unknown.json()["error"]["code"] == "NotFound"
