"""The ARM error shape, decided once: ``{"error": {"code", "message", "target"?}}`` with its status code.

Every error the service returns is built by one of the functions below.
"""

from __future__ import annotations

from typing import Any

from fastapi.responses import JSONResponse

from scheduler_emulator.domain.errors import Conflict, FieldError, InvalidName, NotFound, TooLarge

ACCEPTED_API_VERSIONS = ("2016-03-01", "2016-01-01", "2014-08-01-preview")


class ArmError(Exception):
    """An error response. Raise it anywhere below the API layer's handlers."""

    def __init__(
        self, status: int, code: str, message: str, target: str | None = None, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.target = target
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.target:
            error["target"] = self.target
        return {"error": error}

    def response(self, headers: dict[str, str] | None = None) -> JSONResponse:
        return JSONResponse(self.body(), status_code=self.status, headers={**self.headers, **(headers or {})})


def missing_api_version() -> ArmError:
    return ArmError(
        400,
        "MissingApiVersionParameter",
        "The api-version query parameter (?api-version=) is required for all requests.",
    )


def invalid_api_version(version: str, accepted: str | None = None) -> ArmError:
    shown = version[:40].encode("unicode_escape").decode("ascii")
    expected = accepted or f"'{', '.join(ACCEPTED_API_VERSIONS)}'"
    return ArmError(
        400,
        "InvalidApiVersionParameter",
        f"The api-version '{shown}' is invalid. The supported versions are {expected}.",
    )


def invalid_request_content(detail: str) -> ArmError:
    return ArmError(
        400, "InvalidRequestContent", f"The request content was invalid and could not be deserialized: {detail}"
    )


def bad_request(message: str, target: str | None = None) -> ArmError:
    return ArmError(400, "BadRequest", message, target)


def invalid_field(path: str, problem: str) -> ArmError:
    """A schema or rule violation at ARM field path ``path`` (e.g. ``properties.recurrence.interval``)."""
    return ArmError(400, "BadRequest", f"The value of '{path}' is invalid: {problem}", target=path)


def from_field_error(error: FieldError) -> ArmError:
    return invalid_field(error.path, error.problem)


def resource_not_found(kind: str, name: str) -> ArmError:
    return ArmError(404, "ResourceNotFound", f"The {kind} '{name}' could not be found.")


def route_not_found(path: str) -> ArmError:
    return ArmError(404, "NotFound", f"No route matches '{path}'.")


def method_not_allowed(method: str, path: str) -> ArmError:
    return ArmError(405, "MethodNotAllowed", f"The method '{method}' is not allowed on '{path}'.")


def conflict(message: str) -> ArmError:
    return ArmError(409, "Conflict", message)


def from_conflict(error: Conflict) -> ArmError:
    return conflict(str(error))


def from_domain(error: Exception) -> ArmError | None:
    """The ARM error for a domain error raised by the service layer (None: not a domain error)."""
    if isinstance(error, FieldError):
        return from_field_error(error)
    if isinstance(error, Conflict):
        return from_conflict(error)
    if isinstance(error, NotFound):
        return resource_not_found(error.kind, error.name)
    if isinstance(error, InvalidName):
        return ArmError(400, "InvalidResourceName", str(error))
    if isinstance(error, TooLarge):
        return request_too_large(error.what, error.limit, error.actual)
    return None


def request_too_large(what: str, limit: int, actual: int) -> ArmError:
    return ArmError(
        413 if what == "request body" else 400,
        "RequestEntityTooLarge" if what == "request body" else "LimitExceeded",
        f"The {what} is {actual} characters long; at most {limit} are allowed.",
    )


def url_too_long(length: int, limit: int) -> ArmError:
    return ArmError(
        400, "RequestUrlTooLong", f"The request URL is {length} characters long; at most {limit} are allowed."
    )


def authentication_failed(reason: str) -> ArmError:
    """401 for a request without valid credentials (only when the operator turned inbound auth on)."""
    return ArmError(401, "AuthenticationFailed", reason, headers={"WWW-Authenticate": "Bearer"})


def host_not_allowed(host: str) -> ArmError:
    """400 for a request naming a host the loopback-bound service does not answer to (DNS rebinding)."""
    shown = host[:100].encode("unicode_escape").decode("ascii")
    return ArmError(
        400,
        "InvalidHostHeader",
        f"The Host header '{shown}' is not allowed: this service listens on loopback and answers only to "
        "localhost, 127.0.0.1, [::1] and the names given with --allowed-hosts.",
    )


def resource_group_not_found(name: str) -> ArmError:
    return ArmError(404, "ResourceGroupNotFound", f"Resource group '{name}' could not be found.")


def invalid_template(message: str, target: str | None = None) -> ArmError:
    """400 for a deployment refused at preflight (template, parameters, functions, unsupported types)."""
    return ArmError(400, "InvalidTemplate", message, target)


def service_unavailable(reason: str) -> ArmError:
    return ArmError(503, "ServiceUnavailable", reason)


def internal_error() -> ArmError:
    return ArmError(500, "InternalServerError", "The server encountered an internal error; see its log.")
