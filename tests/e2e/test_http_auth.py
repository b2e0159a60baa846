"""Outbound HTTP authentication against real peers on loopback: ClientCertificate presented to a TLS
server that requires a client certificate, and ActiveDirectoryOAuth tokens from a local token endpoint."""

from __future__ import annotations

import json
import ssl
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from support.api_client import API, create_job, wait_history
from support.certificates import pem, pfx, self_signed, write_pem_files
from support.names import Names
from support.server import EmulatorPool, ServerProcess
from support.target_server import TargetServer


@dataclass
class MutualTlsServer:
    """HTTPS on 127.0.0.1 that accepts only clients presenting ``trusted_client``; records their subjects."""

    directory: Path
    trusted_client: x509.Certificate
    subjects: list[str] = field(default_factory=list)

    def start(self) -> MutualTlsServer:
        key, cert = self_signed("mutual-tls-target", ip_addresses=("127.0.0.1",), ca=True)
        self.server_cert = cert
        cert_path, key_path = write_pem_files(self.directory, "target", key, cert)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert_path, key_path)
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(cadata=pem(self.trusted_client).decode())
        subjects = self.subjects

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                self.rfile.read(int(self.headers.get("content-length") or 0))
                peer = self.connection.getpeercert()  # type: ignore[attr-defined]
                subjects.append(dict(x[0] for x in peer["subject"])["commonName"])
                self.send_response(200)
                self.send_header("content-length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args: object) -> None:
                pass

        class TlsServer(ThreadingHTTPServer):
            daemon_threads = True

            def get_request(self):  # type: ignore[no-untyped-def]
                sock, address = super().get_request()
                sock.settimeout(5)
                try:
                    return context.wrap_socket(sock, server_side=True), address
                except (ssl.SSLError, OSError):
                    sock.close()
                    raise

            def handle_error(self, request, client_address) -> None:  # type: ignore[no-untyped-def]
                pass  # a refused handshake is the point of one test

        self.httpd = TlsServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True).start()
        return self

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.httpd.server_address[1]}/secure"

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(scope="module")
def client_cert() -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    return self_signed("Scheduler Client", ca=True)


@pytest.fixture(scope="module")
def tls_target(tmp_path_factory: pytest.TempPathFactory, client_cert) -> Iterator[MutualTlsServer]:  # type: ignore[no-untyped-def]
    server = MutualTlsServer(tmp_path_factory.mktemp("mtls"), client_cert[1]).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def token_endpoint() -> Iterator[TargetServer]:
    server = TargetServer().start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def emulator(
    own_database: str,
    tls_target: MutualTlsServer,
    token_endpoint: TargetServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[ServerProcess]:
    """The emulator trusting the TLS target's certificate (SSL_CERT_FILE), with a local OAuth authority."""
    data = tmp_path_factory.mktemp("auth-data")
    bundle = data / "trusted.pem"
    bundle.write_bytes(pem(tls_target.server_cert))
    with EmulatorPool() as pool:
        yield pool.start(
            data,
            "--min-retry-interval",
            "1",
            "--oauth-authority",
            token_endpoint.base_url,
            database_url=own_database,
            log_level="warning",
            poll_interval=1,
            env={"SSL_CERT_FILE": str(bundle)},
        )


def _collection(client: httpx.Client, names: Names) -> None:
    response = client.put(names.collection_path, params=API_PARAMS, json={"location": "westus"})
    assert response.status_code == 201, response.text


API_PARAMS = {"api-version": API}


def _job(
    client: httpx.Client,
    names: Names,
    job: str,
    request: dict,
    retry: dict | None = None,
    start: datetime | None = None,
) -> None:
    action: dict = {"type": "Https" if request["uri"].startswith("https") else "Http", "request": request}
    action["retryPolicy"] = retry or {"retryType": "None"}
    properties = {} if start is None else {"startTime": start.isoformat()}
    create_job(client, names, job, action, **properties)


def test_client_certificate_is_presented_to_a_server_that_requires_one(emulator, tls_target, client_cert) -> None:
    names = Names()
    key, cert = client_cert
    with emulator.client() as client:
        _collection(client, names)
        _job(
            client,
            names,
            "mtls",
            {
                "uri": tls_target.url,
                "method": "POST",
                "body": "x",
                "authentication": {
                    "type": "ClientCertificate",
                    "pfx": pfx(key, cert, "pfx-pass"),
                    "password": "pfx-pass",
                },
            },
        )
        entries = wait_history(client, names.job_path("mtls"), 1, 20)
        job = client.get(names.job_path("mtls"), params=API_PARAMS).json()
    assert [e["properties"]["status"] for e in entries] == ["Completed"], entries
    assert "'OK' Response Headers: " in entries[0]["properties"]["message"]
    assert "Scheduler Client" in tls_target.subjects
    assert job["properties"]["state"] == "completed"
    auth = job["properties"]["action"]["request"]["authentication"]
    assert "pfx" not in auth and "password" not in auth


def test_wrong_client_certificate_fails_the_attempt_and_history_says_why(emulator, tls_target) -> None:
    names = Names()
    key, cert = self_signed("Somebody Else", ca=True)
    before = len(tls_target.subjects)
    with emulator.client() as client:
        _collection(client, names)
        _job(
            client,
            names,
            "wrong",
            {
                "uri": tls_target.url,
                "method": "POST",
                "authentication": {"type": "ClientCertificate", "pfx": pfx(key, cert, "pw"), "password": "pw"},
            },
        )
        entries = wait_history(client, names.job_path("wrong"), 1, 20)
        job = client.get(names.job_path("wrong"), params=API_PARAMS).json()
    assert len(entries) == 1
    entry = entries[0]["properties"]
    assert entry["status"] == "Failed"
    message = entry["message"].lower()
    assert "127.0.0.1" in message and ("ssl" in message or "tls" in message or "certificate" in message), message
    assert len(tls_target.subjects) == before  # the server never accepted the request
    assert job["properties"]["state"] == "faulted"
    assert job["properties"]["status"]["failureCount"] == 1


def test_untrusted_server_certificate_is_refused(emulator, client_cert, tmp_path: Path) -> None:
    """Server certificates are verified: a target whose certificate nobody trusts fails the attempt."""
    untrusted = MutualTlsServer(tmp_path, client_cert[1]).start()  # a new, untrusted server certificate
    names = Names()
    key, cert = client_cert
    try:
        with emulator.client() as client:
            _collection(client, names)
            _job(
                client,
                names,
                "untrusted",
                {
                    "uri": untrusted.url,
                    "method": "POST",
                    "authentication": {"type": "ClientCertificate", "pfx": pfx(key, cert, "pw"), "password": "pw"},
                },
            )
            entries = wait_history(client, names.job_path("untrusted"), 1, 20)
    finally:
        untrusted.stop()
    assert entries[0]["properties"]["status"] == "Failed"
    assert "certificate" in entries[0]["properties"]["message"].lower()
    assert untrusted.subjects == []


def test_oauth_token_is_fetched_once_and_sent_as_bearer(emulator, token_endpoint: TargetServer) -> None:
    names = Names()
    tenant = f"tenant-{names.collection}"
    token_endpoint.respond(
        f"/{tenant}/oauth2/token",
        body=json.dumps({"token_type": "Bearer", "expires_in": "3600", "access_token": "token-for-" + tenant}),
    )
    target = TargetServer().start()
    try:
        with emulator.client() as client:
            _collection(client, names)
            _job(
                client,
                names,
                "oauth",
                {
                    "uri": target.url("/api"),
                    "method": "POST",
                    "authentication": {
                        "type": "ActiveDirectoryOAuth",
                        "tenant": tenant,
                        "audience": "https://management.core.windows.net/",
                        "clientId": "client-123",
                        "secret": "s3cret",
                    },
                },
                start=datetime.now(UTC) + timedelta(days=1),
            )
            assert client.post(names.job_path("oauth") + "/run", params=API_PARAMS).status_code == 200
            target.wait_for(1, 15, "/api")
            assert client.post(names.job_path("oauth") + "/run", params=API_PARAMS).status_code == 200
            arrived = target.wait_for(2, 15, "/api")
            job = client.get(names.job_path("oauth"), params=API_PARAMS).json()
    finally:
        target.stop()
    assert [r.header("authorization") for r in arrived] == [f"Bearer token-for-{tenant}"] * 2
    token_requests = token_endpoint.requests(f"/{tenant}/oauth2/token")
    assert len(token_requests) == 1, "the second fire reused the cached token"
    form = {k: v[0] for k, v in parse_qs(token_requests[0].text).items()}
    assert form == {
        "grant_type": "client_credentials",
        "client_id": "client-123",
        "client_secret": "s3cret",
        "resource": "https://management.core.windows.net/",
    }
    assert "secret" not in job["properties"]["action"]["request"]["authentication"]


def test_oauth_token_failure_is_a_failed_attempt(emulator, token_endpoint: TargetServer) -> None:
    names = Names()
    tenant = f"bad-{names.collection}"
    token_endpoint.respond(f"/{tenant}/oauth2/token", status=401, body='{"error": "invalid_client"}')
    target = TargetServer().start()
    try:
        with emulator.client() as client:
            _collection(client, names)
            _job(
                client,
                names,
                "denied",
                {
                    "uri": target.url("/api"),
                    "method": "POST",
                    "authentication": {
                        "type": "ActiveDirectoryOAuth",
                        "tenant": tenant,
                        "audience": "aud",
                        "clientId": "c",
                        "secret": "wrong-secret",
                    },
                },
            )
            entries = wait_history(client, names.job_path("denied"), 1, 20)
    finally:
        target.stop()
    message = entries[0]["properties"]["message"]
    assert entries[0]["properties"]["status"] == "Failed"
    assert "401" in message and "invalid_client" in message and "token" in message
    assert "wrong-secret" not in message
    assert target.requests() == []
