"""The Entra ID (Azure AD) error shape of the token service, decided once: OAuth's ``error`` with an
``AADSTS`` code leading ``error_description``, plus ``error_codes``, ``timestamp``, ``trace_id``,
``correlation_id`` — what MSAL, azure-identity and the Azure CLI show their users. ``invalid_client`` is 401,
everything else 400, as Entra ID answers."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from fastapi.responses import JSONResponse


class EntraError(Exception):
    """A token-endpoint refusal. ``code`` is the AADSTS number."""

    def __init__(self, error: str, code: int, message: str) -> None:
        super().__init__(message)
        self.error = error
        self.code = code
        self.message = message

    @property
    def status(self) -> int:
        return 401 if self.error == "invalid_client" else 400

    def response(self) -> JSONResponse:
        trace_id, correlation_id = str(uuid.uuid4()), str(uuid.uuid4())
        timestamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%SZ")
        description = (
            f"AADSTS{self.code}: {self.message} Trace ID: {trace_id} Correlation ID: {correlation_id} "
            f"Timestamp: {timestamp}"
        )
        body = {
            "error": self.error,
            "error_description": description,
            "error_codes": [self.code],
            "timestamp": timestamp,
            "trace_id": trace_id,
            "correlation_id": correlation_id,
        }
        return JSONResponse(body, status_code=self.status, headers={"Cache-Control": "no-store"})


def _shown(value: str) -> str:
    """A client-sent value fit to quote in a message (escaped, cut short)."""
    return value[:100].encode("unicode_escape").decode("ascii")


def missing_parameter(name: str) -> EntraError:
    return EntraError("invalid_request", 900144, f"The request body must contain the following parameter: '{name}'.")


def unsupported_grant_type(grant_type: str) -> EntraError:
    return EntraError(
        "unsupported_grant_type",
        70003,
        f"The app requested an unsupported grant type '{_shown(grant_type)}'. This token service issues tokens "
        "for the client_credentials grant only.",
    )


def unknown_client(client_id: str, tenant: str) -> EntraError:
    return EntraError(
        "invalid_client",
        700016,
        f"Application with identifier '{_shown(client_id)}' was not found in the directory '{_shown(tenant)}'. "
        "The emulator knows the principals given with --principal and --principals-file.",
    )


def invalid_secret(client_id: str) -> EntraError:
    return EntraError(
        "invalid_client",
        7000215,
        f"Invalid client secret provided for app '{_shown(client_id)}'. Ensure the secret being sent in the "
        "request is the client secret value configured for it.",
    )


def credential_missing() -> EntraError:
    return EntraError(
        "invalid_client",
        7000218,
        "The request body must contain the following parameter: 'client_assertion' or 'client_secret'.",
    )


def invalid_assertion(problem: str) -> EntraError:
    return EntraError("invalid_client", 700027, f"Client assertion failed signature validation: {problem}")


def assertion_expired() -> EntraError:
    return EntraError("invalid_client", 700024, "Client assertion is not within its valid time range.")


def assertion_client_mismatch() -> EntraError:
    return EntraError(
        "invalid_client", 700021, "Client assertion application identifier doesn't match 'client_id' parameter."
    )


def invalid_assertion_type(value: str) -> EntraError:
    return EntraError(
        "invalid_request",
        70002,
        f"The client assertion type '{_shown(value)}' is not supported; use "
        "'urn:ietf:params:oauth:client-assertion-type:jwt-bearer'.",
    )


def invalid_scope(scope: str) -> EntraError:
    return EntraError(
        "invalid_scope",
        1002012,
        f"The provided value for scope {_shown(scope)} is not valid. Client credential flows must have a scope "
        "value with /.default suffixed to the resource identifier (application ID URI).",
    )


def unknown_resource(resource: str, tenant: str, audiences: tuple[str, ...]) -> EntraError:
    return EntraError(
        "invalid_resource",
        500011,
        f"The resource principal named {_shown(resource)} was not found in the tenant named {_shown(tenant)}. "
        f"This token service issues tokens for {' and '.join(audiences)} only.",
    )


def invalid_tenant(tenant: str) -> EntraError:
    return EntraError(
        "invalid_request",
        90002,
        f"Tenant '{_shown(tenant)}' not found. The client credentials grant needs a tenant id or domain name in "
        "the token URL, not 'common', 'organizations' or 'consumers'.",
    )
