"""Who may touch what, route by route (docs/reference/authorization.md#what-each-route-needs), over HTTPS with
``--auth issued`` on each store: two tenants; in tenant A an Owner of subscription A (its configured subscription), a
Reader of A and a Contributor of one resource group of A (their roles given by ``--principals-file``), and a
Scheduler Job Collections Contributor of that group; in tenant B a principal of subscription B. Each call × each
principal answers exactly its expected status, with ARM's error code and message; a refused write changes nothing
(the subscription's state read before and after); lists show only what the caller may read. The same through
azure-mgmt-scheduler 7.0.0 (a Reader's create_or_update raises HttpResponseError 403)."""

from __future__ import annotations

import gc
import json
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from azure.core.exceptions import HttpResponseError
from azure.identity import ClientSecretCredential
from azure.mgmt.scheduler.models import JobCollectionDefinition, JobCollectionProperties, Sku
from support.databases import fresh_database
from support.sdk import scheduler_sdk
from support.server import EmulatorPool, ServerProcess

TENANT_A = "a1a1a1a1-0000-4000-8000-00000000000a"
TENANT_B = "b2b2b2b2-0000-4000-8000-00000000000b"
SUB_A = "a0000000-1111-4111-8111-000000000001"
SUB_B = "b0000000-2222-4222-8222-000000000002"
UNDECLARED = "c0000000-3333-4333-8333-000000000003"
SECRET = "matrix-secret~1"
OWNER, READER, CONTRIBUTOR, JOBS_CONTRIBUTOR, TENANT_B_APP = (
    "app-owner-a",
    "app-reader-a",
    "app-contributor-rg1",
    "app-scheduler-contributor-rg1",
    "app-owner-b",
)
# Their own subscriptions (each principal is the Owner of the one it is configured with; nothing of A's).
OWN_SUBSCRIPTION = {
    OWNER: SUB_A,
    READER: "a0000000-4444-4444-8444-000000000004",
    CONTRIBUTOR: "a0000000-5555-4555-8555-000000000005",
    JOBS_CONTRIBUTOR: "a0000000-6666-4666-8666-000000000006",
    TENANT_B_APP: SUB_B,
}
TENANT_OF = {
    OWNER: TENANT_A,
    READER: TENANT_A,
    CONTRIBUTOR: TENANT_A,
    JOBS_CONTRIBUTOR: TENANT_A,
    TENANT_B_APP: TENANT_B,
}
ROLE = {
    "Reader": "acdd72a7-3385-48ef-bd42-f606fba81ae7",
    "Contributor": "b24988ac-6180-42a0-ab88-20f7382dd24c",
    "Scheduler Job Collections Contributor": "188a0f2f-5c9e-469b-ae67-2aa5ce574b94",
}
SCHEDULER = "2016-03-01"
RESOURCES = "2022-09-01"
AUTHORIZATION = "2022-04-01"
ARM_SCOPE = "https://management.azure.com/.default"
RG1, RG2 = "rg-granted", "rg-other"
COLLECTION = {"location": "westus", "properties": {"sku": {"name": "Standard"}}}
JOB = {
    "properties": {
        "startTime": (datetime.now(UTC) + timedelta(days=30)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "action": {"type": "Http", "request": {"uri": "http://127.0.0.1:9/hook", "method": "POST"}},
        "recurrence": {"frequency": "Day", "interval": 1},
    }
}


def template(*resources: dict[str, Any]) -> dict[str, Any]:
    return {
        "properties": {
            "mode": "Incremental",
            "template": {
                "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
                "contentVersion": "1.0.0.0",
                "resources": list(resources),
            },
        }
    }


def collection_resource(name: str) -> dict[str, Any]:
    return {
        "type": "Microsoft.Scheduler/jobCollections",
        "apiVersion": SCHEDULER,
        "name": name,
        "location": "westus",
        "properties": {"sku": {"name": "Standard"}},
    }


def object_id(client_id: str) -> str:
    """The oid the token service gives a client id (api/identity/principals.py: uuid5 in its namespace)."""
    return str(uuid.uuid5(uuid.UUID("6f1c2a5e-8d1b-4b7e-9a57-3c1f0e2d4b61"), client_id.lower()))


@dataclass
class Emulator:
    server: ServerProcess
    tokens: dict[str, str] = field(default_factory=dict)

    def call(self, who: str, method: str, path: str, body: Any = None, version: str | None = None) -> httpx.Response:
        params = {"api-version": version or (SCHEDULER if "Microsoft.Scheduler" in path else RESOURCES)}
        headers = {"Authorization": f"Bearer {self.tokens[who]}"}
        with self.server.client() as client:
            return client.request(method, path, params=params, json=body, headers=headers)

    def ok(self, who: str, method: str, path: str, body: Any = None, version: str | None = None) -> httpx.Response:
        response = self.call(who, method, path, body, version)
        assert response.status_code < 300, f"{who} {method} {path}: {response.status_code} {response.text}"
        return response


def principals_file(directory: Path) -> Path:
    """The principals, and the roles the Owner would grant (configuration's ``assignments``, which need no
    endpoint of their own; docs/reference/token-service.md#principals)."""
    sub = f"/subscriptions/{SUB_A}"
    document = {
        "principals": [
            {"clientId": app, "secret": SECRET, "tenant": TENANT_OF[app], "subscription": OWN_SUBSCRIPTION[app]}
            for app in TENANT_OF
        ],
        "assignments": [
            {"principalId": object_id(READER), "role": "Reader", "scope": sub},
            {"principalId": object_id(CONTRIBUTOR), "role": "Contributor", "scope": f"{sub}/resourceGroups/{RG1}"},
            {
                "principalId": object_id(JOBS_CONTRIBUTOR),
                "role": "Scheduler Job Collections Contributor",
                "scope": f"{sub}/resourceGroups/{RG1}",
            },
        ],
    }
    path = directory / "principals.json"
    path.write_text(json.dumps(document))
    return path


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def emulator(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Emulator]:
    files = principals_file(tmp_path_factory.mktemp("principals"))
    with fresh_database(request.param, tmp_path_factory) as url, EmulatorPool() as pool:
        server = pool.start(
            tmp_path_factory.mktemp("matrix"),
            "--auth",
            "issued",
            "--principals-file",
            str(files),
            "--no-dispatcher",
            "--arm-foreign-resources",
            "inert",
            https=True,
            database_url=url,
            log_level="warning",
        )
        emulator = Emulator(server)
        for app, tenant in TENANT_OF.items():
            with server.client() as client:
                answer = client.post(
                    f"/{tenant}/oauth2/v2.0/token",
                    data={
                        "grant_type": "client_credentials",
                        "client_id": app,
                        "client_secret": SECRET,
                        "scope": ARM_SCOPE,
                    },
                )
            assert answer.status_code == 200, answer.text
            emulator.tokens[app] = answer.json()["access_token"]
        sub = f"/subscriptions/{SUB_A}"
        for group in (RG1, RG2):
            emulator.ok(OWNER, "PUT", f"{sub}/resourceGroups/{group}", {"location": "westus"})
            emulator.ok(OWNER, "PUT", _collection(group, "c1"), COLLECTION)
            emulator.ok(OWNER, "PUT", _collection(group, "c1") + "/jobs/j1", JOB)
            emulator.ok(OWNER, "PUT", _deployment(group, "d1"), template(collection_resource("deployed")))
            settle(emulator, _deployment(group, "d1"))
        emulator.ok(TENANT_B_APP, "PUT", f"/subscriptions/{SUB_B}/resourceGroups/{RG1}", {"location": "westus"})
        yield emulator


def _group(group: str, subscription: str = SUB_A) -> str:
    return f"/subscriptions/{subscription}/resourceGroups/{group}"


def _collection(group: str, name: str, subscription: str = SUB_A) -> str:
    return f"{_group(group, subscription)}/providers/Microsoft.Scheduler/jobCollections/{name}"


def _deployment(group: str, name: str) -> str:
    return f"{_group(group)}/providers/Microsoft.Resources/deployments/{name}"


@dataclass(frozen=True, kw_only=True)
class Call:
    """One request of the matrix: ``where`` is what it acts on (``rg1``: the Contributor's group; ``rg2``: another;
    ``subscription``: the subscription itself; ``list``/``member``: what any role in the subscription may call),
    ``action`` and ``scope`` what a refusal names, ``writes`` whether it changes anything. ``prepare`` (by the
    Owner) makes what a delete deletes, before each try."""

    method: str
    path: str
    where: str
    action: str
    scope: str
    writes: bool = True
    body: Any = None
    prepare: Callable[[Emulator], None] | None = None


def _put(path: str, body: Any) -> Callable[[Emulator], None]:
    def prepare(emulator: Emulator) -> None:
        emulator.ok(OWNER, "PUT", path, body)
        settle(emulator, path)

    return prepare


S, J = "Microsoft.Scheduler/jobCollections", "Microsoft.Scheduler/jobCollections/jobs"
D, G = "Microsoft.Resources/deployments", "Microsoft.Resources/subscriptions/resourceGroups"


def _calls(group: str, where: str) -> list[Call]:
    collection = _collection(group, "c1")
    job = collection + "/jobs/j1"
    deployment = _deployment(group, "d1")
    doomed_job, doomed = collection + "/jobs/doomed", _collection(group, "doomed")
    gone = _deployment(group, "gone")
    at = _group(group)
    read = {"writes": False}
    return [
        Call(method="GET", path=collection, where=where, action=f"{S}/read", scope=collection, **read),
        Call(method="PUT", path=collection, where=where, action=f"{S}/write", scope=collection, body=COLLECTION),
        Call(method="PATCH", path=collection, where=where, action=f"{S}/write", scope=collection, body={"tags": {}}),
        Call(method="POST", path=collection + "/disable", where=where, action=f"{S}/disable/action", scope=collection),
        Call(method="POST", path=collection + "/enable", where=where, action=f"{S}/enable/action", scope=collection),
        Call(
            method="GET",
            path=at + "/providers/Microsoft.Scheduler/jobCollections",
            where=where,
            action=f"{S}/read",
            scope=at,
            **read,
        ),
        Call(method="GET", path=collection + "/jobs", where=where, action=f"{J}/read", scope=collection, **read),
        Call(method="GET", path=job, where=where, action=f"{J}/read", scope=job, **read),
        Call(method="PUT", path=job, where=where, action=f"{J}/write", scope=job, body=JOB),
        Call(method="PATCH", path=job, where=where, action=f"{J}/write", scope=job, body={"properties": {}}),
        Call(method="GET", path=job + "/history", where=where, action=f"{J}/read", scope=job, **read),
        Call(method="POST", path=job + "/run", where=where, action=f"{J}/run/action", scope=job),
        Call(
            method="DELETE",
            path=doomed_job,
            where=where,
            action=f"{J}/delete",
            scope=doomed_job,
            prepare=_put(doomed_job, JOB),
        ),
        Call(
            method="DELETE",
            path=doomed,
            where=where,
            action=f"{S}/delete",
            scope=doomed,
            prepare=_put(doomed, COLLECTION),
        ),
        Call(method="GET", path=at, where=where, action=f"{G}/read", scope=at, **read),
        Call(method="HEAD", path=at, where=where, action=f"{G}/read", scope=at, **read),
        Call(method="PATCH", path=at, where=where, action=f"{G}/write", scope=at, body={"tags": {"team": "y"}}),
        Call(method="GET", path=at + "/resources", where=where, action=f"{G}/resources/read", scope=at, **read),
        Call(method="GET", path=deployment, where=where, action=f"{D}/read", scope=deployment, **read),
        Call(method="HEAD", path=deployment, where=where, action=f"{D}/read", scope=deployment, **read),
        Call(
            method="GET",
            path=at + "/providers/Microsoft.Resources/deployments",
            where=where,
            action=f"{D}/read",
            scope=at,
            **read,
        ),
        Call(
            method="GET",
            path=deployment + "/operations",
            where=where,
            action=f"{D}/operations/read",
            scope=deployment,
            **read,
        ),
        Call(
            method="POST",
            path=deployment + "/exportTemplate",
            where=where,
            action=f"{D}/exportTemplate/action",
            scope=deployment,
            **read,
        ),
        Call(
            method="POST",
            path=deployment + "/validate",
            where=where,
            action=f"{D}/validate/action",
            scope=deployment,
            body=template(),
            **read,
        ),
        Call(
            method="PUT",
            path=_deployment(group, "d2"),
            where=where,
            action=f"{D}/write",
            scope=_deployment(group, "d2"),
            body=template(collection_resource("c9")),
        ),
        Call(method="DELETE", path=gone, where=where, action=f"{D}/delete", scope=gone, prepare=_put(gone, template())),
    ]


SUB = f"/subscriptions/{SUB_A}"
SUBSCRIPTION_CALLS = [
    Call(
        method="GET",
        path=SUB + "/providers/Microsoft.Scheduler/jobCollections",
        where="list",
        action="",
        scope="",
        writes=False,
    ),
    Call(method="GET", path=SUB + "/resourceGroups", where="list", action="", scope="", writes=False),
    Call(
        method="GET",
        path=SUB + "/resources",
        where="list",
        action="Microsoft.Resources/subscriptions/resources/read",
        scope=SUB,
        writes=False,
    ),
    Call(method="GET", path=SUB + "/providers", where="member", action="", scope="", writes=False),
    Call(method="GET", path=SUB + "/providers/Microsoft.Scheduler", where="member", action="", scope="", writes=False),
    Call(
        method="POST",
        path=SUB + "/providers/Microsoft.Scheduler/register",
        where="subscription",
        action="Microsoft.Scheduler/register/action",
        scope=SUB,
    ),
    Call(  # a new group: only a role at the subscription may create it
        method="PUT",
        path=_group("rg-new"),
        where="subscription",
        action=f"{G}/write",
        scope=_group("rg-new"),
        body={"location": "westus"},
    ),
    Call(
        method="DELETE",
        path=_group("rg-doomed"),
        where="subscription",
        action=f"{G}/delete",
        scope=_group("rg-doomed"),
        prepare=_put(_group("rg-doomed"), {"location": "westus"}),
    ),
]
CALLS = _calls(RG1, "rg1") + _calls(RG2, "rg2") + SUBSCRIPTION_CALLS


def expected(who: str, call: Call) -> int | str:
    """ "2xx", or the refusal's status, for this principal: the roles' rules (docs/reference/authorization.md) spelt
    out by hand for each principal, not computed by the code under test."""
    if who == TENANT_B_APP:
        return 401
    if who == JOBS_CONTRIBUTOR and call.action == "Microsoft.Resources/subscriptions/resources/read":
        return 403  # its role reads no resources as such (no */read): nothing below the subscription to list
    if who == OWNER or call.where in ("list", "member"):
        return "2xx"  # lists answer what may be read; every principal here holds a role in A
    if who == READER:
        return "2xx" if call.action.endswith("/read") else 403
    if call.where != "rg1":
        return 403
    if who == CONTRIBUTOR:
        return "2xx"
    # The Scheduler Job Collections Contributor: the Scheduler's actions, deployments, and reading groups.
    assert who == JOBS_CONTRIBUTOR
    if call.action.startswith((S, D)) or call.action == f"{G}/read":
        return "2xx"
    return 403


def settle(emulator: Emulator, path: str) -> None:
    """Wait for a deployment PUT at ``path`` to finish (bounded), so that no background run changes what a later
    before/after comparison reads."""
    if "/providers/Microsoft.Resources/deployments/" not in path:
        return
    for _ in range(200):
        state = emulator.ok(OWNER, "GET", path).json()["properties"]["provisioningState"]
        if state not in ("Accepted", "Running"):
            return
        time.sleep(0.05)
    raise AssertionError(f"the deployment {path} did not finish")


def snapshot(emulator: Emulator) -> str:
    """Everything the calls could change in subscription A, as the Owner reads it."""
    reads = [f"{SUB}/providers/Microsoft.Scheduler/jobCollections", f"{SUB}/resourceGroups", f"{SUB}/providers"]
    for group in (RG1, RG2):
        reads += [
            _collection(group, "c1") + "/jobs",
            _group(group) + "/providers/Microsoft.Resources/deployments",
        ]
    return json.dumps([emulator.ok(OWNER, "GET", path).json() for path in reads], sort_keys=True)


def _refusal_message(who: str, action: str, scope: str) -> str:
    return (
        f"The client '{who}' with object id '{object_id(who)}' does not have authorization to perform action "
        f"'{action}' over scope '{scope}' or the scope is invalid. If access was recently granted, please refresh "
        "your credentials."
    )


@pytest.mark.parametrize("who", [READER, CONTRIBUTOR, JOBS_CONTRIBUTOR, TENANT_B_APP, OWNER])
def test_each_call_answers_as_the_principals_roles_say(emulator: Emulator, who: str) -> None:
    wrong: list[str] = []
    for call in CALLS:
        if call.prepare is not None:
            call.prepare(emulator)
        want = expected(who, call)
        before = snapshot(emulator) if want != "2xx" and call.writes else None
        response = emulator.call(who, call.method, call.path, call.body)
        got = response.status_code
        if got < 300 and call.method == "PUT":
            settle(emulator, call.path)
        if (want == "2xx" and got >= 300) or (want != "2xx" and got != want):
            wrong.append(f"{call.method} {call.path}: expected {want}, got {got} {response.text[:300]}")
            continue
        if want == "2xx" or call.method == "HEAD":
            continue
        error = response.json()["error"]
        if want == 401:
            assert error["code"] == "InvalidAuthenticationTokenTenant", error
            assert TENANT_A in error["message"], error
        else:
            assert error["code"] == "AuthorizationFailed", error
            assert error["message"] == _refusal_message(who, call.action, call.scope), error
        if before is not None:
            assert snapshot(emulator) == before, f"{who}'s refused {call.method} {call.path} changed something"
    assert wrong == [], "\n".join(wrong)


@pytest.mark.parametrize("who", [OWNER, READER, CONTRIBUTOR])
def test_an_undeclared_subscription_is_not_found(emulator: Emulator, who: str) -> None:
    response = emulator.call(who, "GET", f"/subscriptions/{UNDECLARED}/resourceGroups")
    assert response.status_code == 404, response.text
    assert response.json()["error"]["code"] == "SubscriptionNotFound"
    assert UNDECLARED in response.json()["error"]["message"]


def test_another_tenants_subscription_is_refused_with_nothing_listed(emulator: Emulator) -> None:
    response = emulator.call(OWNER, "GET", f"/subscriptions/{SUB_B}/providers/Microsoft.Scheduler/jobCollections")
    assert response.status_code == 401, response.text
    assert response.json()["error"]["code"] == "InvalidAuthenticationTokenTenant"
    assert "value" not in response.json()


def _names(response: httpx.Response) -> list[str]:
    return sorted(item["id"].split("/resourceGroups/", 1)[1] for item in response.json()["value"])


def test_lists_show_only_what_the_caller_may_read(emulator: Emulator) -> None:
    collections = f"{SUB}/providers/Microsoft.Scheduler/jobCollections"
    everything = _names(emulator.ok(OWNER, "GET", collections))
    assert any(name.startswith(RG2) for name in everything)
    assert _names(emulator.ok(READER, "GET", collections)) == everything
    granted = _names(emulator.ok(CONTRIBUTOR, "GET", collections))
    assert granted and all(name.startswith(RG1 + "/") for name in granted)
    assert granted == [name for name in everything if name.startswith(RG1 + "/")]
    groups = [item["name"] for item in emulator.ok(CONTRIBUTOR, "GET", f"{SUB}/resourceGroups").json()["value"]]
    assert groups == [RG1]
    resources = emulator.ok(CONTRIBUTOR, "GET", f"{SUB}/resources").json()["value"]
    assert resources and all(f"/resourceGroups/{RG1}/" in item["id"] for item in resources)
    # paging counts what is shown: one at a time, the granted group's collections and nothing else
    paged: list[str] = []
    link: str | None = f"{collections}?api-version={SCHEDULER}&$top=1"
    with emulator.server.client() as client:
        for _ in range(len(granted) + 2):
            if link is None:
                break
            page = client.get(link, headers={"Authorization": f"Bearer {emulator.tokens[CONTRIBUTOR]}"})
            assert page.status_code == 200, page.text
            paged += _names(page)
            link = page.json().get("nextLink")
    assert sorted(paged) == granted


def test_a_template_with_a_resource_its_caller_may_not_write_creates_nothing(emulator: Emulator) -> None:
    """The Scheduler Job Collections Contributor may deploy collections, not another provider's resource: the whole
    deployment is refused, naming that resource, and neither resource nor the deployment exists afterwards."""
    site = {"type": "Microsoft.Web/sites", "apiVersion": "2022-03-01", "name": "web1", "location": "westus"}
    before = snapshot(emulator)
    response = emulator.call(
        JOBS_CONTRIBUTOR, "PUT", _deployment(RG1, "mixed"), template(collection_resource("from-mixed"), site)
    )
    assert response.status_code == 403, response.text
    assert response.json()["error"]["message"] == _refusal_message(
        JOBS_CONTRIBUTOR, "Microsoft.Web/sites/write", f"{_group(RG1)}/providers/Microsoft.Web/sites/web1"
    )
    assert snapshot(emulator) == before
    assert emulator.call(OWNER, "GET", _deployment(RG1, "mixed")).status_code == 404
    assert emulator.call(OWNER, "GET", _collection(RG1, "from-mixed")).status_code == 404
    # the same template without the site deploys
    emulator.ok(JOBS_CONTRIBUTOR, "PUT", _deployment(RG1, "plain"), template(collection_resource("from-plain")))
    settle(emulator, _deployment(RG1, "plain"))


def test_the_deployment_to_redeploy_on_error_is_checked_like_the_deployment(emulator: Emulator) -> None:
    """onErrorDeployment would redeploy another template as its caller: a Scheduler Job Collections Contributor may
    not name one holding a resource it may not write (403, nothing recorded), and may name one it could deploy."""
    site = {"type": "Microsoft.Web/sites", "apiVersion": "2022-03-01", "name": "web-fallback", "location": "westus"}
    emulator.ok(OWNER, "PUT", _deployment(RG1, "with-site"), template(collection_resource("owner-made"), site))
    settle(emulator, _deployment(RG1, "with-site"))
    emulator.ok(OWNER, "PUT", _deployment(RG1, "collections-only"), template(collection_resource("fallback")))
    settle(emulator, _deployment(RG1, "collections-only"))

    def falling_back_to(name: str) -> dict[str, Any]:
        body = template(collection_resource("from-fallback"))
        body["properties"]["onErrorDeployment"] = {"type": "SpecificDeployment", "deploymentName": name}
        return body

    before = snapshot(emulator)
    response = emulator.call(JOBS_CONTRIBUTOR, "PUT", _deployment(RG1, "falls-back"), falling_back_to("with-site"))
    assert response.status_code == 403, response.text
    assert response.json()["error"]["message"] == _refusal_message(
        JOBS_CONTRIBUTOR, "Microsoft.Web/sites/write", f"{_group(RG1)}/providers/Microsoft.Web/sites/web-fallback"
    )
    assert snapshot(emulator) == before
    assert emulator.call(OWNER, "GET", _deployment(RG1, "falls-back")).status_code == 404
    assert emulator.call(OWNER, "GET", _collection(RG1, "from-fallback")).status_code == 404
    allowed = emulator.call(
        JOBS_CONTRIBUTOR, "PUT", _deployment(RG1, "falls-back"), falling_back_to("collections-only")
    )
    assert allowed.status_code == 201, allowed.text
    assert allowed.json()["properties"]["onErrorDeployment"]["deploymentName"] == "collections-only"
    settle(emulator, _deployment(RG1, "falls-back"))


def test_the_scheduler_sdk_of_a_reader_is_refused_with_403(emulator: Emulator) -> None:
    credential = ClientSecretCredential(
        TENANT_A,
        READER,
        SECRET,
        authority=emulator.server.url,
        connection_verify=str(emulator.server.cert_path),
        disable_instance_discovery=True,
    )
    with scheduler_sdk(emulator.server, credential, SUB_A) as client:
        definition = JobCollectionDefinition(
            location="westus", properties=JobCollectionProperties(sku=Sku(name="Standard"))
        )
        with pytest.raises(HttpResponseError) as refused:
            client.job_collections.create_or_update(RG1, "sdk-made", definition)
        assert refused.value.status_code == 403
        assert refused.value.error is not None and refused.value.error.code == "AuthorizationFailed"
        assert client.job_collections.get(RG1, "c1").name == "c1"  # reading is allowed
    assert emulator.call(OWNER, "GET", _collection(RG1, "sdk-made")).status_code == 404
    gc.collect()
