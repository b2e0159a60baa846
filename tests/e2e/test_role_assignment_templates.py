"""ARM templates with ``Microsoft.Authorization/roleAssignments`` resources
(docs/reference/authorization.md#role-assignments-in-a-template) against a started server over HTTPS with
``--auth issued``, on both stores: at the resource group's scope, and as an extension resource whose ``scope``
names a job collection. What the granted principal may then do is what the role says; a deployment whose caller
may not write role assignments is refused and records nothing; bad input in the template gets the deployment's own
errors."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from support.databases import TEST_SECRET_KEY
from support.server import EmulatorPool, ServerProcess
from support.waiting import wait_until

TENANT = "a1a1a1a1-0000-4000-8000-00000000000a"
SUB = "11111111-1111-4111-8111-111111111111"
OWNER, OWNER_SECRET = "owner-a", "owner-a-secret"
TEAM, TEAM_SECRET, TEAM_OID = "team-a", "team-secret", "5d5e7f34-0000-4000-8000-000000000001"
CONTRIBUTOR, CONTRIBUTOR_SECRET, CONTRIBUTOR_OID = "contrib-a", "contrib-secret", "5d5e7f34-0000-4000-8000-000000000002"
READER_ID = "acdd72a7-3385-48ef-bd42-f606fba81ae7"
JOBS_CONTRIBUTOR_ID = "188a0f2f-5c9e-469b-ae67-2aa5ce574b94"
CONTRIBUTED = "rg-contributed"  # the group CONTRIBUTOR is Contributor of
ARM = "https://management.azure.com/.default"
SCHEDULER, RESOURCES, AUTHORIZATION = "2016-03-01", "2022-09-01", "2022-04-01"
ASSIGNMENT_TYPE = "Microsoft.Authorization/roleAssignments"


@pytest.fixture(scope="module")
def server(own_database: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    files = tmp_path_factory.mktemp("authz-templates")
    group = f"/subscriptions/{SUB}/resourceGroups/{CONTRIBUTED}"
    (files / "principals.json").write_text(
        json.dumps(
            {
                "principals": [
                    {"clientId": TEAM, "secret": TEAM_SECRET, "tenant": TENANT, "objectId": TEAM_OID},
                    {
                        "clientId": CONTRIBUTOR,
                        "secret": CONTRIBUTOR_SECRET,
                        "tenant": TENANT,
                        "objectId": CONTRIBUTOR_OID,
                    },
                ],
                "assignments": [{"principalId": CONTRIBUTOR_OID, "role": "Contributor", "scope": group}],
            }
        )
    )
    env = {"SCHEDULER_PRINCIPALS": f"{OWNER}:{OWNER_SECRET}:{TENANT}:{SUB}", "SCHEDULER_SECRET_KEY": TEST_SECRET_KEY}
    flags = ("--no-dispatcher", "--auth", "issued", "--principals-file", str(files / "principals.json"))
    with EmulatorPool() as pool:
        yield pool.start(tmp_path_factory.mktemp("data"), *flags, env=env, https=True, database_url=own_database)


class As:
    """Calls as one principal (its token from the emulator's token service)."""

    def __init__(self, server: ServerProcess, client_id: str, secret: str) -> None:
        self.server = server
        with server.client() as client:
            response = client.post(
                f"/{TENANT}/oauth2/v2.0/token",
                data={
                    "grant_type": "client_credentials",
                    "client_id": client_id,
                    "client_secret": secret,
                    "scope": ARM,
                },
            )
        assert response.status_code == 200, response.text
        self.token = response.json()["access_token"]

    def call(self, method: str, path: str, body: object = None, *, version: str = RESOURCES) -> httpx.Response:
        with self.server.client() as client:
            return client.request(
                method,
                path,
                params={"api-version": version},
                json=body,
                headers={"Authorization": f"Bearer {self.token}"},
            )


def _group(name: str) -> str:
    return f"/subscriptions/{SUB}/resourceGroups/{name}"


def _collection(group: str, name: str) -> str:
    return f"{group}/providers/Microsoft.Scheduler/jobCollections/{name}"


def _deployment(group: str, name: str) -> str:
    return f"{group}/providers/Microsoft.Resources/deployments/{name}"


def _assignments(scope: str) -> str:
    return f"{scope}/providers/{ASSIGNMENT_TYPE}"


def _template(*resources: dict[str, Any], parameters: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "properties": {
            "mode": "Incremental",
            "template": {
                "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
                "contentVersion": "1.0.0.0",
                "parameters": {"principalId": {"type": "string"}},
                "resources": list(resources),
            },
            "parameters": {"principalId": {"value": TEAM_OID}, **(parameters or {})},
        }
    }


def _assignment(role: str, *, name: str = "[guid(resourceGroup().id, parameters('principalId'))]", **more: Any) -> Any:
    return {
        "type": ASSIGNMENT_TYPE,
        "apiVersion": AUTHORIZATION,
        "name": name,
        "properties": {
            "roleDefinitionId": f"[subscriptionResourceId('Microsoft.Authorization/roleDefinitions', '{role}')]",
            "principalId": "[parameters('principalId')]",
            "principalType": "ServicePrincipal",
        },
        **more,
    }


def _collection_resource(name: str) -> dict[str, Any]:
    return {
        "type": "Microsoft.Scheduler/jobCollections",
        "apiVersion": SCHEDULER,
        "name": name,
        "location": "westus",
        "properties": {"sku": {"name": "Standard"}},
    }


def _new_group(owner: As, name: str) -> str:
    group = _group(name)
    made = owner.call("PUT", group, {"location": "westus"})
    assert made.status_code in (200, 201), made.text
    return group


def _deployed(owner: As, path: str, body: dict[str, Any]) -> dict[str, Any]:
    """PUT the deployment and wait for its end; the deployment as GET answers it then."""
    started = owner.call("PUT", path, body)
    assert started.status_code in (200, 201), started.text

    def finished() -> dict[str, Any] | None:
        found: dict[str, Any] = owner.call("GET", path).json()
        return None if found["properties"]["provisioningState"] in ("Accepted", "Running") else found

    return wait_until(finished, 30, f"the deployment {path}")


def _error(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    error: dict[str, Any] = response.json()["error"]
    assert error["code"] == code, error
    return error


def test_a_template_grants_a_team_reader_on_one_group(server: ServerProcess) -> None:
    owner, team = As(server, OWNER, OWNER_SECRET), As(server, TEAM, TEAM_SECRET)
    group = _new_group(owner, "rg-read-by-team")
    other = _new_group(owner, "rg-not-granted")
    for where in (group, other):
        made = owner.call("PUT", _collection(where, "jobs"), {"location": "westus"}, version=SCHEDULER)
        assert made.status_code in (200, 201), made.text
    before = owner.call("GET", _collection(group, "jobs"), version=SCHEDULER).json()["location"]
    # before the deployment the team reads nothing in the group
    _error(team.call("GET", _collection(group, "jobs"), version=SCHEDULER), 403, "AuthorizationFailed")

    done = _deployed(owner, _deployment(group, "grant-readers"), _template(_assignment(READER_ID)))
    assert done["properties"]["provisioningState"] == "Succeeded", done
    [made] = done["properties"]["outputResources"]
    assert made["id"].lower().startswith(_assignments(group).lower() + "/")
    name = made["id"].rsplit("/", 1)[-1]
    stored = owner.call("GET", f"{_assignments(group)}/{name}", version=AUTHORIZATION)
    assert stored.status_code == 200, stored.text
    assert stored.json()["properties"]["principalId"] == TEAM_OID
    assert stored.json()["properties"]["scope"] == group
    assert stored.json()["properties"]["roleDefinitionId"] == (
        f"/subscriptions/{SUB}/providers/Microsoft.Authorization/roleDefinitions/{READER_ID}"
    )

    # the team may read the group and what is in it, change nothing there, and read nothing elsewhere
    assert team.call("GET", group).status_code == 200
    assert team.call("GET", _collection(group, "jobs"), version=SCHEDULER).status_code == 200
    refused = _error(
        team.call("PUT", _collection(group, "jobs"), {"location": "eastus"}, version=SCHEDULER),
        403,
        "AuthorizationFailed",
    )
    assert "'Microsoft.Scheduler/jobCollections/write'" in refused["message"]
    assert owner.call("GET", _collection(group, "jobs"), version=SCHEDULER).json()["location"] == before
    _error(team.call("GET", _collection(other, "jobs"), version=SCHEDULER), 403, "AuthorizationFailed")

    # deploying the same template again finds the same assignment: nothing new, still Succeeded
    again = _deployed(owner, _deployment(group, "grant-readers"), _template(_assignment(READER_ID)))
    assert again["properties"]["provisioningState"] == "Succeeded", again
    listed = owner.call("GET", _assignments(group), version=AUTHORIZATION).json()["value"]
    assert [item["name"] for item in listed if item["properties"]["principalId"] == TEAM_OID] == [name]


def test_an_extension_resource_grants_on_one_job_collection(server: ServerProcess) -> None:
    owner, team = As(server, OWNER, OWNER_SECRET), As(server, TEAM, TEAM_SECRET)
    group = _new_group(owner, "rg-collection-grant")
    template = _template(
        _collection_resource("granted"),
        _collection_resource("kept"),
        # the relative form Bicep writes; the collection comes first without a dependsOn
        _assignment(
            JOBS_CONTRIBUTOR_ID,
            name="[guid(resourceId('Microsoft.Scheduler/jobCollections', 'granted'), parameters('principalId'))]",
            scope="Microsoft.Scheduler/jobCollections/granted",
        ),
    )
    done = _deployed(owner, _deployment(group, "grant-one"), template)
    assert done["properties"]["provisioningState"] == "Succeeded", done
    granted = _collection(group, "granted")
    listed = owner.call("GET", _assignments(granted), version=AUTHORIZATION).json()["value"]
    mine = [item for item in listed if item["properties"]["principalId"] == TEAM_OID]
    assert [item["properties"]["scope"] for item in mine] == [granted]
    assert mine[0]["id"] == f"{_assignments(granted)}/{mine[0]['name']}"

    job = {
        "properties": {
            "startTime": (datetime.now(UTC) + timedelta(days=30)).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "action": {"type": "Http", "request": {"uri": "http://127.0.0.1:9/hook", "method": "POST"}},
            "recurrence": {"frequency": "Day", "interval": 1},
        }
    }
    written = team.call("PUT", f"{granted}/jobs/nightly", job, version=SCHEDULER)
    assert written.status_code == 201, written.text
    _error(
        team.call("PUT", f"{_collection(group, 'kept')}/jobs/nightly", job, version=SCHEDULER),
        403,
        "AuthorizationFailed",
    )

    # the full resource id form of the same scope: the same assignment (same GUID), found again
    by_id = _template(
        _assignment(
            JOBS_CONTRIBUTOR_ID,
            name="[guid(resourceId('Microsoft.Scheduler/jobCollections', 'granted'), parameters('principalId'))]",
            scope="[resourceId('Microsoft.Scheduler/jobCollections', 'granted')]",
        )
    )
    again = _deployed(owner, _deployment(group, "grant-by-id"), by_id)
    assert again["properties"]["provisioningState"] == "Succeeded", again
    assert again["properties"]["outputResources"] == [{"id": mine[0]["id"]}]


def test_a_caller_that_may_not_grant_deploys_nothing(server: ServerProcess) -> None:
    owner, contributor = As(server, OWNER, OWNER_SECRET), As(server, CONTRIBUTOR, CONTRIBUTOR_SECRET)
    group = _new_group(owner, CONTRIBUTED)
    # a Contributor deploys collections into its group, but may not give anyone a role there
    template = _template(_collection_resource("from-grant"), _assignment(READER_ID))
    refused = _error(contributor.call("PUT", _deployment(group, "self-grant"), template), 403, "AuthorizationFailed")
    assert "'Microsoft.Authorization/roleAssignments/write'" in refused["message"]
    assert f"over scope '{_assignments(group)}/" in refused["message"]
    assert f"with object id '{CONTRIBUTOR_OID}'" in refused["message"]
    _error(owner.call("GET", _deployment(group, "self-grant")), 404, "DeploymentNotFound")
    _error(owner.call("GET", _collection(group, "from-grant"), version=SCHEDULER), 404, "ResourceNotFound")
    listed = owner.call("GET", _assignments(group), version=AUTHORIZATION).json()["value"]
    assert [item for item in listed if item["properties"]["principalId"] == TEAM_OID] == []
    # validate refuses it the same way
    _error(
        contributor.call("POST", _deployment(group, "self-grant") + "/validate", template), 403, "AuthorizationFailed"
    )
    # without the assignment, the same caller's template deploys
    plain = _deployed(contributor, _deployment(group, "plain"), _template(_collection_resource("from-plain")))
    assert plain["properties"]["provisioningState"] == "Succeeded", plain


@pytest.mark.parametrize(
    ("resource", "code", "target"),
    [
        (_assignment(READER_ID, name="not-a-guid"), "InvalidRoleAssignmentId", "template.resources[0].name"),
        (
            _assignment(str(uuid.UUID(int=7))),
            "RoleDefinitionDoesNotExist",
            "template.resources[0].properties.roleDefinitionId",
        ),
        (
            {**_assignment(READER_ID), "properties": {"principalId": "[parameters('principalId')]"}},
            "BadRequest",
            "template.resources[0].properties.roleDefinitionId",
        ),
        (
            _assignment(READER_ID, scope=f"/subscriptions/{SUB}/resourceGroups/elsewhere"),
            "InvalidTemplate",
            "template.resources[0].scope",
        ),
        (
            _assignment(READER_ID, scope="Microsoft.Scheduler/jobCollections/c1/jobs/j1"),
            "InvalidScope",
            "template.resources[0].scope",
        ),
    ],
    ids=["name not a GUID", "unknown role", "no roleDefinitionId", "another group", "a job"],
)
def test_bad_input_in_the_template_is_refused_before_anything_is_deployed(
    server: ServerProcess, resource: dict[str, Any], code: str, target: str
) -> None:
    owner = As(server, OWNER, OWNER_SECRET)
    group = _new_group(owner, "rg-bad-grants")
    path = _deployment(group, f"bad-{uuid.uuid4().hex[:8]}")
    error = _error(owner.call("PUT", path, _template(resource)), 400, code)
    assert error["target"] == target
    _error(owner.call("GET", path), 404, "DeploymentNotFound")
    listed = owner.call("GET", _assignments(group), version=AUTHORIZATION).json()["value"]
    assert [item for item in listed if item["properties"]["scope"] == group] == []


def test_a_grant_that_exists_under_another_name_fails_the_deployment(server: ServerProcess) -> None:
    owner = As(server, OWNER, OWNER_SECRET)
    group = _new_group(owner, "rg-granted-twice")
    first = _deployed(owner, _deployment(group, "first"), _template(_assignment(READER_ID)))
    assert first["properties"]["provisioningState"] == "Succeeded", first
    second = _template(_assignment(READER_ID, name=str(uuid.uuid4())))
    done = _deployed(owner, _deployment(group, "second"), second)
    assert done["properties"]["provisioningState"] == "Failed", done
    assert done["properties"]["error"]["code"] == "DeploymentFailed"
    assert done["properties"]["error"]["details"] == [
        {"code": "RoleAssignmentExists", "message": "The role assignment already exists."}
    ]
    operations = owner.call("GET", f"{group}/deployments/second/operations").json()["value"]
    assert [op["properties"]["statusCode"] for op in operations] == ["RoleAssignmentExists"]
    listed = owner.call("GET", _assignments(group), version=AUTHORIZATION).json()["value"]
    assert len([item for item in listed if item["properties"]["scope"] == group]) == 1
