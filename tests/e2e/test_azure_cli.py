"""The real Azure CLI (``azure-cli`` from PyPI in its own environment, support/azure_cli.py) against a started
emulator over HTTPS with its certificate trusted, following the README's "Using the Azure CLI and
azure-identity" as written: the server started as the README starts it, the README's commands run by bash
(only the addresses, the certificate's path and the az profile folder swapped for this test's), and what they
made checked with azure-mgmt-scheduler through azure-identity — and the job's run seen at a local target.

Every az process gets ``AZURE_CONFIG_DIR`` in a temporary folder and telemetry off, so nothing leaves the
machine and the user's own az profile is never read."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from azure.identity import ClientSecretCredential
from support.azure_cli import AzureCli, az_python
from support.certificates import key_pem, pem, self_signed
from support.environment import REPO
from support.sdk import scheduler_sdk
from support.server import EmulatorPool, ServerProcess
from support.target_server import TargetServer

ALL_ZERO = "00000000-0000-0000-0000-000000000000"
CERT_APP = "5c4b3a29-1807-4f6e-9d5c-4b3a29180706"
README_URL = "https://127.0.0.1:7480"
README_TARGET = "http://127.0.0.1:8080/ping"


def readme_block(marker: str) -> str:
    """The code block after ``<!-- marker -->`` in the README, as written."""
    text = (REPO / "README.md").read_text()
    after = text.split(f"<!-- {marker} -->", 1)[1]
    return after.split("```", 2)[1].split("\n", 1)[1]


@dataclass
class Started:
    server: ServerProcess
    principals: str  # the README's SCHEDULER_PRINCIPALS
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
    """The emulator as the README starts it (its variable and flags), plus a certificate principal."""
    block = readme_block("azure-cli-start")
    principals = re.search(r"^export SCHEDULER_PRINCIPALS=(\S+)$", block, re.MULTILINE)
    command = re.search(r"^scheduler-emulator (.+)$", block, re.MULTILINE)
    assert principals and command, block
    client_id, secret, tenant = principals.group(1).split(":")
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
            *command.group(1).split(),
            "--principals-file",
            str(files / "principals.json"),
            env={"SCHEDULER_PRINCIPALS": principals.group(1)},
            log_level="warning",
        )
        assert server.cert_path is not None
        yield Started(server, principals.group(1), tenant, client_id, secret, files / "app-with-key.pem")


def _environment(az: Path) -> dict[str, str]:
    """The environment az runs in: this machine's, minus any Azure or requests settings, az first on PATH."""
    env = AzureCli(az, Path("unused")).environment()
    del env["AZURE_CONFIG_DIR"]  # the README's snippet sets it
    env["PATH"] = f"{az.parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def test_the_readme_cli_steps_run_as_written(az: Path, started: Started, tmp_path: Path) -> None:
    target = TargetServer().start()
    try:
        # The README's template, saved as scheduler.json in the folder the commands run in.
        (tmp_path / "scheduler.json").write_text(
            readme_block("azure-cli-template").replace(README_TARGET, target.url("/ping"))
        )
        script = (
            readme_block("azure-cli-snippet")
            .replace("$HOME/.azure-scheduler-emulator", str(tmp_path / "az-profile"))
            .replace("$PWD/data/tls/cert.pem", str(started.server.cert_path))
            .replace(README_URL, started.server.url)
        )
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", script],
            capture_output=True,
            text=True,
            env=_environment(az),
            cwd=tmp_path,
            timeout=300,
        )
        assert done.returncode == 0, f"{done.stdout}\n{done.stderr}\n{started.server.log_tail()}"
        # az resource list's table names the collection and its job.
        listed = [line.split() for line in done.stdout.splitlines()]
        assert ["my-jobs", "my-service", "westus", "Microsoft.Scheduler/jobCollections"] in listed, done.stdout
        assert ["my-jobs/ping", "my-service", "Microsoft.Scheduler/jobCollections/jobs"] in listed, done.stdout
        # The job fired (its first occurrence is due at once, and it was run now) at the local target.
        received = target.wait_for(1, timeout=30, path="/ping")
        assert all(request.method == "POST" and request.text == "hello" for request in received)
    finally:
        target.stop()
    cli = AzureCli(az, tmp_path / "az-profile", started.server.cert_path)
    account = json.loads(cli.run("account", "show").stdout)
    assert account["id"] == ALL_ZERO and account["tenantId"] == started.tenant
    assert account["user"] == {"name": started.client_id, "type": "servicePrincipal"}
    group = json.loads(cli.run("group", "show", "-n", "my-service").stdout)
    assert group["location"] == "westus" and group["properties"]["provisioningState"] == "Succeeded"
    provider = json.loads(cli.run("provider", "show", "-n", "Microsoft.Scheduler").stdout)
    assert provider["registrationState"] == "Registered"
    deployment = json.loads(cli.run("deployment", "group", "show", "-g", "my-service", "-n", "scheduler").stdout)
    assert deployment["properties"]["provisioningState"] == "Succeeded"
    # What the commands made, seen through the SDK with azure-identity's credential.
    credential = ClientSecretCredential(
        started.tenant,
        started.client_id,
        started.secret,
        authority=started.server.url,
        disable_instance_discovery=True,
        connection_verify=str(started.server.cert_path),
    )
    with credential, scheduler_sdk(started.server, credential, ALL_ZERO) as sdk:
        job = sdk.jobs.get("my-service", "my-jobs", "ping")
        # Enumerations are answered as the real service wrote them (lower case; README, "Differences from Azure").
        assert job.properties.recurrence.frequency.lower() == "minute" and job.properties.recurrence.interval == 5
        history = list(sdk.jobs.list_job_history("my-service", "my-jobs", "ping"))
        assert history and history[0].properties.status == "Completed"


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


def test_the_readme_python_snippet_runs_as_written(started: Started) -> None:
    code = (
        readme_block("azure-identity-snippet")
        .replace('"data/tls/cert.pem"', repr(str(started.server.cert_path)))
        .replace(f'"{README_URL}"', repr(started.server.url))
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AZURE_", "REQUESTS_"))}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "['my-jobs']"
