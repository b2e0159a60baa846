"""The outbound target policy end to end (docs/reference/security.md#outbound-policy): the emulator fires jobs at
targets on loopback addresses, some of them denied with ``--outbound-deny``; redirects are checked hop by hop and a hop
to another origin carries none of the job's headers or credentials.

Loopback only: 127.0.0.1 and ::1 (so ``localhost``) and 127.0.0.2 are denied, the allowed targets listen
on 127.0.0.3. The one test that names a non-loopback destination (the cloud metadata address) runs its
dispatcher inside a network namespace that has nothing but a loopback interface."""

from __future__ import annotations

import base64
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.api_client import API, create_job, history_entries
from support.names import Names
from support.server import EmulatorPool, ServerProcess
from support.target_server import TargetServer
from support.waiting import unique, wait_until

PARAMS = {"api-version": API}
NO_RETRY = {"retryType": "None"}
DENY = "127.0.0.1/32, ::1/128, 127.0.0.2/32"


@pytest.fixture(scope="module")
def emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with EmulatorPool() as pool:
        yield pool.start(
            tmp_path_factory.mktemp("data"),
            *("--action-timeout", "5", "--outbound-deny", DENY),
            in_memory=True,
            poll_interval=1,
        )


@pytest.fixture(scope="module")
def client(emulator: ServerProcess) -> Iterator[httpx.Client]:
    with emulator.client() as http:
        yield http


@pytest.fixture
def targets() -> Iterator[Callable[[str], TargetServer]]:
    """Starts recording targets on loopback addresses; all are stopped after the test."""
    started: list[TargetServer] = []

    def start(host: str) -> TargetServer:
        started.append(TargetServer(host=host).start())
        return started[-1]

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def allowed(targets: Callable[[str], TargetServer]) -> TargetServer:
    return targets("127.0.0.3")


@pytest.fixture
def other_allowed(targets: Callable[[str], TargetServer]) -> TargetServer:
    """Same host as ``allowed``, another port: another origin."""
    return targets("127.0.0.3")


@pytest.fixture
def denied(targets: Callable[[str], TargetServer]) -> TargetServer:
    return targets("127.0.0.2")


@pytest.fixture
def denied_by_name(targets: Callable[[str], TargetServer]) -> TargetServer:
    """Listens on 127.0.0.1, which ``localhost`` resolves to (and which is denied)."""
    return targets("127.0.0.1")


def fire(client: httpx.Client, uri: str, **request: Any) -> dict[str, Any]:
    """Create a one-time job (due now) that sends ``request`` to ``uri``; its only history entry once done."""
    names, job = Names(), unique("job-")
    action = {"type": "Http", "request": {"uri": uri, "method": "GET", **request}, "retryPolicy": NO_RETRY}
    create_job(client, names, job, action)

    def finished() -> dict[str, Any] | None:
        state = client.get(names.job_path(job), params=PARAMS).json()["properties"]["state"]
        if state not in ("completed", "faulted"):
            return None
        entries = history_entries(client, names.job_path(job))
        return entries[0]["properties"] if entries else None

    return wait_until(finished, 30, f"job {job} to finish")


def _blocked(entry: dict[str, Any]) -> None:
    assert entry["status"] == "Failed", entry
    assert "blocked by the outbound policy" in entry["message"], entry


def test_denied_address_is_never_contacted(client: httpx.Client, denied: TargetServer) -> None:
    entry = fire(client, denied.url("/secret"))
    _blocked(entry)
    assert "127.0.0.2" in entry["message"]
    assert denied.requests() == []


def test_name_resolving_to_a_denied_address_is_blocked(client: httpx.Client, denied_by_name: TargetServer) -> None:
    port = denied_by_name.base_url.rsplit(":", 1)[1]
    entry = fire(client, f"http://localhost:{port}/secret")
    _blocked(entry)
    assert "localhost" in entry["message"]
    assert denied_by_name.requests() == []


def test_allowed_target_is_reached(client: httpx.Client, allowed: TargetServer) -> None:
    entry = fire(client, allowed.url("/hello"))
    assert entry["status"] == "Completed", entry
    assert len(allowed.requests("/hello")) == 1


def test_redirect_to_a_denied_address_is_blocked(
    client: httpx.Client, allowed: TargetServer, denied: TargetServer, denied_by_name: TargetServer
) -> None:
    allowed.respond("/to-literal", 302, "moved", headers={"Location": denied.url("/metadata")})
    port = denied_by_name.base_url.rsplit(":", 1)[1]
    allowed.respond("/to-name", 307, "moved", headers={"Location": f"http://localhost:{port}/metadata"})
    for path in ("/to-literal", "/to-name"):
        entry = fire(client, allowed.url(path))
        _blocked(entry)
        assert len(allowed.requests(path)) == 1
    assert denied.requests() == [] and denied_by_name.requests() == []


def test_cross_origin_redirect_drops_the_jobs_headers_and_credentials(
    client: httpx.Client, allowed: TargetServer, other_allowed: TargetServer
) -> None:
    allowed.respond("/same", 307, "moved", headers={"Location": "/landing"})
    allowed.respond("/cross", 307, "moved", headers={"Location": other_allowed.url("/landing")})
    request = {
        "method": "POST",
        "body": "payload",
        "headers": {"X-Job-Secret": "job-header-value", "Cookie": "session=abc"},
        "authentication": {"type": "Basic", "username": "user", "password": "hunter2"},
    }
    basic = "Basic " + base64.b64encode(b"user:hunter2").decode()

    entry = fire(client, allowed.url("/same"), **request)
    assert entry["status"] == "Completed", entry
    [first, landed] = allowed.requests("/same") + allowed.requests("/landing")
    for received in (first, landed):  # same origin: everything goes along
        assert received.header("authorization") == basic
        assert received.header("x-job-secret") == "job-header-value"
        assert received.header("cookie") == "session=abc"

    entry = fire(client, allowed.url("/cross"), **request)
    assert entry["status"] == "Completed", entry
    [first] = allowed.requests("/cross")
    assert first.header("authorization") == basic and first.header("x-job-secret") == "job-header-value"
    [landed] = other_allowed.requests("/landing")
    assert landed.header("authorization") is None
    assert landed.header("x-job-secret") is None
    assert landed.header("cookie") is None
    assert landed.header("x-ms-execution-tag") == first.header("x-ms-execution-tag")  # the service's own stay
    assert landed.method == "POST" and landed.text == "payload"  # 307 keeps method and body


def test_oauth_token_endpoint_is_checked(emulators: EmulatorPool, tmp_path: Path, denied: TargetServer) -> None:
    """An ActiveDirectoryOAuth action whose token endpoint is denied fails without contacting it."""
    args = ["--outbound-deny", "127.0.0.2/32", "--oauth-authority", denied.base_url]
    process = emulators.start(tmp_path, *args, in_memory=True, poll_interval=1)
    try:
        with process.client() as http:
            auth = {"type": "ActiveDirectoryOAuth", "tenant": "t", "audience": "a", "clientId": "c", "secret": "s"}
            entry = fire(http, "http://127.0.0.3:9/never", authentication=auth)
    finally:
        process.stop()
    _blocked(entry)
    assert denied.requests() == []


def test_metadata_address_is_denied_by_default(emulators: EmulatorPool, tmp_path: Path) -> None:
    """With no flags, a job aimed at 169.254.169.254 fails as blocked by the policy. The API runs here,
    the dispatcher in a network namespace with only loopback (both on one SQLite file), so even a broken
    policy could not send a packet off this machine."""
    database = f"sqlite:///{tmp_path / 'scheduler.db'}"
    api = emulators.start(tmp_path, "--no-dispatcher", database_url=database, poll_interval=1)
    dispatcher = emulators.prepare(tmp_path, "--no-api", database_url=database, poll_interval=1)
    # sh brings the namespace's loopback up, then becomes the emulator ("$0" "$@": the command line).
    dispatcher.launcher = ["unshare", "-rn", "sh", "-c", 'ip link set lo up && exec "$0" "$@"']
    dispatcher.start()
    try:
        with api.client() as http:
            entry = fire(
                http, "http://169.254.169.254/metadata/instance?api-version=2021-02-01", headers={"Metadata": "true"}
            )
            _blocked(entry)
            assert "169.254.0.0/16" in entry["message"]
            entry = fire(http, "http://[fd00:ec2::254]/latest/meta-data/")
            _blocked(entry)
    finally:
        dispatcher.stop()
        api.stop()


def test_allow_list_means_only_these(
    emulators: EmulatorPool, tmp_path: Path, targets: Callable[[str], TargetServer]
) -> None:
    """``--outbound-allow`` alone decides (``--outbound-deny none`` clears the default list)."""
    inside, outside = targets("127.0.0.3"), targets("127.0.0.1")
    args = ["--outbound-deny", "none", "--outbound-allow", "127.0.0.3/32"]
    process = emulators.start(tmp_path, *args, in_memory=True, poll_interval=1)
    try:
        with process.client() as http:
            assert fire(http, inside.url("/in"))["status"] == "Completed"
            entry = fire(http, outside.url("/out"))
    finally:
        process.stop()
    _blocked(entry)
    assert "not in the ranges the outbound policy allows" in entry["message"]
    assert outside.requests() == [] and len(inside.requests("/in")) == 1


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--outbound-deny", "10.0.0.0/33"], "--outbound-deny takes CIDR ranges"),
        (["--outbound-allow", "localhost"], "--outbound-allow takes CIDR ranges"),
        (["--auth-jwks", "keys.json"], "--auth-jwks needs --auth-audience"),
        (["--auth-token", "t", "--auth-jwks", "k", "--auth-audience", "a"], "cannot be used together"),
    ],
)
def test_bad_security_flags_stop_start(tmp_path: Path, flags: list[str], message: str) -> None:
    command = [sys.executable, "-m", "scheduler_emulator", "--in-memory", "--data-dir", str(tmp_path), *flags]
    result = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr
