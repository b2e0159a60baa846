"""The classic (2014) API through its three official clients, against the session server (HTTPS, both
stores): npm azure-asm-scheduler 0.10.2 (SchedulerManagementClient, CloudServiceManagementClient), npm
azure-scheduler 0.10.4 (SchedulerClient) and PyPI azure-servicemanagement-legacy 0.20.8
(SchedulerManagementService, in its own venv). Each test runs one plan of calls through a client script
(tests/e2e/clients/classic_{node.js,python.py}) and asserts what the client returned or raised."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from support.certificates import key_pem, pem, self_signed
from support.environment import REPO, missing
from support.sdk_envs import sdk_pythons
from support.server import ServerProcess
from support.waiting import wait_until

CLIENTS = Path(__file__).parent / "clients"
SCRIPT_TIMEOUT = 120
LEGACY = "legacy-0.20.8"


@pytest.fixture(scope="module")
def node() -> str:
    found = shutil.which("node")
    if found is None or not (REPO / "node_modules" / "azure-asm-scheduler").is_dir():
        missing("The classic npm clients need Node.js and `npm ci` in the repository root (package-lock.json).")
    assert found is not None
    return found


@pytest.fixture(scope="module")
def legacy_python() -> Path:
    return sdk_pythons((LEGACY,))[LEGACY]


@pytest.fixture(scope="module")
def client_certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """A throw-away management certificate (the npm clients require one; the emulator checks none)."""
    key, certificate = self_signed("classic-client")
    return pem(certificate).decode(), key_pem(key).decode()


class Names:
    def __init__(self) -> None:
        self.subscription = str(uuid.uuid4())
        self.cloud_service = f"cs-{uuid.uuid4().hex[:8]}"
        self.collection = f"jc{uuid.uuid4().hex[:8]}"


@pytest.fixture
def names() -> Names:
    return Names()


def run_node(
    node: str, server: ServerProcess, cert: tuple[str, str], names: Names, calls: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    plan = {
        "baseUri": server.url + "/",
        "subscriptionId": names.subscription,
        "cert": cert[0],
        "key": cert[1],
        "calls": calls,
    }
    env = {**os.environ, "NODE_EXTRA_CA_CERTS": str(server.cert_path)}
    done = subprocess.run(
        [node, str(CLIENTS / "classic_node.js")],
        input=json.dumps(plan),
        capture_output=True,
        text=True,
        timeout=SCRIPT_TIMEOUT,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    results: list[dict[str, Any]] = json.loads(done.stdout)
    return results


def run_python(python: Path, server: ServerProcess, names: Names, calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    plan = {
        "host": server.url.removeprefix("https://"),
        "ca": str(server.cert_path),
        "subscription_id": names.subscription,
        "calls": calls,
    }
    done = subprocess.run(
        [str(python), str(CLIENTS / "classic_python.py")],
        input=json.dumps(plan),
        capture_output=True,
        text=True,
        timeout=SCRIPT_TIMEOUT,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    results: list[dict[str, Any]] = json.loads(done.stdout)
    return results


def in_an_hour() -> str:
    return (datetime.now(UTC) + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")


def npm_job(uri: str = "http://127.0.0.1:9/classic", start: str | None = None) -> dict[str, Any]:
    """A job as npm azure-scheduler's caller passes it: a moment duration, a Date."""
    return {
        "startTime": {"$date": start or in_an_hour()},
        "action": {
            "type": "Http",
            "retryPolicy": {"retryType": "Fixed", "retryInterval": {"$duration": "PT30S"}, "retryCount": 2},
            "request": {"uri": uri, "method": "POST", "headers": {"x-demo": "classic"}, "body": "hello"},
        },
        "recurrence": {"frequency": "Hour", "interval": 1},
    }


def ok(result: dict[str, Any]) -> Any:
    assert result.get("ok"), result
    return result["result"]


def failed(result: dict[str, Any], status: int, code: str) -> str:
    assert "error" in result, result
    assert (result["error"]["statusCode"], result["error"]["code"]) == (status, code), result
    return str(result["error"]["message"])


def in_collection(names: Names, method: str, *args: Any) -> dict[str, Any]:
    return {
        "client": "jobs",
        "cloudService": names.cloud_service,
        "collection": names.collection,
        "method": method,
        "args": list(args),
    }


def collection_settings(max_jobs: int = 50, label: str | None = "demo collection") -> dict[str, Any]:
    settings: dict[str, Any] = {
        "intrinsicSettings": {
            "plan": "Standard",
            "quota": {"maxJobCount": max_jobs, "maxRecurrence": {"frequency": "Minute", "interval": 1}},
        }
    }
    if label is not None:
        settings["label"] = label
    return settings


def cloud_service_and_collection(names: Names) -> list[dict[str, Any]]:
    return [
        {
            "client": "cloud",
            "method": "cloudServices.create",
            "args": [names.cloud_service, {"label": "l", "description": "d", "geoRegion": "West US"}],
        },
        {
            "client": "management",
            "method": "jobCollections.create",
            "args": [names.cloud_service, names.collection, collection_settings()],
        },
    ]


# --- npm azure-asm-scheduler: subscription operations, cloud services, job collections ----------------


def test_npm_subscription_operations_and_cloud_services(node, server, client_certificate, names) -> None:
    cs = names.cloud_service
    results = run_node(
        node,
        server,
        client_certificate,
        names,
        [
            {"client": "management", "method": "registerResourceProvider", "end": True},
            {"client": "management", "method": "unregisterResourceProvider", "end": True},
            {"client": "management", "method": "getResourceProviderProperties"},
            {
                "client": "cloud",
                "method": "entitleResource",
                "args": [
                    {
                        "resourceNamespace": "scheduler",
                        "resourceType": "JobCollections",
                        "registrationDate": {"$date": "2014-01-01T00:00:00Z"},
                    }
                ],
            },
            {
                "client": "cloud",
                "method": "cloudServices.create",
                "args": [cs, {"label": "classic demo", "description": "demo service", "geoRegion": "West US"}],
            },
            {"client": "cloud", "method": "cloudServices.get", "args": [cs]},
            {"client": "cloud", "method": "cloudServices.list"},
            {
                "client": "cloud",
                "method": "cloudServices.create",
                "args": [cs, {"label": "again", "description": "d", "geoRegion": "West US"}],
            },
            {"client": "management", "method": "getOperationStatus", "args": [{"$from": 4, "path": ["id"]}]},
            {"client": "cloud", "method": "cloudServices.delete", "args": [cs]},
            {"client": "cloud", "method": "cloudServices.get", "args": [cs]},
            {"client": "cloud", "method": "cloudServices.delete", "args": [cs]},
        ],
    )
    assert ok(results[0])["statusCode"] == 200
    assert ok(results[1])["statusCode"] == 200
    assert set(ok(results[2])["properties"]) == {"plans", "regions"}
    assert ok(results[3])["statusCode"] == 202
    assert ok(results[4])["status"] == "Succeeded"
    assert ok(results[5])["geoLocation"] == "West US"
    assert [(c["name"], c["label"], c["description"], c["geoRegion"]) for c in ok(results[6])["cloudServices"]] == [
        (cs, "classic demo", "demo service", "West US")
    ]
    failed(results[7], 409, "ConflictError")
    assert ok(results[8])["status"] == "Succeeded"
    assert ok(results[9])["status"] == "Succeeded"
    failed(results[10], 404, "ResourceNotFound")
    failed(results[11], 404, "ResourceNotFound")


def test_npm_job_collections_create_get_update_with_etag_check_name_delete(
    node, server, client_certificate, names, http
) -> None:
    cs, jc = names.cloud_service, names.collection
    results = run_node(
        node,
        server,
        client_certificate,
        names,
        [
            {
                "client": "cloud",
                "method": "cloudServices.create",
                "args": [cs, {"label": "l", "description": "d", "geoRegion": "West US"}],
            },
            {"client": "management", "method": "jobCollections.checkNameAvailability", "args": [cs, jc]},
            {"client": "management", "method": "jobCollections.create", "args": [cs, jc, collection_settings()]},
            {"client": "management", "method": "jobCollections.create", "args": [cs, jc, collection_settings()]},
            {"client": "management", "method": "jobCollections.get", "args": [cs, jc]},
            {
                "client": "management",
                "method": "jobCollections.update",
                "args": [cs, jc, {"eTag": {"$from": 4, "path": ["eTag"]}, **collection_settings(40, None)}],
            },
            {"client": "management", "method": "jobCollections.get", "args": [cs, jc]},
            {
                "client": "management",
                "method": "jobCollections.update",
                "args": [cs, jc, {"eTag": {"$from": 4, "path": ["eTag"]}, **collection_settings(30, None)}],
            },
            {"client": "management", "method": "jobCollections.checkNameAvailability", "args": [cs, jc.upper()]},
        ],
    )
    assert ok(results[1])["isAvailable"] is True
    assert ok(results[2])["status"] == "Succeeded"
    failed(results[3], 409, "ConflictError")
    got = ok(results[4])
    assert (got["name"], got["state"], got["label"]) == (jc, "Started", "demo collection")
    assert got["intrinsicSettings"] == {
        "plan": "Standard",
        "quota": {"maxJobCount": 50, "maxRecurrence": {"frequency": "Minute", "interval": 1}},
    }
    assert ok(results[5])["status"] == "Succeeded"
    updated = ok(results[6])
    assert updated["intrinsicSettings"]["quota"]["maxJobCount"] == 40
    assert updated["label"] == "demo collection"  # an update without a label keeps it
    assert updated["eTag"] != got["eTag"]
    failed(results[7], 412, "PreconditionFailed")
    assert ok(results[8])["isAvailable"] is False
    arm = http.get(
        f"/subscriptions/{names.subscription}/resourceGroups/{cs}/providers/Microsoft.Scheduler/jobCollections/{jc}",
        params={"api-version": "2016-03-01"},
    ).json()
    assert arm["properties"]["quota"]["maxJobCount"] == 40

    results = run_node(
        node,
        server,
        client_certificate,
        names,
        [
            {"client": "management", "method": "jobCollections.deleteMethod", "args": [cs, jc]},
            {"client": "management", "method": "jobCollections.get", "args": [cs, jc]},
            {"client": "management", "method": "jobCollections.deleteMethod", "args": [cs, jc]},
        ],
    )
    assert ok(results[0])["status"] == "Succeeded"
    failed(results[1], 404, "ResourceNotFound")
    failed(results[2], 404, "ResourceNotFound")


# --- npm azure-scheduler: jobs --------------------------------------------------------------------------


def test_npm_jobs_put_post_get_list_filter_state_patches_delete(node, server, client_certificate, names) -> None:
    results = run_node(
        node,
        server,
        client_certificate,
        names,
        [
            *cloud_service_and_collection(names),
            in_collection(names, "jobs.createOrUpdate", "put-job", npm_job()),
            in_collection(names, "jobs.createOrUpdate", "put-job", npm_job("http://127.0.0.1:9/replaced")),
            in_collection(names, "jobs.create", npm_job()),
            in_collection(names, "jobs.createOrUpdate", "b-job", npm_job()),
            in_collection(names, "jobs.get", "put-job"),
            in_collection(names, "jobs.list", {"top": 2}),
            in_collection(names, "jobs.list", {"skip": 2, "top": 2}),
            in_collection(
                names, "jobs.updateState", "put-job", {"state": "Disabled", "updateStateReason": "paused by a client"}
            ),
            in_collection(names, "jobs.listWithFilter", {"state": "Disabled"}),
            in_collection(names, "jobs.updateJobCollectionState", {"state": "Disabled"}),
            in_collection(names, "jobs.listWithFilter", {"state": "Enabled"}),
            in_collection(names, "jobs.deleteMethod", "b-job"),
            in_collection(names, "jobs.get", "b-job"),
            in_collection(names, "jobs.deleteMethod", "b-job"),
        ],
    )
    created = ok(results[2])
    assert created["statusCode"] == 201
    assert created["job"]["id"] == "put-job"
    assert created["job"]["action"]["retryPolicy"]["retryInterval"] == "PT30S"
    assert ok(results[3])["statusCode"] == 200
    generated = ok(results[4])
    assert generated["statusCode"] == 201
    generated_id = generated["job"]["id"]
    assert len(generated_id) == 32
    job = ok(results[6])["job"]
    assert job["action"]["request"]["uri"] == "http://127.0.0.1:9/replaced"
    assert job["action"]["request"]["headers"] == {"x-demo": "classic"}
    assert job["state"] == "enabled"
    assert "nextExecutionTime" in job["status"]
    first, second = ok(results[7])["jobs"], ok(results[8])["jobs"]
    assert [j["id"] for j in first + second] == sorted(["put-job", "b-job", generated_id])
    disabled = ok(results[9])["job"]
    assert disabled["state"] == "disabled"
    assert "nextExecutionTime" not in disabled["status"]
    assert [j["id"] for j in ok(results[10])["jobs"]] == ["put-job"]
    assert {j["state"] for j in ok(results[11])["jobs"]} == {"disabled"}
    assert ok(results[12])["jobs"] == []
    assert ok(results[13])["statusCode"] == 200
    failed(results[14], 404, "ResourceNotFound")
    failed(results[15], 404, "ResourceNotFound")


def test_npm_errors_change_nothing(node, server, client_certificate, names) -> None:
    bad_recurrence = npm_job()
    bad_recurrence["recurrence"] = {"frequency": "Minute", "interval": 0}
    results = run_node(
        node,
        server,
        client_certificate,
        names,
        [
            *cloud_service_and_collection(names),
            in_collection(names, "jobs.createOrUpdate", "kept", npm_job()),
            in_collection(names, "jobs.createOrUpdate", "kept", bad_recurrence),
            in_collection(names, "jobs.create", bad_recurrence),
            in_collection(names, "jobs.get", "missing"),
            {
                "client": "management",
                "method": "jobCollections.create",
                "args": [names.cloud_service, names.collection, collection_settings()],
            },
            {
                "client": "jobs",
                "cloudService": names.cloud_service,
                "collection": "no-such-collection",
                "method": "jobs.createOrUpdate",
                "args": ["j", npm_job()],
            },
            in_collection(names, "jobs.list", {}),
            {"client": "management", "method": "jobCollections.get", "args": [names.cloud_service, names.collection]},
        ],
    )
    assert "interval" in failed(results[3], 400, "BadRequest")
    failed(results[4], 400, "BadRequest")
    failed(results[5], 404, "ResourceNotFound")
    failed(results[6], 409, "ConflictError")
    failed(results[7], 404, "ResourceNotFound")
    jobs = ok(results[8])["jobs"]
    assert [j["id"] for j in jobs] == ["kept"]
    assert jobs[0]["recurrence"] == {"frequency": "hour", "interval": 1}
    assert ok(results[9])["intrinsicSettings"]["quota"]["maxJobCount"] == 50


def test_npm_job_fires_at_a_local_target_and_its_history_reads_back(
    node, server, client_certificate, names, target
) -> None:
    path = f"/npm-fire/{uuid.uuid4().hex}"
    # Far enough ahead that it is still in the future once the client has started, on a loaded machine too (a
    # past start of an hourly job would first run an hour later: 5 s was missed at a load average of 10-13)
    start = (datetime.now(UTC) + timedelta(seconds=30)).strftime("%Y-%m-%dT%H:%M:%SZ")
    results = run_node(
        node,
        server,
        client_certificate,
        names,
        [
            *cloud_service_and_collection(names),
            in_collection(names, "jobs.createOrUpdate", "fire-job", npm_job(target.url(path), start)),
        ],
    )
    assert ok(results[2])["statusCode"] == 201
    received = wait_until(lambda: [r for r in target.received if r.path == path], 120, "the npm-created job to fire")
    assert received[0].body == b"hello"
    assert received[0].header("x-demo") == "classic"

    def history() -> list[dict[str, Any]] | None:
        found = ok(
            run_node(
                node,
                server,
                client_certificate,
                names,
                [in_collection(names, "jobs.getHistory", "fire-job", {"top": 10})],
            )[0]
        )
        return found["jobHistory"] or None

    entries = wait_until(history, 30, "the history entry through the npm client")
    assert (entries[0]["id"], entries[0]["status"], entries[0]["actionName"]) == ("fire-job", "Completed", "MainAction")
    results = run_node(
        node,
        server,
        client_certificate,
        names,
        [
            in_collection(names, "jobs.getHistoryWithFilter", "fire-job", {"status": "Completed"}),
            in_collection(names, "jobs.getHistoryWithFilter", "fire-job", {"status": "Failed"}),
            in_collection(names, "jobs.get", "fire-job"),
        ],
    )
    assert len(ok(results[0])["jobHistory"]) == 1
    assert ok(results[1])["jobHistory"] == []
    assert ok(results[2])["job"]["status"]["executionCount"] == 1


def test_arm_jobs_through_npm_and_npm_jobs_through_arm(node, server, client_certificate, names, http) -> None:
    run_node(node, server, client_certificate, names, cloud_service_and_collection(names))
    base = (
        f"/subscriptions/{names.subscription}/resourceGroups/{names.cloud_service}/providers/Microsoft.Scheduler"
        f"/jobCollections/{names.collection}/jobs"
    )
    properties = {
        "startTime": in_an_hour(),
        "action": {"type": "Http", "request": {"uri": "http://127.0.0.1:9/arm", "method": "GET"}},
        "recurrence": {"frequency": "Day", "interval": 1},
    }
    assert (
        http.put(f"{base}/from-arm", params={"api-version": "2016-03-01"}, json={"properties": properties}).status_code
        == 201
    )
    results = run_node(
        node,
        server,
        client_certificate,
        names,
        [
            in_collection(names, "jobs.get", "from-arm"),
            in_collection(names, "jobs.updateState", "from-arm", {"state": "Disabled"}),
            in_collection(names, "jobs.createOrUpdate", "from-npm", npm_job()),
        ],
    )
    assert ok(results[0])["job"]["recurrence"] == {"frequency": "day", "interval": 1}
    assert ok(results[1])["job"]["state"] == "disabled"
    arm = http.get(f"{base}/from-arm", params={"api-version": "2016-03-01"}).json()
    assert arm["properties"]["state"] == "disabled"
    npm = http.get(f"{base}/from-npm", params={"api-version": "2016-03-01"}).json()
    assert npm["name"] == f"{names.collection}/from-npm"
    assert npm["properties"]["action"]["retryPolicy"] == {
        "retryType": "fixed",
        "retryInterval": "PT30S",
        "retryCount": 2,
    }


# --- PyPI azure-servicemanagement-legacy --------------------------------------------------------------


def test_python_legacy_client_every_operation(legacy_python, server, names, target) -> None:
    cs, jc = names.cloud_service, names.collection
    path = f"/legacy-fire/{uuid.uuid4().hex}"
    fire = {"action": {"type": "http", "request": {"uri": target.url(path), "method": "GET"}}}
    timed = {
        "startTime": in_an_hour(),
        "action": {"type": "http", "request": {"uri": "http://127.0.0.1:9/x", "method": "GET"}},
        "recurrence": {"frequency": "hour", "interval": 2},
    }
    results = run_python(
        legacy_python,
        server,
        names,
        [
            {"method": "create_cloud_service", "args": [cs, "legacy label", "legacy description", "West US"]},
            {"method": "get_operation_status", "args": [{"$from": 0, "path": ["request_id"]}]},
            {"method": "get_cloud_service", "args": [cs]},
            {"method": "list_cloud_services"},
            {"method": "check_job_collection_name", "args": [cs, jc]},
            {"method": "create_job_collection", "args": [cs, jc, "Free"]},
            {"method": "get_job_collection", "args": [cs, jc]},
            {"method": "create_job_collection", "args": [cs, jc, "Free"]},
            {"method": "check_job_collection_name", "args": [cs, jc]},
            {"method": "create_job", "args": [cs, jc, "timed", timed]},
            {"method": "create_job", "args": [cs, jc, "fire", fire]},
            {"method": "get_job", "args": [cs, jc, "timed"]},
            {"method": "get_all_jobs", "args": [cs, jc]},
            {"method": "get_job", "args": [cs, jc, "missing"]},
            {"method": "delete_job", "args": [cs, jc, "timed"]},
            {"method": "get_job", "args": [cs, jc, "timed"]},
        ],
    )
    assert ok(results[1])["status"] == "Succeeded"
    service = ok(results[2])
    assert (service["name"], service["label"], service["description"], service["geo_region"]) == (
        cs,
        "legacy label",
        "legacy description",
        "West US",
    )
    assert [c["name"] for c in ok(results[3])["items"]] == [cs]
    assert ok(results[4])["result"] is True
    assert ok(results[5])["request_id"]
    collection = ok(results[6])
    assert (collection["name"], collection["intrinsic_settings"]["plan"], collection["state"]) == (
        jc,
        "Free",
        "Started",
    )
    assert (results[7]["error"]["type"], results[7]["error"]["status"]) == ("AzureConflictHttpError", 409)
    assert ok(results[8])["result"] is False
    assert ok(results[11])["recurrence"] == {"frequency": "hour", "interval": 2}
    assert sorted(j["id"] for j in ok(results[12])) == ["fire", "timed"]
    missing_job = results[13]["error"]
    assert (missing_job["type"], missing_job["status"]) == ("AzureMissingResourceHttpError", 404)
    assert "ResourceNotFound" in missing_job["message"]
    ok(results[14])  # delete_job answers nothing but success
    assert results[15]["error"]["status"] == 404
    wait_until(lambda: [r for r in target.received if r.path == path], 30, "the legacy-created job to fire")

    def fired() -> dict[str, Any] | None:
        job = ok(run_python(legacy_python, server, names, [{"method": "get_job", "args": [cs, jc, "fire"]}])[0])
        return job if job["status"]["executionCount"] == 1 else None

    assert wait_until(fired, 30, "the fire to be counted")["state"].lower() == "completed"
    results = run_python(
        legacy_python,
        server,
        names,
        [
            {"method": "delete_job_collection", "args": [cs, jc]},
            {"method": "get_job_collection", "args": [cs, jc]},
            {"method": "delete_cloud_service", "args": [cs]},
            {"method": "get_cloud_service", "args": [cs]},
        ],
    )
    assert ok(results[0])["request_id"]
    assert results[1]["error"]["status"] == 404
    assert ok(results[2])["request_id"]
    assert results[3]["error"]["status"] == 404
