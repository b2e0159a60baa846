"""The real Azure CLI (``azure-cli`` from PyPI in its own environment, support/azure_cli.py) against a started
emulator over HTTPS with its certificate trusted, started as docs/azure-cli.md starts it: signing in with a
certificate, ``az rest``, a wrong secret. The page's own steps (a custom cloud, a secret login, a deployment, the
job's run and history) and its azure-identity example run as written in tests/e2e/test_docs_examples.py.

Every az process gets ``AZURE_CONFIG_DIR`` in a temporary folder and telemetry off, so nothing leaves the
machine and the user's own az profile is never read."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from support.azure_cli import AzureCli, az_python
from support.certificates import key_pem, pem, self_signed
from support.server import EmulatorPool, ServerProcess

ALL_ZERO = "00000000-0000-0000-0000-000000000000"
CERT_APP = "5c4b3a29-1807-4f6e-9d5c-4b3a29180706"
# docs/azure-cli.md's principal and flags
PRINCIPALS = "my-app:my-secret:11111111-1111-1111-1111-111111111111"
FLAGS = ("--https", "--auth", "issued")


@dataclass
class Started:
    server: ServerProcess
    principals: str  # SCHEDULER_PRINCIPALS
    tenant: str
    client_id: str
    secret: str
    cert_with_key: Path  # the certificate principal's PEM (certificate and key), as az --certificate reads it


@pytest.fixture(scope="module")
def az() -> Path:
    """The python of the Azure CLI's environment (made on first use: 75 to 170 s on a 2-core machine)."""
    return az_python()


@pytest.fixture(scope="module")
def started(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Started]:
    """The emulator as docs/azure-cli.md starts it (its variable and flags), plus a certificate principal."""
    client_id, secret, tenant = PRINCIPALS.split(":")
    files = tmp_path_factory.mktemp("principals")
    key, certificate = self_signed("az-cert-app", rsa_key=True)
    (files / "app.pem").write_bytes(pem(certificate))
    (files / "app-with-key.pem").write_bytes(key_pem(key) + pem(certificate))
    (files / "principals.json").write_text(
        json.dumps({"principals": [{"clientId": CERT_APP, "certificate": "app.pem", "tenant": tenant}]})
    )
    with EmulatorPool() as pool:
        server = pool.start(
            tmp_path_factory.mktemp("data"),
            *FLAGS,
            "--principals-file",
            str(files / "principals.json"),
            env={"SCHEDULER_PRINCIPALS": PRINCIPALS},
            log_level="warning",
        )
        assert server.cert_path is not None
        yield Started(server, PRINCIPALS, tenant, client_id, secret, files / "app-with-key.pem")


def _registered(az: Path, started: Started, profile: Path) -> AzureCli:
    cli = AzureCli(az, profile, started.server.cert_path)
    cli.run("cloud", "register", "-n", "SchedulerEmulator", "--endpoint-resource-manager", started.server.url)
    cli.run("cloud", "set", "-n", "SchedulerEmulator")
    cli.run("config", "set", "core.instance_discovery=false")
    return cli


def test_login_with_a_certificate_then_az_rest(az: Path, started: Started, tmp_path: Path) -> None:
    cli = _registered(az, started, tmp_path / "profile")
    cli.run(
        "login",
        "--service-principal",
        "-u",
        CERT_APP,
        "--certificate",
        str(started.cert_with_key),
        "--tenant",
        started.tenant,
    )
    account = json.loads(cli.run("account", "show").stdout)
    assert account["user"] == {"name": CERT_APP, "type": "servicePrincipal"}
    west = cli.run("account", "list-locations", "--query", "[?name=='westus'].displayName", "-o", "tsv")
    assert west.stdout.strip() == "West US"
    listed = json.loads(
        cli.run(
            "rest",
            "--method",
            "get",
            "--url",
            f"/subscriptions/{ALL_ZERO}/providers/Microsoft.Scheduler/jobCollections?api-version=2016-03-01",
        ).stdout
    )
    assert isinstance(listed["value"], list)


def test_a_wrong_secret_is_refused_as_entra_id_refuses_it(az: Path, started: Started, tmp_path: Path) -> None:
    cli = _registered(az, started, tmp_path / "profile")
    done = cli.run(
        "login",
        "--service-principal",
        "-u",
        started.client_id,
        "-p",
        "not-the-secret",
        "--tenant",
        started.tenant,
        check=False,
    )
    assert done.returncode != 0
    assert "AADSTS7000215" in done.stderr
    assert "not-the-secret" not in started.server.log
