"""Every command-line flag and its environment variable, observed on a started server."""

from __future__ import annotations

import signal
import socket
import ssl
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from cryptography import x509
from support.api_client import API
from support.certificates import self_signed, write_pem_files
from support.databases import PostgresDatabase, require_postgres
from support.names import Names
from support.server import ServerProcess
from support.times import iso_seconds


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def create_collection(server: ServerProcess, names: Names) -> None:
    with server.client() as client:
        response = client.put(names.collection_path, params={"api-version": API}, json={"location": "westus"})
        assert response.status_code == 201, response.text


def collection_status(server: ServerProcess, names: Names) -> int:
    with server.client() as client:
        return client.get(names.collection_path, params={"api-version": API}).status_code


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "scheduler_emulator", *args],
        capture_output=True,
        text=True,
        timeout=30,
        env=env,
    )


def test_host_flag_binds_the_given_interface(emulators, tmp_path: Path) -> None:
    server = emulators.start(tmp_path, "--host", "127.0.0.2")
    assert server.url.startswith("http://127.0.0.2:")
    create_collection(server, Names())


def test_port_flag_and_its_environment_variable_on_the_default_host_loopback(emulators, tmp_path: Path) -> None:
    port = free_port()
    server = emulators.start(tmp_path / "a", port=port)  # no --host: loopback
    assert server.url == f"http://127.0.0.1:{port}"
    env_port = free_port()
    by_env = emulators.start(tmp_path / "b", port=None, env={"SCHEDULER_PORT": str(env_port)})
    assert by_env.url == f"http://127.0.0.1:{env_port}"


def test_data_dir_holds_the_sqlite_file_and_survives_a_restart(emulators, tmp_path: Path) -> None:
    data_dir = tmp_path / "state"
    names = Names()
    first = emulators.start(data_dir)
    create_collection(first, names)
    assert (data_dir / "scheduler.db").is_file()
    first.stop()
    second = emulators.start(data_dir)
    assert collection_status(second, names) == 200


def test_in_memory_keeps_nothing(emulators, tmp_path: Path) -> None:
    names = Names()
    first = emulators.start(tmp_path, in_memory=True)
    create_collection(first, names)
    assert collection_status(first, names) == 200
    assert not (tmp_path / "scheduler.db").exists()
    first.stop()
    second = emulators.start(tmp_path, in_memory=True)
    assert collection_status(second, names) == 404


def test_database_url_stores_in_postgresql(emulators, tmp_path: Path) -> None:
    require_postgres()
    import psycopg

    database = PostgresDatabase().create()
    try:
        names = Names()
        server = emulators.start(tmp_path, database_url=database.url)
        create_collection(server, names)
        with psycopg.connect(database.url) as conn:
            stored = conn.execute("SELECT name FROM job_collections").fetchall()
        assert stored == [(names.collection,)]
        assert not (tmp_path / "scheduler.db").exists()
        server.stop()
    finally:
        database.drop()


def test_https_generates_a_certificate_once_and_reuses_it(emulators, tmp_path: Path) -> None:
    # A long grace: a stop that waited for the idle client below would be killed (by stop()) before it ended.
    first = emulators.start(tmp_path, "--shutdown-grace", "60", https=True)
    assert first.url.startswith("https://127.0.0.1:")
    assert first.cert_path == (tmp_path / "tls" / "cert.pem").resolve()
    generated = first.cert_path.read_bytes()
    create_collection(first, Names())
    with pytest.raises(httpx.ConnectError):  # an untrusting client refuses the self-signed certificate
        httpx.get(
            first.url + "/subscriptions/s/providers/Microsoft.Scheduler/jobCollections", params={"api-version": API}
        )
    with first.client() as idle:  # a client keeping its TLS connection open does not hold up a stop
        assert idle.get(f"/subscriptions/s/providers/Microsoft.Scheduler/jobCollections?api-version={API}").is_success
        first.stop()
    assert first.wait_exit() == -signal.SIGTERM, first.log_tail()
    assert "graceful shutdown exceeded" not in first.log
    second = emulators.start(tmp_path, https=True)
    assert second.cert_path is not None and second.cert_path.read_bytes() == generated
    create_collection(second, Names())


def _write_certificate(directory: Path) -> tuple[Path, Path, x509.Certificate]:
    key, certificate = self_signed("operator-cert", dns_names=("localhost",))
    return (*write_pem_files(directory, "op", key, certificate), certificate)


def test_cert_and_key_serve_the_operators_certificate(emulators, tmp_path: Path) -> None:
    cert_path, key_path, certificate = _write_certificate(tmp_path)
    server = emulators.start(tmp_path, "--cert", str(cert_path), "--key", str(key_path))
    assert server.url.startswith("https://")
    host, port = server.url.removeprefix("https://").rsplit(":", 1)
    served = ssl.get_server_certificate((host, int(port)))
    assert x509.load_pem_x509_certificate(served.encode()) == certificate
    assert not (tmp_path / "tls").exists()  # no self-signed certificate was generated


def test_log_level_controls_the_access_log(emulators, tmp_path: Path) -> None:
    names = Names()
    quiet = emulators.start(tmp_path / "q", log_level="warning")
    create_collection(quiet, names)
    chatty = emulators.start(tmp_path / "c", log_level="info")
    create_collection(chatty, names)
    quiet.stop()
    chatty.stop()
    assert names.collection not in quiet.log
    assert any(names.collection in line and "201" in line for line in chatty.output)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--in-memory", "--database-url", "sqlite:////tmp/x.db"],
            "--in-memory and --database-url cannot be used together",
        ),
        (["--cert", "/tmp/c.pem"], "--cert and --key must be given together"),
        (["--key", "/tmp/k.pem"], "--cert and --key must be given together"),
        (["--port", "70000"], "--port"),
        (["--log-level", "loud"], "--log-level"),
        (["--claim-ahead", "-1"], "--claim-ahead"),
        (["--duration-format", "rfc"], "--duration-format"),
        (["--clock", "fast"], "--clock"),
        (["--clock-start", "2030-01-01T00:00:00Z"], "--clock-start only applies with --clock virtual"),
        (["--clock", "virtual", "--clock-start", "2030-01-01T00:00:00"], "--clock-start needs a time zone"),
        (["--clock", "virtual", "--clock-start", "next tuesday"], "--clock-start"),
    ],
)
def test_conflicting_or_invalid_flags_fail_at_start(args: list[str], message: str) -> None:
    result = run_cli(*args)
    assert result.returncode == 2
    assert message in result.stderr
    assert "Listening" not in result.stdout


def _retry_intervals(server: ServerProcess, names: Names, agent: str) -> tuple[str, str]:
    """(GET, list) retryInterval of the job ``names`` holds, as a client with User-Agent ``agent`` reads it."""
    with server.client(headers={"user-agent": agent}) as client:
        one = client.get(names.job_path("job"), params={"api-version": API}).json()
        listed = client.get(names.collection_path + "/jobs", params={"api-version": API}).json()["value"]
    return one["properties"]["action"]["retryPolicy"]["retryInterval"], listed[0]["properties"]["action"][
        "retryPolicy"
    ]["retryInterval"]


@pytest.mark.parametrize(
    ("how", "agent", "sent", "read"),
    [
        # timespan: every client is taken for azure-mgmt-scheduler 1.1.3/2.0.0, days read and written x30.
        ("--duration-format=timespan", "curl/8", "30.01:30:00", ("30.01:30:00", "P1DT1H30M")),
        # iso: every client is taken for an ISO-8601 one, whatever it says it is.
        ("SCHEDULER_DURATION_FORMAT=iso", "curl/8", "1.01:30:00", ("P1DT1H30M", "P1DT1H30M")),
        # echo: as sent, even to 7.0.0.
        ("--duration-format=echo", "azsdk-python-mgmt-scheduler/7.0.0", "1.01:30:00", ("1.01:30:00", "1.01:30:00")),
        # auto, the default (by User-Agent): tests/api/test_client_dialects.py.
    ],
)
def test_duration_format_flag_and_its_environment_variable(emulators, tmp_path: Path, how, agent, sent, read) -> None:
    args, env = [], {}
    if how.startswith("--"):
        args.append(how)
    else:
        env = dict([how.split("=", 1)])
    server = emulators.start(tmp_path, *args, env=env)
    names = Names()
    create_collection(server, names)
    action = {
        "type": "Http",
        "request": {"uri": "http://127.0.0.1:9/x", "method": "GET"},
        "retryPolicy": {"retryType": "Fixed", "retryInterval": sent, "retryCount": 1},
    }
    start = iso_seconds(datetime.now(UTC) + timedelta(days=7))
    with server.client(headers={"user-agent": agent}) as client:
        body = {"properties": {"startTime": start, "action": action}}
        response = client.put(names.job_path("job"), params={"api-version": API}, json=body)
        assert response.status_code == 201, response.text
    assert _retry_intervals(server, names, agent) == read


def test_missing_certificate_file_fails_at_start(tmp_path: Path) -> None:
    result = run_cli("--cert", str(tmp_path / "nope.pem"), "--key", str(tmp_path / "nope.key"), "--port", "0")
    assert result.returncode == 2
    assert "nope.pem does not exist" in result.stderr
