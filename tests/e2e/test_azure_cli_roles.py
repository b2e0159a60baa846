"""The Azure CLI's role commands (azure-cli 2.91.0, support/azure_cli.py) against a started emulator over HTTPS
with ``--auth issued``, registered as a custom cloud the way docs/azure-cli.md registers it: ``az role definition
list``, ``az role assignment create`` (with ``--assignee-object-id`` and ``--assignee-principal-type``: the
emulator answers no Microsoft Graph), ``list`` and ``delete``; the principal granted Reader on one group may then
read it and change nothing there (docs/reference/authorization.md)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.azure_cli import AzureCli, az_python
from support.server import EmulatorPool, ServerProcess

TENANT = "11111111-1111-1111-1111-111111111111"
SUB = "22222222-2222-2222-2222-222222222222"
OWNER, OWNER_SECRET = "ops", "ops-secret"
TEAM, TEAM_SECRET, TEAM_OID = "team-web", "team-secret", "3a3a3a3a-0000-4000-8000-000000000003"
READER_ID = "acdd72a7-3385-48ef-bd42-f606fba81ae7"
GROUP = f"/subscriptions/{SUB}/resourceGroups/web"


@pytest.fixture(scope="module")
def az() -> Path:
    """The python of the Azure CLI's environment (made on first use)."""
    return az_python()


@pytest.fixture(scope="module")
def started(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    files = tmp_path_factory.mktemp("principals")
    (files / "principals.json").write_text(
        json.dumps(
            {
                "principals": [
                    {"clientId": OWNER, "secret": OWNER_SECRET, "tenant": TENANT, "subscription": SUB},
                    {"clientId": TEAM, "secret": TEAM_SECRET, "tenant": TENANT, "objectId": TEAM_OID},
                ]
            }
        )
    )
    with EmulatorPool() as pool:
        yield pool.start(
            tmp_path_factory.mktemp("data"),
            "--https",
            "--auth",
            "issued",
            "--principals-file",
            str(files / "principals.json"),
            log_level="warning",
        )


def _signed_in(az: Path, server: ServerProcess, profile: Path, client_id: str, secret: str) -> AzureCli:
    cli = AzureCli(az, profile, server.cert_path)
    cli.run("cloud", "register", "-n", "SchedulerEmulator", "--endpoint-resource-manager", server.url)
    cli.run("cloud", "set", "-n", "SchedulerEmulator")
    cli.run("config", "set", "core.instance_discovery=false")
    cli.run("login", "--service-principal", "-u", client_id, "-p", secret, "--tenant", TENANT)
    return cli


def _json(cli: AzureCli, *args: str) -> object:
    return json.loads(cli.run(*args, "-o", "json").stdout or "null")


def test_az_role_commands_grant_list_and_revoke(az: Path, started: ServerProcess, tmp_path: Path) -> None:
    owner = _signed_in(az, started, tmp_path / "owner", OWNER, OWNER_SECRET)

    definitions = _json(owner, "role", "definition", "list", "--name", "Reader")
    assert isinstance(definitions, list) and len(definitions) == 1
    assert definitions[0]["roleName"] == "Reader" and definitions[0]["name"] == READER_ID
    assert definitions[0]["permissions"][0]["actions"] == ["*/read"]

    owner.run("group", "create", "-n", "web", "-l", "westus")
    # before the grant the team's az login lists only its own subscription (the all-zero one)
    team = _signed_in(az, started, tmp_path / "team", TEAM, TEAM_SECRET)
    subscriptions = _json(team, "account", "list")
    assert isinstance(subscriptions, list)
    assert [s["id"] for s in subscriptions] == ["00000000-0000-0000-0000-000000000000"]

    made = _json(
        owner,
        "role",
        "assignment",
        "create",
        "--assignee-object-id",
        TEAM_OID,
        "--assignee-principal-type",
        "ServicePrincipal",
        "--role",
        "Reader",
        "--scope",
        GROUP,
    )
    assert isinstance(made, dict)
    assert made["principalId"] == TEAM_OID and made["scope"] == GROUP
    reader = f"/subscriptions/{SUB}/providers/Microsoft.Authorization/roleDefinitions/{READER_ID}"
    assert made["roleDefinitionId"] == reader

    listed = _json(owner, "role", "assignment", "list", "--scope", GROUP, "--fill-principal-name", "false")
    assert isinstance(listed, list)
    assert [(a["principalId"], a["roleDefinitionName"], a["scope"]) for a in listed] == [(TEAM_OID, "Reader", GROUP)]

    # signed in again, the team finds the subscription it now holds a role in, reads the group, changes nothing
    team = _signed_in(az, started, tmp_path / "team-again", TEAM, TEAM_SECRET)
    assert SUB in [s["id"] for s in _json(team, "account", "list")]  # type: ignore[union-attr]
    shown = _json(team, "group", "show", "-n", "web", "--subscription", SUB)
    assert isinstance(shown, dict) and shown["id"] == GROUP
    collection = f"{GROUP}/providers/Microsoft.Scheduler/jobCollections/jobs?api-version=2016-03-01"
    body = json.dumps({"location": "westus", "properties": {"sku": {"name": "Standard"}}})
    written = team.run("rest", "--method", "put", "--url", collection, "--body", body, check=False)
    assert written.returncode != 0 and "AuthorizationFailed" in written.stderr, written.stderr

    owner.run(
        "role",
        "assignment",
        "delete",
        "--assignee-object-id",
        TEAM_OID,
        "--role",
        "Reader",
        "--scope",
        GROUP,
    )
    assert _json(owner, "role", "assignment", "list", "--scope", GROUP, "--fill-principal-name", "false") == []
    again = team.run("group", "show", "-n", "web", "--subscription", SUB, check=False)
    assert again.returncode != 0 and "AuthorizationFailed" in again.stderr, again.stderr
