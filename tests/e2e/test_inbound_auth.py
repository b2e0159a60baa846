"""Inbound authentication and the Host guard (docs/reference/security.md#inbound-authentication), against a started
server.

Tokens are signed by keys each test run generates; the JWKS is served by a local HTTP server and also read
from a file. Only a good token passes; ``alg: none`` and an HS256 token whose HMAC secret is the public key
are refused."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
from azure.core.credentials import AccessToken
from azure.core.exceptions import ClientAuthenticationError, HttpResponseError
from azure.mgmt.scheduler.models import JobCollectionDefinition, JobCollectionProperties, Sku
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from support.api_client import API
from support.names import Names
from support.sdk import scheduler_sdk
from support.server import EmulatorPool, ServerProcess

AUDIENCE = "https://management.core.windows.net/"
ISSUER = "https://sts.windows.net/00000000-0000-0000-0000-000000000000/"
# The subscription the JWT servers declare in the issuer's tenant, and the Entra object id given Owner of it
# (docs/reference/authorization.md: with --auth-jwks, subscriptions are declared and roles name object ids).
JWT_TENANT = "00000000-0000-0000-0000-000000000000"
JWT_SUBSCRIPTION = "5c2a7e10-3b4d-4f6e-8a9b-1c2d3e4f5a6b"
JWT_OWNER = "6d3b8f21-4c5e-4a7f-9b0c-2d3e4f5a6b7c"
PARAMS = {"api-version": API}


# --- keys, tokens and a JWKS --------------------------------------------------------------------


class Keys:
    """An RSA and an EC signing key with their JWKS, plus a stranger key with the RSA key's id."""

    def __init__(self) -> None:
        self.rsa = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.ec = ec.generate_private_key(ec.SECP256R1())
        self.stranger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.jwks = {
            "keys": [
                self._jwk(self.rsa.public_key(), "rsa-1", "RS256"),
                self._jwk(self.ec.public_key(), "ec-1", "ES256"),
            ]
        }

    @staticmethod
    def _jwk(public: Any, kid: str, alg: str) -> dict[str, Any]:
        algorithm = jwt.algorithms.RSAAlgorithm if alg == "RS256" else jwt.algorithms.ECAlgorithm
        return {**algorithm.to_jwk(public, as_dict=True), "kid": kid, "alg": alg, "use": "sig"}

    def claims(self, **overrides: Any) -> dict[str, Any]:
        now = int(time.time())
        return {
            "aud": AUDIENCE,
            "iss": ISSUER,
            "iat": now,
            "nbf": now - 5,
            "exp": now + 3600,
            "sub": "tester",
            **overrides,
        }

    def good(self, **claims: Any) -> str:
        return jwt.encode(self.claims(**claims), self.rsa, algorithm="RS256", headers={"kid": "rsa-1"})

    def good_es256(self) -> str:
        return jwt.encode(self.claims(), self.ec, algorithm="ES256", headers={"kid": "ec-1"})

    def bad_signature(self) -> str:
        return jwt.encode(self.claims(), self.stranger, algorithm="RS256", headers={"kid": "rsa-1"})

    def alg_none(self) -> str:
        return _compact({"alg": "none", "typ": "JWT", "kid": "rsa-1"}, self.claims(), lambda _signing_input: b"")

    def hs256_with_public_key(self) -> str:
        """The classic confusion: HMAC-SHA256 keyed with the (public) RSA key's PEM."""
        pem = self.rsa.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        header = {"alg": "HS256", "typ": "JWT", "kid": "rsa-1"}
        return _compact(
            header, self.claims(), lambda signing_input: hmac.new(pem, signing_input, hashlib.sha256).digest()
        )


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _compact(header: dict[str, Any], claims: dict[str, Any], sign: Any) -> str:
    signing_input = f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(claims).encode())}"
    return f"{signing_input}.{_b64(sign(signing_input.encode()))}"


@pytest.fixture(scope="module")
def keys() -> Keys:
    return Keys()


class JwksServer:
    """Serves one JSON document on loopback (a stand-in for an identity provider's JWKS endpoint)."""

    def __init__(self, document: dict[str, Any]) -> None:
        body = json.dumps(document).encode()
        self.requests = 0
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                owner.requests += 1
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/discovery/keys"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(scope="module", params=["url", "file"])
def jwt_server(
    request: pytest.FixtureRequest, keys: Keys, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    """An HTTPS emulator validating JWTs against the test's JWKS, served over HTTP or read from a file."""
    jwks_server = None
    if request.param == "url":
        jwks_server = JwksServer(keys.jwks)
        source = jwks_server.url
    else:
        path = tmp_path_factory.mktemp("jwks") / "jwks.json"
        path.write_text(json.dumps(keys.jwks))
        source = str(path)
    roles = tmp_path_factory.mktemp("roles") / "principals.json"
    owner = {"principalId": JWT_OWNER, "role": "Owner", "scope": f"/subscriptions/{JWT_SUBSCRIPTION}"}
    roles.write_text(json.dumps({"principals": [], "assignments": [owner]}))
    try:
        with EmulatorPool() as pool:
            yield pool.start(
                tmp_path_factory.mktemp("data"),
                *("--no-dispatcher", "--auth-jwks", source, "--auth-audience", AUDIENCE, "--auth-issuer", ISSUER),
                *("--subscription", f"{JWT_SUBSCRIPTION}:{JWT_TENANT}", "--principals-file", str(roles)),
                https=True,
                in_memory=True,
            )
    finally:
        if jwks_server is not None:
            jwks_server.stop()


@pytest.fixture(scope="module")
def token_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """An HTTPS emulator requiring one shared token, given in the environment."""
    with EmulatorPool() as pool:
        yield pool.start(
            tmp_path_factory.mktemp("data"),
            "--no-dispatcher",
            https=True,
            in_memory=True,
            env={"SCHEDULER_AUTH_TOKEN": "s3cret-token"},
        )


def _collection(names: Names) -> str:
    return names.collection_path


def _assert_refused(response: httpx.Response) -> None:
    assert response.status_code == 401, response.text
    assert response.headers["www-authenticate"] == "Bearer"
    assert response.json()["error"]["code"] == "AuthenticationFailed"


# --- the shared token ---------------------------------------------------------------------------


def test_token_no_wrong_and_right(token_server: ServerProcess) -> None:
    names = Names()
    with token_server.client() as client:
        _assert_refused(client.put(names.collection_path, params=PARAMS, json={"location": "westus"}))
        _assert_refused(client.get(names.collection_path, params=PARAMS, headers={"Authorization": "Bearer nope"}))
        _assert_refused(client.get(names.collection_path, params=PARAMS, headers={"Authorization": "s3cret-token"}))
        _assert_refused(client.get("/metrics", headers={"Authorization": "Bearer s3cret-token-"}))
        right = {"Authorization": "Bearer s3cret-token"}
        created = client.put(names.collection_path, params=PARAMS, json={"location": "westus"}, headers=right)
        assert created.status_code == 201, created.text
        assert client.get(names.collection_path, params=PARAMS, headers=right).status_code == 200
        assert client.get("/metrics", headers=right).status_code == 200
        # Nothing was created by the refused PUT before: the collection was new at the right PUT (201).


def test_health_stays_open_and_reports_the_mode(token_server: ServerProcess) -> None:
    with token_server.client() as client:
        health = client.get("/_emulator/health")
        assert health.status_code == 200
        assert health.json()["auth"] == "token"


def test_default_mode_accepts_anything_and_says_so(emulators: EmulatorPool, tmp_path: Path) -> None:
    process = emulators.start(tmp_path, "--no-dispatcher", in_memory=True)
    try:
        with process.client() as client:
            assert client.get("/_emulator/health").json()["auth"] == "none"
            names = Names()
            response = client.put(names.collection_path, params=PARAMS, json={"location": "westus"})
            assert response.status_code == 201
        assert "WARNING" not in process.log  # loopback: no warning
    finally:
        process.stop()


def test_binding_a_non_loopback_address_without_auth_warns(emulators: EmulatorPool, tmp_path: Path) -> None:
    """Run in a network namespace with only a loopback interface, so 0.0.0.0 reaches nothing outside."""
    process = emulators.prepare(tmp_path, "--host", "0.0.0.0", "--no-dispatcher", in_memory=True)
    process.launcher = ["unshare", "-rn"]
    process.start()  # RuntimeError with the output unless it prints "Listening on"
    process.stop()
    output = process.log
    assert "Listening on" in output, output
    assert "WARNING: listening on 0.0.0.0" in output and "--auth-token" in output


def test_sdk_works_with_a_credential_returning_the_token(token_server: ServerProcess) -> None:
    class TokenCredential:
        def __init__(self, token: str) -> None:
            self.token = token

        def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:
            return AccessToken(self.token, int(time.time()) + 3600)

    names = Names()
    definition = JobCollectionDefinition(
        location="westus", properties=JobCollectionProperties(sku=Sku(name="Standard"))
    )
    for token, works in (("wrong", False), ("s3cret-token", True)):
        with scheduler_sdk(token_server, TokenCredential(token), names.subscription) as sdk:
            if works:
                created = sdk.job_collections.create_or_update(names.resource_group, names.collection, definition)
                assert created.name == names.collection
                assert [c.name for c in sdk.job_collections.list_by_resource_group(names.resource_group)] == [
                    names.collection
                ]
            else:
                with pytest.raises(ClientAuthenticationError):
                    sdk.job_collections.create_or_update(names.resource_group, names.collection, definition)


# --- JWTs ----------------------------------------------------------------------------------------


def _status(server: ServerProcess, token: str) -> int:
    with server.client() as client:
        response = client.get(Names().collection_path, params=PARAMS, headers={"Authorization": f"Bearer {token}"})
    if response.status_code == 401:
        _assert_refused(response)
    return response.status_code


def test_jwt_good_tokens_pass(jwt_server: ServerProcess, keys: Keys) -> None:
    assert _status(jwt_server, keys.good()) == 404  # authenticated: 404 SubscriptionNotFound, not 401
    assert _status(jwt_server, keys.good_es256()) == 404
    # A small clock skew is tolerated.
    assert _status(jwt_server, keys.good(nbf=int(time.time()) + 20)) == 404


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda k: k.good(aud="https://someone-else.example/"), id="wrong-audience"),
        pytest.param(lambda k: k.good(iss="https://evil.example/"), id="wrong-issuer"),
        pytest.param(lambda k: k.good(exp=int(time.time()) - 600), id="expired"),
        pytest.param(lambda k: k.good(nbf=int(time.time()) + 600), id="not-yet-valid"),
        pytest.param(lambda k: k.bad_signature(), id="bad-signature"),
        pytest.param(lambda k: k.alg_none(), id="alg-none"),
        pytest.param(lambda k: k.hs256_with_public_key(), id="hs256-with-public-key"),
        pytest.param(lambda k: k.good()[:-8] + "AAAAAAAA", id="tampered"),
        pytest.param(lambda _k: "not.a.jwt", id="garbage"),
    ],
)
def test_jwt_bad_tokens_are_refused(jwt_server: ServerProcess, keys: Keys, make: Any) -> None:
    assert _status(jwt_server, make(keys)) == 401


def test_jwt_health_open(jwt_server: ServerProcess) -> None:
    with jwt_server.client() as client:
        assert client.get("/_emulator/health").json()["auth"] == "jwt"
        _assert_refused(client.get(Names().collection_path, params=PARAMS))


def test_sdk_with_a_jwt(jwt_server: ServerProcess, keys: Keys) -> None:
    """The token of the object id the file makes Owner of the declared subscription works there; another object
    id of the same tenant is refused with ARM's 403 (it holds no role)."""

    class JwtCredential:
        def __init__(self, oid: str) -> None:
            self.oid = oid

        def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:
            return AccessToken(keys.good(tid=JWT_TENANT, oid=self.oid), int(time.time()) + 3600)

    names = Names()
    definition = JobCollectionDefinition(location="westus", properties=JobCollectionProperties(sku=Sku(name="Free")))
    with scheduler_sdk(jwt_server, JwtCredential(JWT_OWNER), JWT_SUBSCRIPTION) as sdk:
        assert (
            sdk.job_collections.create_or_update(names.resource_group, names.collection, definition).name
            == names.collection
        )
    stranger = "7e4c9a32-5d6f-4b80-8c1d-3e4f5a6b7c8d"
    with (
        scheduler_sdk(jwt_server, JwtCredential(stranger), JWT_SUBSCRIPTION) as sdk,
        pytest.raises(HttpResponseError) as refused,
    ):
        sdk.job_collections.get(names.resource_group, names.collection)
    assert refused.value.status_code == 403
    assert refused.value.error is not None and refused.value.error.code == "AuthorizationFailed"


def test_unreadable_jwks_file_stops_start(emulators: EmulatorPool, tmp_path: Path) -> None:
    (tmp_path / "jwks.json").write_text("not json")
    args = ["--auth-jwks", str(tmp_path / "jwks.json"), "--auth-audience", AUDIENCE]
    process = emulators.prepare(tmp_path, *args, in_memory=True)
    with pytest.raises(RuntimeError, match="cannot read a JWKS"):
        process.start()
    assert process.wait_exit() == 2


# --- the Host guard -------------------------------------------------------------------------------


def test_host_guard_on_loopback(emulators: EmulatorPool, tmp_path: Path) -> None:
    process = emulators.start(
        tmp_path, "--no-dispatcher", "--allowed-hosts", "scheduler.test, Other.Test", in_memory=True
    )
    try:
        port = process.url.rsplit(":", 1)[1]
        with process.client() as client:
            for host in (
                "localhost",
                f"localhost:{port}",
                "127.0.0.1",
                f"127.0.0.1:{port}",
                "[::1]",
                f"[::1]:{port}",
                "scheduler.test",
                f"other.test:{port}",
            ):
                assert client.get("/_emulator/health", headers={"Host": host}).status_code == 200, host
            for host in ("evil.example", f"evil.example:{port}", "localhost.evil.example", "127.0.0.2", "[::2]:80"):
                response = client.get(Names().collection_path, params=PARAMS, headers={"Host": host})
                assert response.status_code == 400, host
                assert response.json()["error"]["code"] == "InvalidHostHeader"
    finally:
        process.stop()
