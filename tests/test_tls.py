"""The generated HTTPS certificate vouches only for this server (docs/reference/security.md#the-generated-certificate):
it is a leaf that Python (requests, azure-core), Node (``NODE_EXTRA_CA_CERTS``, as docs/clients.md says) and curl
accept as a trust anchor, and a certificate signed with its key for the same names is refused by each of them; an
unconstrained CA left by an earlier version is replaced at start, with a log line saying why."""

from __future__ import annotations

import ipaddress
import shutil
import ssl
import subprocess
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
import requests
from azure.core import PipelineClient
from azure.core.exceptions import ServiceRequestError
from azure.core.pipeline.transport import RequestsTransport
from azure.core.rest import HttpRequest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from support.certificates import self_signed, write_pem_files
from support.environment import missing
from support.server import EmulatorPool, ServerProcess

HEALTH = "/_emulator/health"


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        missing(f"{name} is needed to check that it trusts the generated certificate, and is not installed")
    assert path is not None
    return path


@pytest.fixture(scope="module")
def emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with EmulatorPool() as pool:
        yield pool.start(tmp_path_factory.mktemp("tls-data"), https=True)


def _certificate(server: ServerProcess) -> x509.Certificate:
    assert server.cert_path is not None
    return x509.load_pem_x509_certificate(server.cert_path.read_bytes())


# --- the certificate and the clients that trust it ------------------------------------------------------


def test_the_generated_certificate_is_a_leaf_that_cannot_sign(emulator: ServerProcess) -> None:
    certificate = _certificate(emulator)
    assert certificate.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is False
    usage = certificate.extensions.get_extension_for_class(x509.KeyUsage).value
    assert usage.key_cert_sign is False and usage.crl_sign is False
    purposes = certificate.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(purposes) == [x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]
    names = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == ["localhost"]
    assert {str(ip) for ip in names.get_values_for_type(x509.IPAddress)} == {"127.0.0.1", "::1"}


def _python_clients(url: str, cert: Path) -> dict[str, int]:
    """The status each Python client gets, trusting only ``cert``."""
    statuses = {"requests": requests.get(url, verify=str(cert), timeout=10).status_code}
    client = PipelineClient(url, transport=RequestsTransport(connection_verify=str(cert)))
    statuses["azure-core"] = client.send_request(HttpRequest("GET", url)).status_code
    statuses["ssl default context"] = httpx.get(url, verify=ssl.create_default_context(cafile=str(cert))).status_code
    return statuses


def _node(url: str, cert: Path) -> subprocess.CompletedProcess[str]:
    script = (
        "require('https').get(process.argv[1], (r) => { console.log(r.statusCode); process.exit(0); })"
        ".on('error', (e) => { console.log(e.code || e.message); process.exit(3); });"
    )
    return subprocess.run(
        [_tool("node"), "-e", script, url],
        env={"NODE_EXTRA_CA_CERTS": str(cert), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )


def _curl(url: str, cert: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [_tool("curl"), "-sS", "-o", "/dev/null", "-w", "%{http_code}", "--cacert", str(cert), url],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_python_node_and_curl_trust_it_as_the_readme_says(emulator: ServerProcess) -> None:
    assert emulator.cert_path is not None
    url = emulator.url + HEALTH
    assert _python_clients(url, emulator.cert_path) == {"requests": 200, "azure-core": 200, "ssl default context": 200}
    localhost = url.replace("127.0.0.1", "localhost")
    assert _python_clients(localhost, emulator.cert_path)["requests"] == 200
    node = _node(url, emulator.cert_path)
    assert node.stdout.strip() == "200", node.stdout + node.stderr
    curl = _curl(url, emulator.cert_path)
    assert curl.returncode == 0 and curl.stdout == "200", curl.stdout + curl.stderr


# --- what a leaked key could do: nothing ------------------------------------------------------------------


class _Ok(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def impostor(emulator: ServerProcess, tmp_path: Path) -> Iterator[str]:
    """An HTTPS server on loopback whose certificate (for 127.0.0.1 and localhost, as the emulator's) was
    signed with the emulator's generated key, its chain carrying the emulator's certificate."""
    assert emulator.cert_path is not None
    issuer = _certificate(emulator)
    issuer_key = serialization.load_pem_private_key((emulator.cert_path.parent / "key.pem").read_bytes(), None)
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.now(UTC)
    names = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    forged = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(x509.oid.NameOID.COMMON_NAME, "impostor")]))
        .issuer_name(issuer.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=1))
        .not_valid_after(now + timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .sign(issuer_key, hashes.SHA256())  # type: ignore[arg-type]
    )
    chain = tmp_path / "chain.pem"
    chain.write_bytes(forged.public_bytes(serialization.Encoding.PEM) + issuer.public_bytes(serialization.Encoding.PEM))
    key_file = tmp_path / "impostor.key"
    key_file.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(chain, key_file)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Ok)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}{HEALTH}"
    finally:
        server.shutdown()
        server.server_close()


def test_a_certificate_signed_with_its_key_is_refused_by_every_client(emulator: ServerProcess, impostor: str) -> None:
    assert emulator.cert_path is not None
    with pytest.raises(requests.exceptions.SSLError):
        requests.get(impostor, verify=str(emulator.cert_path), timeout=10)
    client = PipelineClient(impostor, transport=RequestsTransport(connection_verify=str(emulator.cert_path)))
    with pytest.raises(ServiceRequestError, match="CERTIFICATE_VERIFY_FAILED"):
        client.send_request(HttpRequest("GET", impostor))
    node = _node(impostor, emulator.cert_path)
    assert node.returncode == 3 and node.stdout.strip() != "200", node.stdout + node.stderr
    curl = _curl(impostor, emulator.cert_path)
    assert curl.returncode == 60, curl.stdout + curl.stderr  # curl: peer certificate cannot be authenticated


# --- an earlier version's certificate -------------------------------------------------------------------


def test_an_earlier_unconstrained_ca_is_replaced_at_start(emulators: EmulatorPool, tmp_path: Path) -> None:
    key, old = self_signed("azure-scheduler-emulator", dns_names=("localhost",), ip_addresses=("127.0.0.1",), ca=True)
    tls = tmp_path / "tls"
    tls.mkdir(mode=0o700)
    cert_path, key_path = write_pem_files(tls, "x", key, old)
    cert_path.rename(tls / "cert.pem")
    key_path.rename(tls / "key.pem")
    server = emulators.start(tmp_path, https=True, log_level="info")
    try:
        assert server.cert_path == (tls / "cert.pem").resolve()
        new = _certificate(server)
        assert new != old and new.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is False
        assert "replacing the generated HTTPS certificate" in server.log and "certificate authority" in server.log
        assert requests.get(server.url + HEALTH, verify=str(server.cert_path), timeout=10).status_code == 200
    finally:
        server.stop()
    # The new one is kept: the next start serves it again, saying nothing.
    again = emulators.start(tmp_path, https=True, log_level="info")
    try:
        assert _certificate(again) == new and "replacing" not in again.log
    finally:
        again.stop()
