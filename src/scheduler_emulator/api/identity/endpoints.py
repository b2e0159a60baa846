"""The token service's HTTP endpoints (docs/reference/token-service.md#endpoints): OpenID configuration (v2 and v1
forms), the JWKS and the token endpoints, as an Entra ID client (MSAL, so the Azure CLI and azure-identity) expects them
under ``/{tenant}/…``. Every URL they hand out is on the origin the client reached."""

from __future__ import annotations

import base64
import binascii
from typing import Any
from urllib.parse import parse_qsl, unquote_plus

from fastapi import Request
from fastapi.responses import JSONResponse, Response

from scheduler_emulator.api.context import read_body
from scheduler_emulator.api.identity import entra
from scheduler_emulator.api.identity.tokens import TokenRequest, TokenService


def base_url(request: Request) -> str:
    """``scheme://host[:port]`` as the client reached this server (its Host header, which the Host guard
    has checked while the service listens on loopback)."""
    return str(request.base_url).rstrip("/")


def service(request: Request) -> TokenService:
    identity: TokenService = request.app.state.identity
    return identity


def _openid_configuration(request: Request, tenant: str, *, v2: bool) -> dict[str, Any]:
    base = f"{base_url(request)}/{tenant}"
    version = "/v2.0" if v2 else ""
    return {
        "issuer": f"{base}/v2.0" if v2 else f"{base}/",
        "token_endpoint": f"{base}/oauth2{version}/token",
        "authorization_endpoint": f"{base}/oauth2{version}/authorize",  # not served: no interactive sign-in
        "jwks_uri": f"{base}/discovery{version}/keys",
        "token_endpoint_auth_methods_supported": ["client_secret_post", "private_key_jwt", "client_secret_basic"],
        "grant_types_supported": ["client_credentials"],
        "response_types_supported": ["token"],
        "response_modes_supported": ["query", "fragment", "form_post"],
        "subject_types_supported": ["pairwise"],
        "id_token_signing_alg_values_supported": ["RS256"],
        "scopes_supported": ["openid"],
        "request_uri_parameter_supported": False,
        "tenant_region_scope": None,
        "cloud_instance_name": "scheduler-emulator",
    }


async def openid_configuration_v2(request: Request, tenant: str) -> Response:
    return JSONResponse(_openid_configuration(request, tenant, v2=True))


async def openid_configuration_v1(request: Request, tenant: str) -> Response:
    return JSONResponse(_openid_configuration(request, tenant, v2=False))


async def keys(request: Request, _tenant: str) -> Response:
    """The JWKS: the key every token of this service is signed with (the same for every tenant)."""
    return JSONResponse(service(request).key.jwks())


async def token_v2(request: Request, tenant: str) -> Response:
    return await _token(request, tenant, v2=True)


async def token_v1(request: Request, tenant: str) -> Response:
    return await _token(request, tenant, v2=False)


async def _token(request: Request, tenant: str, *, v2: bool) -> Response:
    raw = await read_body(request)
    media = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if media != "application/x-www-form-urlencoded":
        return entra.EntraError(
            "invalid_request", 900144, "The token request must be sent as application/x-www-form-urlencoded."
        ).response()
    try:
        form = dict(parse_qsl(raw.decode("utf-8"), keep_blank_values=True, strict_parsing=False))
    except UnicodeDecodeError:
        return entra.EntraError("invalid_request", 900144, "The request body is not UTF-8.").response()
    token_request = TokenRequest(form=form, basic=_basic(request), tenant=tenant, v2=v2, base_url=base_url(request))
    try:
        body = service(request).issue(token_request)
    except entra.EntraError as exc:
        return exc.response()
    return JSONResponse(body, headers={"Cache-Control": "no-store", "Pragma": "no-cache"})


def _basic(request: Request) -> tuple[str, str] | None:
    """client_secret_basic (RFC 6749 §2.3.1): id and secret, form-encoded, in an HTTP Basic header."""
    scheme, _, value = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(value.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None
    client_id, separator, secret = decoded.partition(":")
    return (unquote_plus(client_id), unquote_plus(secret)) if separator else None
