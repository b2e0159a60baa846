"""The classic surface authenticated by management certificates (docs/classic-api.md#management-certificates), over
HTTPS with an auth flag, on both stores: the official classic clients presenting a TLS client certificate reach
their own subscription and are refused another's (403 ForbiddenError); a client with no certificate or an unknown one
is refused; certificates added with Service Management's Add Management Certificate open their subscription, survive
a restart and stop working once deleted; bearer clients are served as before while the server asks for a
certificate."""

from __future__ import annotations

import base64
import json
import os
import shutil
import ssl
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives.serialization import Encoding
from support.certificates import key_pem, pem, self_signed
from support.environment import REPO, missing
from support.sdk_envs import sdk_pythons
from support.server import EmulatorPool, ServerProcess

from scheduler_emulator.tls import thumbprint

CLIENTS = Path(__file__).parent / "clients"
LEGACY = "legacy-0.20.8"
TOKEN = "classic-token"
VERSION = {"x-ms-version": "2014-10-01"}
FORBIDDEN = (
    "The server failed to authenticate the request. Verify that the certificate is valid and is associated with this "
    "subscription."
)


class Certificate:
    """A throw-away management certificate: its PEM files, DER and thumbprint."""

    def __init__(self, directory: Path, name: str, *, rsa_key: bool = False) -> None:
        key, certificate = self_signed(name, rsa_key=rsa_key)
        self.cert = directory / f"{name}.pem"
        self.key = directory / f"{name}.key"
        self.cert.write_bytes(pem(certificate))
        self.key.write_bytes(key_pem(key))
        self.der = certificate.public_bytes(Encoding.DER)
        self.cer = directory / f"{name}.cer"  # the DER .cer a user downloads from a certificate store
        self.cer.write_bytes(self.der)
        self.thumbprint = thumbprint(self.der)


class World:
    def __init__(self, directory: Path) -> None:
        self.sub_a, self.sub_b = str(uuid.uuid4()), str(uuid.uuid4())
        self.a = Certificate(directory, "cert-a", rsa_key=True)
        self.b = Certificate(directory, "cert-b")
        self.added = Certificate(directory, "cert-added", rsa_key=True)
        self.unknown = Certificate(directory, "cert-unknown")
        self.data_dir = directory / "data"

    def args(self) -> tuple[str, ...]:
        return (
            "--no-dispatcher",
            "--auth-token",
            TOKEN,
            "--management-certificate",
            f"{self.sub_a}:{self.a.cert}",  # PEM
            "--management-certificate",
            f"{self.sub_b}:{self.b.cer}",  # DER
        )


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    return World(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def pool() -> Iterator[EmulatorPool]:
    with EmulatorPool() as emulators:
        yield emulators


@pytest.fixture(scope="module")
def started(pool: EmulatorPool, world: World, own_database: str) -> ServerProcess:
    return start(pool, world, own_database)


def start(pool: EmulatorPool, world: World, database_url: str) -> ServerProcess:
    return pool.start(world.data_dir, *world.args(), https=True, database_url=database_url, log_level="warning")


@pytest.fixture(scope="module")
def legacy_python() -> Path:
    return sdk_pythons((LEGACY,))[LEGACY]


def run_python(
    python: Path, server: ServerProcess, subscription: str, cert: Certificate | None, calls: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    plan = {
        "host": server.url.removeprefix("https://"),
        "ca": str(server.cert_path),
        "subscription_id": subscription,
        "cert": [str(cert.cert), str(cert.key)] if cert else None,
        "calls": calls,
    }
    done = subprocess.run(
        [str(python), str(CLIENTS / "classic_python.py")],
        input=json.dumps(plan),
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    results: list[dict[str, Any]] = json.loads(done.stdout)
    return results


def refused(result: dict[str, Any]) -> None:
    assert "error" in result, result
    assert result["error"]["status"] == 403, result
    assert "ForbiddenError" in result["error"]["message"] and FORBIDDEN in result["error"]["message"], result


def ok(result: dict[str, Any]) -> Any:
    assert result.get("ok"), result
    return result["result"]


def client(server: ServerProcess, cert: Certificate | None = None) -> httpx.Client:
    """httpx trusting the server, presenting ``cert`` as its client certificate."""
    context = ssl.create_default_context(cafile=str(server.cert_path))
    if cert is not None:
        context.load_cert_chain(str(cert.cert), str(cert.key))
    return httpx.Client(base_url=server.url, verify=context, timeout=30)


def test_a_certificate_opens_its_own_subscription_only(started: ServerProcess, world: World, legacy_python) -> None:
    cloud_service = f"cs-{uuid.uuid4().hex[:8]}"
    create = {"method": "create_cloud_service", "args": [cloud_service, "label", "description", "West US"]}
    mine = run_python(legacy_python, started, world.sub_a, world.a, [create, {"method": "list_cloud_services"}])
    ok(mine[0])
    assert [item["name"] for item in ok(mine[1])["items"]] == [cloud_service]
    # A's certificate on B's subscription, B's on A's, an unknown certificate, none: refused, nothing created.
    theirs = run_python(legacy_python, started, world.sub_b, world.a, [create, {"method": "list_cloud_services"}])
    refused(theirs[0])
    refused(theirs[1])
    refused(run_python(legacy_python, started, world.sub_a, world.b, [{"method": "list_cloud_services"}])[0])
    refused(run_python(legacy_python, started, world.sub_a, world.unknown, [{"method": "list_cloud_services"}])[0])
    refused(run_python(legacy_python, started, world.sub_a, None, [{"method": "list_cloud_services"}])[0])
    empty = run_python(legacy_python, started, world.sub_b, world.b, [{"method": "list_cloud_services"}])
    assert ok(empty[0])["items"] == []  # the refused create on B created nothing


def test_no_certificate_is_refused_in_rdfe_words_and_bearer_clients_are_unaffected(
    started: ServerProcess, world: World
) -> None:
    with client(started) as plain:
        answer = plain.get(f"/{world.sub_a}/cloudservices", headers=VERSION)
        assert answer.status_code == 403, answer.text
        assert answer.headers["content-type"].startswith("application/xml")
        assert "<Code>ForbiddenError</Code>" in answer.text and FORBIDDEN in answer.text
        # a bearer token does not open the classic surface: its clients authenticate by certificate
        with_token = plain.get(f"/{world.sub_a}/cloudservices", headers={**VERSION, "Authorization": f"Bearer {TOKEN}"})
        assert with_token.status_code == 403
        # the ARM surface: the token as before, no certificate needed
        arm = plain.get(
            f"/subscriptions/{world.sub_a}/providers/Microsoft.Scheduler/jobCollections",
            params={"api-version": "2016-03-01"},
            headers={"Authorization": f"Bearer {TOKEN}"},
        )
        assert arm.status_code == 200, arm.text
        assert plain.get(f"/subscriptions/{world.sub_a}/resourcegroups?api-version=2021-04-01").status_code == 401
    with client(started, world.a) as with_certificate:  # a certificate is not a bearer token on ARM
        arm = with_certificate.get(
            f"/subscriptions/{world.sub_a}/providers/Microsoft.Scheduler/jobCollections",
            params={"api-version": "2016-03-01"},
        )
        assert arm.status_code == 401


def test_npm_clients_present_their_certificate(started: ServerProcess, world: World) -> None:
    node = shutil.which("node")
    if node is None or not (REPO / "node_modules" / "azure-asm-scheduler").is_dir():
        missing("The classic npm clients need Node.js and `npm ci` in the repository root (package-lock.json).")
    assert node is not None

    def run(subscription: str) -> dict[str, Any]:
        plan = {
            "baseUri": started.url + "/",
            "subscriptionId": subscription,
            "cert": world.a.cert.read_text(),
            "key": world.a.key.read_text(),
            "calls": [{"client": "cloud", "method": "cloudServices.list"}],
        }
        done = subprocess.run(
            [node, str(CLIENTS / "classic_node.js")],
            input=json.dumps(plan),
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "NODE_EXTRA_CA_CERTS": str(started.cert_path)},
        )
        assert done.returncode == 0, done.stderr[-3000:]
        result: dict[str, Any] = json.loads(done.stdout)[0]
        return result

    assert "cloudServices" in ok(run(world.sub_a))
    other = run(world.sub_b)
    assert (other["error"]["statusCode"], other["error"]["code"]) == (403, "ForbiddenError"), other
    assert other["error"]["message"] == FORBIDDEN


def test_certificates_added_over_the_api_open_their_subscription_and_survive_a_restart(
    started: ServerProcess, world: World, legacy_python, pool: EmulatorPool, own_database: str
) -> None:
    add = {
        "service": "management",
        "method": "add_management_certificate",
        "args": [
            base64.b64encode(b"ignored: derived from the data").decode(),
            world.added.thumbprint,
            base64.b64encode(world.added.der).decode(),
        ],
    }
    listing = {"service": "management", "method": "list_management_certificates"}
    # only a certificate of the subscription manages its certificates
    refused(run_python(legacy_python, started, world.sub_a, world.b, [add])[0])
    results = run_python(
        legacy_python,
        started,
        world.sub_a,
        world.a,
        [
            add,
            add,
            listing,
            {"service": "management", "method": "get_management_certificate", "args": [world.added.thumbprint]},
        ],
    )
    ok(results[0])
    assert results[1]["error"]["status"] == 409, results[1]
    listed = ok(results[2])["items"]
    assert [c["subscription_certificate_thumbprint"] for c in listed] == [world.a.thumbprint, world.added.thumbprint]
    got = ok(results[3])
    assert base64.b64decode(got["subscription_certificate_data"]) == world.added.der
    assert got["created"]
    with client(started, world.added) as added:
        assert added.get(f"/{world.sub_a}/cloudservices", headers=VERSION).status_code == 200
        assert added.get(f"/{world.sub_b}/cloudservices", headers=VERSION).status_code == 403
    # stored: a new process on the same store accepts it
    started.stop()
    again = start(pool, world, own_database)
    try:
        with client(again, world.added) as added:
            assert added.get(f"/{world.sub_a}/cloudservices", headers=VERSION).status_code == 200
        results = run_python(
            legacy_python,
            again,
            world.sub_a,
            world.added,
            [
                {"service": "management", "method": "delete_management_certificate", "args": [world.a.thumbprint]},
                {"service": "management", "method": "delete_management_certificate", "args": [world.added.thumbprint]},
            ],
        )
        assert results[0]["error"]["status"] == 409, results[0]  # named by the flag: removed there
        ok(results[1])
        with client(again, world.added) as added:
            assert added.get(f"/{world.sub_a}/cloudservices", headers=VERSION).status_code == 403
        with client(again, world.a) as flagged:
            assert (
                flagged.get(f"/{world.sub_a}/certificates/{world.added.thumbprint}", headers=VERSION).status_code == 404
            )
    finally:
        again.stop()


def test_a_file_that_is_no_certificate_stops_the_start(emulators: EmulatorPool, tmp_path: Path) -> None:
    (tmp_path / "not-a.cer").write_text("not a certificate")
    args = ["--auth-token", TOKEN, "--management-certificate", f"{uuid.uuid4()}:{tmp_path / 'not-a.cer'}"]
    process = emulators.prepare(tmp_path / "data", *args, https=True, in_memory=True)
    with pytest.raises(RuntimeError, match="holds no certificate"):
        process.start()
    assert process.wait_exit() == 2
