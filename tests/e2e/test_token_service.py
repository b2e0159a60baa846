"""The local token service and ``--auth issued`` (docs/reference/token-service.md), against started servers, with
azure-identity's own credentials (ClientSecretCredential, CertificateCredential) driving azure-mgmt-scheduler, and raw
HTTP for what those clients never send (wrong secrets, other grants, crafted tokens).

Two servers share a module: ``issued`` (``--auth issued``, principals from the environment and a file) and
``open`` (no auth, the same principals, and ``issued``'s signing key through ``--token-signing-key-file``)."""

from __future__ import annotations

import gc
import json
import logging
import os
import stat
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
from azure.core.exceptions import ClientAuthenticationError
from azure.identity import CertificateCredential, ClientSecretCredential
from azure.mgmt.scheduler.models import JobCollectionDefinition, JobCollectionProperties, Sku
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from support.api_client import API
from support.certificates import key_pem, pem, self_signed
from support.names import Names
from support.sdk import scheduler_sdk
from support.server import EmulatorPool, ServerProcess

TENANT = "7d2f3c41-5b9e-4e0a-9c1f-2a6b8d4e0f13"
SUBSCRIPTION = "3f0b8a52-6c1d-4e7f-8a9b-0c1d2e3f4a5b"
SECRET_APP, SECRET = "4b7e9c2a-1d3f-4a5b-8c6d-7e8f9a0b1c2d", "s3cret~value.1"
ANYWHERE_APP, ANYWHERE_SECRET = "anywhere-app", "other-secret"  # no tenant, no subscription
CERT_APP = "9e8d7c6b-5a4f-4e3d-2c1b-0a9f8e7d6c5b"
ALL_ZERO = "00000000-0000-0000-0000-000000000000"
ARM = "https://management.azure.com/.default"
AZ = "https://management.core.windows.net//.default"


@dataclass
class Setup:
    issued: ServerProcess
    open: ServerProcess
    key_file: Path
    cert_pem: bytes  # the certificate principal's certificate and key, as CertificateCredential reads them
    stranger_pem: bytes  # a certificate nobody registered, with its key


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    files = tmp_path_factory.mktemp("principals")
    key, certificate = self_signed("cert-app", rsa_key=True)
    (files / "cert-app.pem").write_bytes(pem(certificate))
    stranger_key, stranger = self_signed("cert-app", rsa_key=True)
    (files / "principals.json").write_text(
        json.dumps({"principals": [{"clientId": CERT_APP, "certificate": "cert-app.pem", "tenant": TENANT}]})
    )
    env = {"SCHEDULER_PRINCIPALS": f"{SECRET_APP}:{SECRET}:{TENANT}:{SUBSCRIPTION}, {ANYWHERE_APP}:{ANYWHERE_SECRET}"}
    flags = ("--no-dispatcher", "--principals-file", str(files / "principals.json"))
    issued_dir = tmp_path_factory.mktemp("issued")
    with EmulatorPool() as pool:
        issued = pool.start(issued_dir, *flags, "--auth", "issued", env=env, https=True, in_memory=True)
        key_file = issued_dir / "token-signing-key.pem"
        open_ = pool.start(
            tmp_path_factory.mktemp("open"),
            *flags,
            "--token-signing-key-file",
            str(key_file),
            env=env,
            https=True,
            in_memory=True,
        )
        yield Setup(issued, open_, key_file, key_pem(key) + pem(certificate), key_pem(stranger_key) + pem(stranger))


def _token(server: ServerProcess, *, v2: bool = True, tenant: str = TENANT, **form: str) -> httpx.Response:
    path = f"/{tenant}/oauth2/v2.0/token" if v2 else f"/{tenant}/oauth2/token"
    with server.client() as client:
        return client.post(path, data={"grant_type": "client_credentials", **form})


def _access_token(server: ServerProcess, client_id: str = SECRET_APP, secret: str = SECRET, scope: str = ARM) -> str:
    response = _token(server, client_id=client_id, client_secret=secret, scope=scope)
    assert response.status_code == 200, response.text
    return str(response.json()["access_token"])


def _get(server: ServerProcess, path: str, token: str | None, api_version: str = "2022-12-01") -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    with server.client() as client:
        return client.get(path, params={"api-version": api_version}, headers=headers)


def _assert_entra_error(response: httpx.Response, status: int, error: str, code: int) -> None:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["error"] == error
    assert body["error_codes"] == [code]
    assert body["error_description"].startswith(f"AADSTS{code}: ")


def _assert_arm_refusal(response: httpx.Response, code: str) -> None:
    assert response.status_code == 401, response.text
    assert response.headers["www-authenticate"].startswith("Bearer")
    assert response.json()["error"]["code"] == code


def _collection() -> JobCollectionDefinition:
    return JobCollectionDefinition(location="westus", properties=JobCollectionProperties(sku=Sku(name="Standard")))


# --- discovery ------------------------------------------------------------------------------------------


def test_openid_configuration_points_at_this_server_and_its_keys_verify_its_tokens(setup: Setup) -> None:
    server = setup.issued
    with server.client() as client:  # no token: these are open with --auth issued
        v2 = client.get(f"/{TENANT}/v2.0/.well-known/openid-configuration").json()
        v1 = client.get(f"/{TENANT}/.well-known/openid-configuration").json()
        assert v2["token_endpoint"] == f"{server.url}/{TENANT}/oauth2/v2.0/token"
        assert v2["issuer"] == f"{server.url}/{TENANT}/v2.0"
        assert v1["token_endpoint"] == f"{server.url}/{TENANT}/oauth2/token"
        assert "private_key_jwt" in v2["token_endpoint_auth_methods_supported"]
        jwks = client.get(v2["jwks_uri"].removeprefix(server.url)).json()
        assert client.get(v1["jwks_uri"].removeprefix(server.url)).json() == jwks
    (key,) = jwks["keys"]
    assert key["kty"] == "RSA" and key["alg"] == "RS256" and key["use"] == "sig" and "d" not in key
    token = _access_token(server)
    assert jwt.get_unverified_header(token)["kid"] == key["kid"]
    claims = jwt.decode(token, jwt.PyJWK(key).key, algorithms=["RS256"], audience="https://management.azure.com")
    now = time.time()
    assert claims["iss"] == f"{server.url}/{TENANT}/v2.0"
    assert claims["tid"] == TENANT
    assert claims["appid"] == SECRET_APP
    assert uuid.UUID(claims["oid"])
    assert claims["iat"] <= now + 5 and claims["nbf"] <= now + 5 and 3000 < claims["exp"] - now <= 3600


def test_the_signing_key_is_private_in_the_data_directory(setup: Setup) -> None:
    _access_token(setup.issued)
    assert stat.S_IMODE(setup.key_file.stat().st_mode) == 0o600
    assert b"PRIVATE KEY" in setup.key_file.read_bytes()


# --- the token endpoints ------------------------------------------------------------------------------------


def test_v1_endpoint_with_a_resource_and_basic_client_authentication(setup: Setup) -> None:
    with setup.issued.client() as client:
        response = client.post(
            f"/{TENANT}/oauth2/token",
            data={"grant_type": "client_credentials", "resource": "https://management.core.windows.net/"},
            auth=(SECRET_APP, SECRET),
        )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["token_type"] == "Bearer" and body["resource"] == "https://management.core.windows.net/"
    assert body["expires_in"] == "3600"
    claims = jwt.decode(body["access_token"], options={"verify_signature": False})
    assert claims["aud"] == "https://management.core.windows.net/"
    assert claims["iss"] == f"{setup.issued.url}/{TENANT}/"
    assert _get(setup.issued, "/subscriptions", body["access_token"]).status_code == 200


@pytest.mark.parametrize(
    ("form", "tenant", "status", "error", "code"),
    [
        pytest.param(
            {"client_id": SECRET_APP, "client_secret": "wrong", "scope": ARM},
            TENANT,
            401,
            "invalid_client",
            7000215,
            id="wrong-secret",
        ),
        pytest.param(
            {"client_id": "nobody", "client_secret": SECRET, "scope": ARM},
            TENANT,
            401,
            "invalid_client",
            700016,
            id="unknown-client",
        ),
        pytest.param(
            {"client_id": SECRET_APP, "client_secret": SECRET, "scope": ARM},
            str(uuid.uuid4()),
            401,
            "invalid_client",
            700016,
            id="another-tenant",
        ),
        pytest.param(
            {"client_id": SECRET_APP, "scope": ARM}, TENANT, 401, "invalid_client", 7000218, id="no-credential"
        ),
        pytest.param(
            {"client_id": CERT_APP, "client_secret": "guess", "scope": ARM},
            TENANT,
            401,
            "invalid_client",
            7000215,
            id="secret-for-a-certificate-principal",
        ),
        pytest.param(
            {"client_id": SECRET_APP, "client_secret": SECRET, "scope": "https://vault.azure.net/.default"},
            TENANT,
            400,
            "invalid_resource",
            500011,
            id="another-audience",
        ),
        pytest.param(
            {"client_id": SECRET_APP, "client_secret": SECRET, "scope": "https://management.azure.com/x"},
            TENANT,
            400,
            "invalid_scope",
            1002012,
            id="not-a-default-scope",
        ),
        pytest.param(
            {"client_id": SECRET_APP, "client_secret": SECRET}, TENANT, 400, "invalid_request", 900144, id="no-scope"
        ),
        pytest.param(
            {"client_id": SECRET_APP, "client_secret": SECRET, "scope": ARM},
            "common",
            400,
            "invalid_request",
            90002,
            id="common-tenant",
        ),
    ],
)
def test_refused_token_requests_answer_as_entra_id(
    setup: Setup, form: dict[str, str], tenant: str, status: int, error: str, code: int
) -> None:
    response = _token(setup.issued, tenant=tenant, **form)
    _assert_entra_error(response, status, error, code)
    assert SECRET not in response.text


def test_other_grants_are_unsupported(setup: Setup) -> None:
    with setup.issued.client() as client:
        response = client.post(
            f"/{TENANT}/oauth2/v2.0/token", data={"grant_type": "password", "username": "u", "password": "p"}
        )
        _assert_entra_error(response, 400, "unsupported_grant_type", 70003)
        assert client.get(f"/{TENANT}/oauth2/v2.0/token").status_code == 405


def test_a_principal_without_a_tenant_signs_in_to_any(setup: Setup) -> None:
    tenant = str(uuid.uuid4())
    response = _token(setup.issued, tenant=tenant, client_id=ANYWHERE_APP, client_secret=ANYWHERE_SECRET, scope=AZ)
    assert response.status_code == 200, response.text
    token = response.json()["access_token"]
    assert jwt.decode(token, options={"verify_signature": False})["aud"] == "https://management.core.windows.net/"
    (subscription,) = _get(setup.issued, "/subscriptions", token).json()["value"]
    assert subscription["subscriptionId"] == ALL_ZERO and subscription["tenantId"] == tenant


# --- azure-identity with the SDK -------------------------------------------------------------------------------


def _refusal(make: Callable[[], ClientSecretCredential | CertificateCredential]) -> str:
    """The message a new credential's ``get_token`` fails with. The credential is dropped and collected
    at once, and azure-identity's log of the failure (which pytest would keep, with the exception) is off:
    whatever holds on to the failed response keeps its connection open, and a stopping server waits for it
    (15 s at the module's end)."""
    credential = make()
    identity_log = logging.getLogger("azure.identity")
    level = identity_log.level
    identity_log.setLevel(logging.CRITICAL + 1)
    try:
        credential.get_token(ARM)
    except ClientAuthenticationError as exc:
        message = str(exc.message)
    else:
        raise AssertionError("the credential got a token")
    finally:
        identity_log.setLevel(level)
        credential.close()
    del credential
    gc.collect()
    return message


def test_client_secret_credential_with_the_sdk(setup: Setup) -> None:
    server = setup.issued
    credential = ClientSecretCredential(
        TENANT,
        SECRET_APP,
        SECRET,
        authority=server.url,
        disable_instance_discovery=True,
        connection_verify=str(server.cert_path),
    )
    names = Names()
    with credential, scheduler_sdk(server, credential, SUBSCRIPTION) as sdk:
        assert sdk.job_collections.create_or_update(names.resource_group, names.collection, _collection()).name == (
            names.collection
        )
        listed = sdk.job_collections.list_by_resource_group(names.resource_group)
        assert [c.name for c in listed] == [names.collection]
    refusal = _refusal(
        lambda: ClientSecretCredential(
            TENANT,
            SECRET_APP,
            "not-it",
            authority=server.url,
            disable_instance_discovery=True,
            connection_verify=str(server.cert_path),
        )
    )
    assert "AADSTS7000215" in refusal


def test_certificate_credential_with_the_sdk(setup: Setup) -> None:
    server = setup.issued
    credential = CertificateCredential(
        TENANT,
        CERT_APP,
        certificate_data=setup.cert_pem,
        authority=server.url,
        disable_instance_discovery=True,
        connection_verify=str(server.cert_path),
    )
    names = Names()
    # it names no subscription: it is Owner of the all-zero one it is listed (docs/reference/authorization.md)
    with credential, scheduler_sdk(server, credential, ALL_ZERO) as sdk:
        claims = jwt.decode(credential.get_token(ARM).token, options={"verify_signature": False})
        assert claims["appid"] == CERT_APP and claims["azpacr"] == "2"
        assert sdk.job_collections.create_or_update(names.resource_group, names.collection, _collection()).name == (
            names.collection
        )
    # A certificate nobody registered for the app, even with the same subject, is refused.
    refusal = _refusal(
        lambda: CertificateCredential(
            TENANT,
            CERT_APP,
            certificate_data=setup.stranger_pem,
            authority=server.url,
            disable_instance_discovery=True,
            connection_verify=str(server.cert_path),
        )
    )
    assert "AADSTS700027" in refusal


def test_a_client_assertion_for_another_audience_or_expired_is_refused(setup: Setup) -> None:
    key = serialization.load_pem_private_key(setup.cert_pem, password=None)
    endpoint = f"{setup.issued.url}/{TENANT}/oauth2/v2.0/token"
    now = int(time.time())

    def assertion(**claims: Any) -> str:
        return jwt.encode(
            {"aud": endpoint, "iss": CERT_APP, "sub": CERT_APP, "exp": now + 300, "jti": str(uuid.uuid4()), **claims},
            key,  # type: ignore[arg-type]
            algorithm="RS256",
        )

    def ask(token: str) -> httpx.Response:
        return _token(
            setup.issued,
            client_id=CERT_APP,
            client_assertion_type="urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
            client_assertion=token,
            scope=ARM,
        )

    assert ask(assertion()).status_code == 200
    _assert_entra_error(ask(assertion(aud="https://elsewhere.example/token")), 401, "invalid_client", 700027)
    _assert_entra_error(ask(assertion(exp=now - 600)), 401, "invalid_client", 700024)
    _assert_entra_error(ask(assertion(iss=SECRET_APP, sub=SECRET_APP)), 401, "invalid_client", 700021)


# --- --auth issued -----------------------------------------------------------------------------------------------


def _forge(setup: Setup, key: Any = None, kid: str | None = None, **overrides: Any) -> str:
    """A token as this service would issue it, with ``overrides``, signed by ``key`` (default: the service's
    own key, read from its data directory)."""
    real = _access_token(setup.issued)
    claims = {**jwt.decode(real, options={"verify_signature": False}), **overrides}
    own = serialization.load_pem_private_key(setup.key_file.read_bytes(), password=None)
    headers = {"kid": kid or jwt.get_unverified_header(real)["kid"]}
    return jwt.encode(claims, key or own, algorithm="RS256", headers=headers)


def test_auth_issued_accepts_its_tokens_and_refuses_the_rest(setup: Setup) -> None:
    server = setup.issued
    names = Names()
    path = names.collection_path
    with server.client() as client:
        refused = client.put(path, params={"api-version": API}, json={"location": "westus"})
    _assert_arm_refusal(refused, "AuthenticationFailed")
    stranger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    now = int(time.time())
    cases = {
        "ExpiredAuthenticationToken": _forge(setup, iat=now - 7200, nbf=now - 7200, exp=now - 3600),
        "InvalidAuthenticationTokenAudience": _forge(setup, aud="https://vault.azure.net"),
        "InvalidAuthenticationToken": _forge(setup, key=stranger),  # same kid, another key
    }
    for code, token in cases.items():
        _assert_arm_refusal(_get(server, path, token, API), code)
    _assert_arm_refusal(
        _get(server, path, _forge(setup, key=stranger, kid="another-key"), API), "InvalidAuthenticationToken"
    )
    _assert_arm_refusal(_get(server, path, "not-a-jwt", API), "InvalidAuthenticationToken")
    # Authenticated: the collection is looked up, and is not there (the refused PUT created nothing).
    assert _get(server, path, _access_token(server), API).status_code == 404
    with server.client() as client:
        health = client.get("/_emulator/health").json()
    assert health["auth"] == "issued"


def test_a_token_for_the_azure_cli_audience_works_too(setup: Setup) -> None:
    token = _access_token(setup.issued, scope=AZ)
    assert _get(setup.issued, Names().collection_path, token, API).status_code == 404


# --- what az calls after logging in --------------------------------------------------------------------------------


def test_subscriptions_and_tenants_follow_the_token(setup: Setup) -> None:
    for server in (setup.issued, setup.open):  # ``open`` shares the signing key: it knows the caller too
        token = _access_token(setup.issued)
        listed = _get(server, "/subscriptions", token).json()
        (subscription,) = listed["value"]
        assert subscription["subscriptionId"] == SUBSCRIPTION and subscription["tenantId"] == TENANT
        assert subscription["id"] == f"/subscriptions/{SUBSCRIPTION}" and subscription["state"] == "Enabled"
        (tenant,) = _get(server, "/tenants", token).json()["value"]
        assert tenant["tenantId"] == TENANT and tenant["id"] == f"/tenants/{TENANT}"
        one = _get(server, f"/subscriptions/{SUBSCRIPTION}", token).json()
        assert one["subscriptionId"] == SUBSCRIPTION and one["displayName"] == subscription["displayName"]
    _assert_arm_refusal(_get(setup.issued, "/subscriptions", None), "AuthenticationFailed")


def test_without_a_token_of_ours_the_all_zero_subscription(setup: Setup) -> None:
    (subscription,) = _get(setup.open, "/subscriptions", None).json()["value"]
    assert subscription["subscriptionId"] == ALL_ZERO and subscription["tenantId"] == ALL_ZERO
    assert _get(setup.open, f"/SUBSCRIPTIONS/{SUBSCRIPTION}", "someone-elses-token").json()["tenantId"] == ALL_ZERO


def test_locations(setup: Setup) -> None:
    locations = _get(setup.open, f"/subscriptions/{SUBSCRIPTION}/locations", None).json()["value"]
    west = next(location for location in locations if location["name"] == "westus")
    assert west == {
        "id": f"/subscriptions/{SUBSCRIPTION}/locations/westus",
        "name": "westus",
        "type": "Region",
        "displayName": "West US",
        "regionalDisplayName": "West US",
        "metadata": {"regionType": "Physical", "regionCategory": "Other"},
    }


@pytest.mark.parametrize("path", ["/metadata/endpoints", "//metadata/endpoints"])
def test_metadata_endpoints_is_open_and_names_this_server(setup: Setup, path: str) -> None:
    server = setup.issued
    with server.client() as client:
        document = client.get(server.url + path, params={"api-version": "2022-09-01"}).json()  # as written
    assert document["resourceManager"] == f"{server.url}/"
    assert document["authentication"]["loginEndpoint"] == f"{server.url}/"
    assert document["authentication"]["audiences"] == [
        "https://management.core.windows.net/",
        "https://management.azure.com/",
    ]
    assert document["suffixes"] == {} and document["name"]


@pytest.mark.parametrize(
    ("path", "version", "code"),
    [
        ("/subscriptions", None, "MissingApiVersionParameter"),
        ("/tenants", "yesterday", "InvalidApiVersionParameter"),
        ("/metadata/endpoints", None, "MissingApiVersionParameter"),
        ("/subscriptions/bad%0Aname", "2022-12-01", "InvalidSubscriptionId"),
    ],
)
def test_account_endpoints_check_their_input(setup: Setup, path: str, version: str | None, code: str) -> None:
    with setup.open.client() as client:
        response = client.get(path, params={"api-version": version} if version else {})
    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == code


def test_the_classic_surface_keeps_its_paths(setup: Setup) -> None:
    """A classic path beside the token service's: each reaches its own handler."""
    cloud_service = f"/{SUBSCRIPTION}/cloudservices/cs-{uuid.uuid4().hex[:8]}"
    with setup.open.client() as client:
        assert client.get(cloud_service, headers={"x-ms-version": "2013-03-01"}).status_code == 404
        assert client.get(f"/{SUBSCRIPTION}/oauth2/v2.0/token").status_code == 405  # the token service's shape
        post = client.post(f"/{SUBSCRIPTION}/cloudservices/x/oauth2/token", headers={"x-ms-version": "2013-03-01"})
        assert post.status_code in (404, 405) and "AADSTS" not in post.text


# --- configuration ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (["--auth", "issued"], {}, "--auth issued needs a principal"),
        (["--principal", "only-an-id"], {}, "--principal entry 1 must be CLIENT_ID:SECRET"),
        (["--auth", "issued", "--auth-token", "t"], {"SCHEDULER_PRINCIPALS": "a:b"}, "cannot be combined"),
        ([], {"SCHEDULER_PRINCIPALS": "a:top-secret:bad/tenant"}, "the tenant must be"),
    ],
)
def test_bad_identity_settings_stop_start(
    emulators: EmulatorPool, tmp_path: Path, args: list[str], env: dict[str, str], message: str
) -> None:
    process = emulators.prepare(tmp_path, *args, env=env, in_memory=True)
    with pytest.raises(RuntimeError, match="exited before listening"):
        process.start()
    assert process.wait_exit() == 2
    assert message in process.log
    assert "top-secret" not in process.log


def test_a_principals_file_that_cannot_be_read_stops_start(emulators: EmulatorPool, tmp_path: Path) -> None:
    (tmp_path / "principals.json").write_text(json.dumps({"principals": [{"clientId": "a", "certificate": "no.pem"}]}))
    process = emulators.prepare(tmp_path, "--principals-file", str(tmp_path / "principals.json"), in_memory=True)
    with pytest.raises(RuntimeError, match="exited before listening"):
        process.start()
    assert process.wait_exit() == 2 and "cannot read the certificate" in process.log
    assert not os.path.exists(tmp_path / "token-signing-key.pem")
