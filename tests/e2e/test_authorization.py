"""Microsoft.Authorization and the tenant rules (docs/reference/authorization.md) against started servers over HTTPS
with ``--auth issued``, on both stores: two tenants, an Owner of subscription A, a principal of A's tenant that
holds only what it is given, and the Owner of subscription B in tenant B. On PostgreSQL a second process shares
the database (and the token-signing key)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import jwt
import pytest
from support.databases import TEST_SECRET_KEY, Backend
from support.server import EmulatorPool, ServerProcess

TENANT_A, TENANT_B = "a1a1a1a1-0000-4000-8000-00000000000a", "b2b2b2b2-0000-4000-8000-00000000000b"
SUB_A, SUB_B = "11111111-1111-4111-8111-111111111111", "22222222-2222-4222-8222-222222222222"
OWNER_A, OWNER_A_SECRET = "owner-a", "owner-a-secret"
TEAM, TEAM_SECRET, TEAM_OID = "team-a", "team-secret", "5d5e7f34-0000-4000-8000-000000000001"
OWNER_B, OWNER_B_SECRET = "owner-b", "owner-b-secret"
READER_ID = "acdd72a7-3385-48ef-bd42-f606fba81ae7"
OWNER_ID = "8e3af657-a8ff-443c-a75c-2fe8c4bcb635"
API = {"api-version": "2022-04-01"}
ARM = "https://management.azure.com/.default"


@dataclass
class Servers:
    first: ServerProcess
    second: ServerProcess | None  # on PostgreSQL: another process on the same database


@pytest.fixture(scope="module")
def servers(backend: Backend, own_database: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    files = tmp_path_factory.mktemp("authz")
    (files / "principals.json").write_text(
        json.dumps(
            {"principals": [{"clientId": TEAM, "secret": TEAM_SECRET, "tenant": TENANT_A, "objectId": TEAM_OID}]}
        )
    )
    key_file = files / "signing-key.pem"
    env = {
        "SCHEDULER_PRINCIPALS": f"{OWNER_A}:{OWNER_A_SECRET}:{TENANT_A}:{SUB_A}, "
        f"{OWNER_B}:{OWNER_B_SECRET}:{TENANT_B}:{SUB_B}",
        "SCHEDULER_SECRET_KEY": TEST_SECRET_KEY,
    }
    flags = (
        "--no-dispatcher",
        "--auth",
        "issued",
        "--principals-file",
        str(files / "principals.json"),
        "--token-signing-key-file",
        str(key_file),
    )
    with EmulatorPool() as pool:
        first = pool.start(tmp_path_factory.mktemp("one"), *flags, env=env, https=True, database_url=own_database)
        second = None
        if backend.name == "postgresql":
            second = pool.start(tmp_path_factory.mktemp("two"), *flags, env=env, https=True, database_url=own_database)
        yield Servers(first, second)


def _token(server: ServerProcess, client_id: str, secret: str, tenant: str) -> str:
    with server.client() as client:
        response = client.post(
            f"/{tenant}/oauth2/v2.0/token",
            data={"grant_type": "client_credentials", "client_id": client_id, "client_secret": secret, "scope": ARM},
        )
    assert response.status_code == 200, response.text
    return str(response.json()["access_token"])


def _call(
    server: ServerProcess, method: str, path: str, token: str, body: object = None, **params: str
) -> httpx.Response:
    with server.client() as client:
        return client.request(
            method, path, params={**API, **params}, json=body, headers={"Authorization": f"Bearer {token}"}
        )


def _owner(server: ServerProcess) -> str:
    return _token(server, OWNER_A, OWNER_A_SECRET, TENANT_A)


def _team(server: ServerProcess) -> str:
    return _token(server, TEAM, TEAM_SECRET, TENANT_A)


def _assignments(scope: str) -> str:
    return f"{scope}/providers/Microsoft.Authorization/roleAssignments"


def _grant(scope: str, role: str = READER_ID, principal: str = TEAM_OID) -> dict[str, object]:
    return {
        "properties": {
            "roleDefinitionId": f"/subscriptions/{SUB_A}/providers/Microsoft.Authorization/roleDefinitions/{role}",
            "principalId": principal,
            "principalType": "ServicePrincipal",
        }
    }


def _error(response: httpx.Response, status: int, code: str) -> str:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] == code
    return str(error["message"])


def test_role_definitions_are_azures_built_in_roles_and_filter_by_name(servers: Servers) -> None:
    server = servers.first
    token = _team(server)
    path = f"/subscriptions/{SUB_A}/providers/Microsoft.Authorization/roleDefinitions"
    listed = _call(server, "GET", path, token)
    assert listed.status_code == 200, listed.text
    names = {item["properties"]["roleName"]: item["name"] for item in listed.json()["value"]}
    assert names["Owner"] == OWNER_ID
    assert names["Reader"] == READER_ID
    assert names["Contributor"] == "b24988ac-6180-42a0-ab88-20f7382dd24c"
    assert names["User Access Administrator"] == "18d7d88d-d35e-4fb5-a5c3-7773c20a72d9"
    assert names["Scheduler Job Collections Contributor"] == "188a0f2f-5c9e-469b-ae67-2aa5ce574b94"
    reader = _call(server, "GET", path, token, **{"$filter": "roleName eq 'Reader'"}).json()["value"]
    assert [item["name"] for item in reader] == [READER_ID]
    assert reader[0]["id"] == f"{path}/{READER_ID}"
    assert reader[0]["properties"]["permissions"][0]["actions"] == ["*/read"]
    assert reader[0]["properties"]["assignableScopes"] == ["/"]
    one = _call(server, "GET", f"{path}/{OWNER_ID}", token)
    assert one.json()["properties"]["roleName"] == "Owner"
    _error(_call(server, "GET", f"{path}/{uuid.uuid4()}", token), 404, "RoleDefinitionDoesNotExist")


def test_another_tenants_subscription_is_401_and_an_undeclared_one_404(servers: Servers) -> None:
    server = servers.first
    token = _owner(server)
    message = _error(
        _call(server, "GET", _assignments(f"/subscriptions/{SUB_B}"), token), 401, "InvalidAuthenticationTokenTenant"
    )
    assert message.startswith(
        f"The access token is from the wrong issuer '{server.url}/{TENANT_A.lower()}/v2.0'. "
        f"It must match the tenant '{server.url}/{TENANT_B}/v2.0' associated with this "
        "subscription."
    )
    nobody = "33333333-3333-4333-8333-333333333333"
    message = _error(_call(server, "GET", _assignments(f"/subscriptions/{nobody}"), token), 404, "SubscriptionNotFound")
    assert message == f"The subscription '{nobody}' could not be found."


def test_assignments_crud_inheritance_and_refusals(servers: Servers) -> None:
    server = servers.first
    owner, team = _owner(server), _team(server)
    group = f"/subscriptions/{SUB_A}/resourceGroups/crud-group"
    name = str(uuid.uuid4())

    # the team holds nothing yet: it may not grant itself anything, nor read the group's assignments
    refused = _call(server, "PUT", f"{_assignments(group)}/{name}", team, _grant(group))
    message = _error(refused, 403, "AuthorizationFailed")
    assert message == (
        f"The client '{TEAM}' with object id '{TEAM_OID}' does not have authorization to perform action "
        f"'Microsoft.Authorization/roleAssignments/write' over scope '{group}' or the scope is invalid. If access "
        "was recently granted, please refresh your credentials."
    )
    assert _call(server, "GET", f"{_assignments(group)}/{name}", owner).status_code == 404  # nothing was stored

    created = _call(server, "PUT", f"{_assignments(group)}/{name}", owner, _grant(group))
    assert created.status_code == 201, created.text
    body = created.json()
    assert body["id"] == f"{_assignments(group)}/{name}"
    assert body["type"] == "Microsoft.Authorization/roleAssignments"
    assert body["properties"]["principalId"] == TEAM_OID
    assert body["properties"]["scope"] == group
    assert body["properties"]["roleDefinitionId"].endswith(f"/roleDefinitions/{READER_ID}")
    assert _call(server, "GET", f"{_assignments(group)}/{name}", owner).json()["name"] == name

    # the same grant under another name, a name that is no GUID, a role that does not exist
    _error(
        _call(server, "PUT", f"{_assignments(group)}/{uuid.uuid4()}", owner, _grant(group)), 409, "RoleAssignmentExists"
    )
    _error(
        _call(server, "PUT", f"{_assignments(group)}/not-a-guid", owner, _grant(group)), 400, "InvalidRoleAssignmentId"
    )
    _error(
        _call(server, "PUT", f"{_assignments(group)}/{uuid.uuid4()}", owner, _grant(group, str(uuid.uuid4()))),
        400,
        "RoleDefinitionDoesNotExist",
    )

    # the Reader of the group reads its assignments (and the inherited ones, atScope()), not the subscription's
    seen = _call(server, "GET", _assignments(group), team, **{"$filter": "atScope()"})
    assert seen.status_code == 200, seen.text
    scopes = {(item["properties"]["scope"], item["properties"]["principalId"]) for item in seen.json()["value"]}
    assert (group, TEAM_OID) in scopes
    assert any(scope == f"/subscriptions/{SUB_A}" for scope, _ in scopes)  # the owner's, inherited by the group
    at_subscription = _call(server, "GET", _assignments(f"/subscriptions/{SUB_A}"), team).json()["value"]
    assert {item["properties"]["scope"] for item in at_subscription} == {group}  # only what it may read
    # a Reader may not write, below its scope either
    _error(
        _call(server, "PUT", f"{_assignments(group)}/{uuid.uuid4()}", team, _grant(group, OWNER_ID)),
        403,
        "AuthorizationFailed",
    )
    by_principal = _call(
        server, "GET", _assignments(f"/subscriptions/{SUB_A}"), owner, **{"$filter": f"principalId eq '{TEAM_OID}'"}
    ).json()["value"]
    assert [item["name"] for item in by_principal] == [name]

    deleted = _call(server, "DELETE", f"{_assignments(group)}/{name}", owner)
    assert deleted.status_code == 200, deleted.text
    _error(_call(server, "GET", f"{_assignments(group)}/{name}", owner), 404, "RoleAssignmentNotFound")
    assert _call(server, "DELETE", f"{_assignments(group)}/{name}", owner).status_code == 204


def test_assignments_survive_a_restart_and_every_process_sees_them(servers: Servers) -> None:
    server = servers.first
    group = f"/subscriptions/{SUB_A}/resourceGroups/kept-group"
    name = str(uuid.uuid4())
    created = _call(server, "PUT", f"{_assignments(group)}/{name}", _owner(server), _grant(group))
    assert created.status_code == 201, created.text
    if servers.second is not None:
        other = servers.second
        assert _call(other, "GET", f"{_assignments(group)}/{name}", _owner(other)).status_code == 200
    server.stop()
    server.start()
    again = _call(server, "GET", f"{_assignments(group)}/{name}", _owner(server))
    assert again.status_code == 200, again.text
    assert again.json()["properties"]["principalId"] == TEAM_OID


SCHEDULER_API = {"api-version": "2016-03-01"}
GROUPS_API = {"api-version": "2021-04-01"}
COLLECTION_BODY = {"location": "westus", "properties": {"sku": {"name": "Standard"}}}


def test_deleting_a_collection_or_a_group_deletes_the_assignments_on_it(servers: Servers) -> None:
    """ARM leaves no assignment behind a deleted resource: one listed before the delete is gone after it, and a
    collection or group made again under the same name does not inherit it."""
    server = servers.first
    owner, team = _owner(server), _team(server)
    group = f"/subscriptions/{SUB_A}/resourceGroups/gone-{uuid.uuid4().hex[:8]}"
    collection = f"{group}/providers/Microsoft.Scheduler/jobCollections/c1"
    assert _call(server, "PUT", group, owner, {"location": "westus"}, **GROUPS_API).status_code == 201

    def make_collection() -> None:
        made = _call(server, "PUT", collection, owner, COLLECTION_BODY, **SCHEDULER_API)
        assert made.status_code in (200, 201), made.text

    def team_reads(path: str, **api: str) -> int:
        return _call(server, "GET", path, team, **api).status_code

    def team_assignments() -> set[str]:
        listed = _call(
            server, "GET", _assignments(f"/subscriptions/{SUB_A}"), owner, **{"$filter": f"principalId eq '{TEAM_OID}'"}
        )
        assert listed.status_code == 200, listed.text
        return {item["properties"]["scope"] for item in listed.json()["value"]}

    make_collection()
    on_collection = str(uuid.uuid4())
    granted = _call(server, "PUT", f"{_assignments(collection)}/{on_collection}", owner, _grant(collection))
    assert granted.status_code == 201, granted.text
    assert collection in team_assignments()
    assert team_reads(collection, **SCHEDULER_API) == 200

    assert _call(server, "DELETE", collection, owner, **SCHEDULER_API).status_code == 200
    assert collection not in team_assignments()
    _error(_call(server, "GET", f"{_assignments(group)}/{on_collection}", owner), 404, "RoleAssignmentNotFound")
    make_collection()  # the same name again: a new resource, with no grant of the old one
    _error(_call(server, "GET", collection, team, **SCHEDULER_API), 403, "AuthorizationFailed")

    on_group, on_new_collection = str(uuid.uuid4()), str(uuid.uuid4())
    assert _call(server, "PUT", f"{_assignments(group)}/{on_group}", owner, _grant(group)).status_code == 201
    granted = _call(server, "PUT", f"{_assignments(collection)}/{on_new_collection}", owner, _grant(collection))
    assert granted.status_code == 201, granted.text
    assert {group, collection} <= team_assignments()
    assert team_reads(group, **GROUPS_API) == 200
    assert _call(server, "DELETE", group, owner, **GROUPS_API).status_code == 202
    assert not {group, collection} & team_assignments()  # the group's and the collection's in it
    assert _call(server, "PUT", group, owner, {"location": "westus"}, **GROUPS_API).status_code == 201
    make_collection()
    _error(_call(server, "GET", group, team, **GROUPS_API), 403, "AuthorizationFailed")
    _error(_call(server, "GET", collection, team, **SCHEDULER_API), 403, "AuthorizationFailed")


def test_the_owner_of_b_reads_nothing_of_a(servers: Servers) -> None:
    server = servers.first
    token_b = _token(server, OWNER_B, OWNER_B_SECRET, TENANT_B)
    _error(
        _call(server, "GET", _assignments(f"/subscriptions/{SUB_A}"), token_b), 401, "InvalidAuthenticationTokenTenant"
    )
    own = _call(server, "GET", _assignments(f"/subscriptions/{SUB_B}"), token_b, **{"$filter": "atScope()"})
    assert own.status_code == 200, own.text
    assert [item["properties"]["roleDefinitionId"].rsplit("/", 1)[-1] for item in own.json()["value"]] == [OWNER_ID]


def test_azure_mgmt_authorization_grants_lists_and_revokes(servers: Servers) -> None:
    """The official client (azure-mgmt-authorization, its default api-versions) against the emulator."""
    from azure.core.exceptions import HttpResponseError
    from azure.identity import ClientSecretCredential
    from azure.mgmt.authorization import AuthorizationManagementClient
    from azure.mgmt.authorization.models import RoleAssignmentCreateParameters

    server = servers.first

    def client(client_id: str, secret: str) -> AuthorizationManagementClient:
        credential = ClientSecretCredential(
            TENANT_A,
            client_id,
            secret,
            authority=server.url,
            disable_instance_discovery=True,
            connection_verify=str(server.cert_path),
        )
        return AuthorizationManagementClient(
            credential, SUB_A, base_url=server.url, connection_verify=str(server.cert_path), retry_total=0
        )

    owner, team = client(OWNER_A, OWNER_A_SECRET), client(TEAM, TEAM_SECRET)
    scope = f"/subscriptions/{SUB_A}/resourceGroups/sdk-group"
    reader = next(iter(owner.role_definitions.list(scope, filter="roleName eq 'Reader'")))
    assert reader.name == READER_ID and reader.role_name == "Reader"
    name = str(uuid.uuid4())
    made = owner.role_assignments.create(
        scope,
        name,
        RoleAssignmentCreateParameters(
            role_definition_id=reader.id, principal_id=TEAM_OID, principal_type="ServicePrincipal"
        ),
    )
    assert made.name == name and made.principal_id == TEAM_OID and made.scope == scope
    listed = list(owner.role_assignments.list_for_scope(scope, filter=f"principalId eq '{TEAM_OID}'"))
    assert [a.name for a in listed] == [name]
    assert owner.role_assignments.get(scope, name).role_definition_id.endswith(READER_ID)
    with pytest.raises(HttpResponseError) as refused:  # a Reader may not grant
        team.role_assignments.create(
            scope,
            str(uuid.uuid4()),
            RoleAssignmentCreateParameters(role_definition_id=reader.id, principal_id=TEAM_OID),
        )
    assert refused.value.status_code == 403 and refused.value.error.code == "AuthorizationFailed"
    owner.role_assignments.delete(scope, name)
    assert list(owner.role_assignments.list_for_scope(scope, filter=f"principalId eq '{TEAM_OID}'")) == []


# --- the root scope "/" (docs/reference/authorization.md#the-root-scope) ------------------------------------------

ADMIN, ADMIN_SECRET, ADMIN_OID = "emulator-admin", "admin-secret", "5d5e7f34-0000-4000-8000-0000000000ad"


@pytest.fixture(scope="module")
def clock_server(own_database: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A virtual clock with a dispatcher; an administrator given Owner at "/" by the principals file, and the Owner
    of subscription A (nothing at "/")."""
    files = tmp_path_factory.mktemp("root")
    admin = {"clientId": ADMIN, "secret": ADMIN_SECRET, "tenant": TENANT_A, "objectId": ADMIN_OID}
    (files / "principals.json").write_text(
        json.dumps({"principals": [{**admin, "roles": [{"role": "Owner", "scope": "/"}]}]})
    )
    # the module's database is the servers fixture's too: the same secret key
    env = {
        "SCHEDULER_PRINCIPALS": f"{OWNER_A}:{OWNER_A_SECRET}:{TENANT_A}:{SUB_A}",
        "SCHEDULER_SECRET_KEY": TEST_SECRET_KEY,
    }
    flags = ("--auth", "issued", "--clock", "virtual", "--principals-file", str(files / "principals.json"))
    with EmulatorPool() as pool:
        yield pool.start(tmp_path_factory.mktemp("clock"), *flags, env=env, https=True, database_url=own_database)


def _oid(token: str) -> str:
    return str(jwt.decode(token, options={"verify_signature": False})["oid"])


def _refused_at_root(response: httpx.Response, client_id: str, oid: str, action: str) -> None:
    assert _error(response, 403, "AuthorizationFailed") == (
        f"The client '{client_id}' with object id '{oid}' does not have authorization to perform action '{action}' "
        "over scope '/' or the scope is invalid. If access was recently granted, please refresh your credentials."
    )


def test_a_role_at_the_root_steps_the_clock_and_a_subscription_owner_is_refused(clock_server: ServerProcess) -> None:
    server = clock_server
    admin, owner = _token(server, ADMIN, ADMIN_SECRET, TENANT_A), _owner(server)
    before = _call(server, "GET", "/_emulator/clock", owner).json()["now"]
    _refused_at_root(
        _call(server, "POST", "/_emulator/clock", owner, {"advance": "PT1H"}),
        OWNER_A,
        _oid(owner),
        "Microsoft.Scheduler/emulator/clock/write",
    )
    _refused_at_root(
        _call(server, "POST", "/_emulator/reset", owner),
        OWNER_A,
        _oid(owner),
        "Microsoft.Scheduler/emulator/reset/action",
    )
    _refused_at_root(
        _call(server, "GET", "/metrics", owner), OWNER_A, _oid(owner), "Microsoft.Scheduler/emulator/metrics/read"
    )
    assert _call(server, "GET", "/_emulator/clock", owner).json()["now"] == before  # the refusal moved nothing
    moved = _call(server, "POST", "/_emulator/clock", admin, {"advance": "PT1H"})
    assert moved.status_code == 200, moved.text
    assert _call(server, "GET", "/_emulator/clock", admin).json()["now"] > before
    assert _call(server, "GET", "/metrics", admin).status_code == 200
    # the root's Owner is Owner in every subscription of its tenant too
    assert _call(server, "GET", f"/subscriptions/{SUB_A}/resourceGroups", admin).status_code == 200


def test_assignments_at_the_root_need_a_role_at_the_root(clock_server: ServerProcess) -> None:
    """Over the API, "/" is written only by who holds roleAssignments/write there (Azure: elevated access)."""
    server = clock_server
    admin, owner = _token(server, ADMIN, ADMIN_SECRET, TENANT_A), _owner(server)
    name = str(uuid.uuid4())
    reader_at_root = {
        "properties": {
            "roleDefinitionId": f"/providers/Microsoft.Authorization/roleDefinitions/{READER_ID}",
            "principalId": _oid(owner),
        }
    }
    path = f"/providers/Microsoft.Authorization/roleAssignments/{name}"
    _refused_at_root(
        _call(server, "PUT", path, owner, reader_at_root),
        OWNER_A,
        _oid(owner),
        "Microsoft.Authorization/roleAssignments/write",
    )
    _error(_call(server, "GET", path, admin), 404, "RoleAssignmentNotFound")  # the refusal stored nothing
    made = _call(server, "PUT", path, admin, reader_at_root)
    assert made.status_code == 201, made.text
    assert made.json()["id"] == path and made.json()["properties"]["scope"] == "/"
    assert made.json()["properties"]["roleDefinitionId"] == reader_at_root["properties"]["roleDefinitionId"]
    listed = _call(server, "GET", _assignments(""), admin, **{"$filter": "atScope()"})
    assert {item["name"] for item in listed.json()["value"]} >= {name}
    assert _call(server, "GET", "/metrics", owner).status_code == 200  # Reader at "/" reads the emulator's figures
    _refused_at_root(  # but does not move its clock
        _call(server, "POST", "/_emulator/clock", owner, {"advance": "PT1M"}),
        OWNER_A,
        _oid(owner),
        "Microsoft.Scheduler/emulator/clock/write",
    )
    assert _call(server, "DELETE", path, admin).status_code == 200
    _refused_at_root(
        _call(server, "GET", "/metrics", owner), OWNER_A, _oid(owner), "Microsoft.Scheduler/emulator/metrics/read"
    )


def test_a_reset_drops_the_assignments_on_what_it_deleted_and_keeps_the_subscriptions(
    clock_server: ServerProcess,
) -> None:
    """POST /_emulator/reset deletes every group and collection: their assignments go with them (a group made again
    under the same name starts with none), while one at the subscription stays."""
    server = clock_server
    admin = _token(server, ADMIN, ADMIN_SECRET, TENANT_A)
    group = f"/subscriptions/{SUB_A}/resourceGroups/reset-{uuid.uuid4().hex[:8]}"
    subscription = f"/subscriptions/{SUB_A}"
    assert _call(server, "PUT", group, admin, {"location": "westus"}, **GROUPS_API).status_code == 201
    on_group, on_subscription = str(uuid.uuid4()), str(uuid.uuid4())
    assert _call(server, "PUT", f"{_assignments(group)}/{on_group}", admin, _grant(group)).status_code == 201
    made = _call(server, "PUT", f"{_assignments(subscription)}/{on_subscription}", admin, _grant(subscription))
    assert made.status_code == 201, made.text

    def team_scopes() -> set[str]:
        listed = _call(server, "GET", _assignments(subscription), admin, **{"$filter": f"principalId eq '{TEAM_OID}'"})
        assert listed.status_code == 200, listed.text
        return {item["properties"]["scope"] for item in listed.json()["value"]}

    assert {group, subscription} <= team_scopes()
    assert _call(server, "POST", "/_emulator/reset", admin).status_code in (200, 204)
    scopes = team_scopes()
    assert group not in scopes and subscription in scopes
    _error(_call(server, "GET", f"{_assignments(group)}/{on_group}", admin), 404, "RoleAssignmentNotFound")
    assert _call(server, "DELETE", f"{_assignments(subscription)}/{on_subscription}", admin).status_code == 200
