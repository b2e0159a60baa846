"""The ARM request pipeline, assembled in one place and in this order:

1. request ids   — ``x-ms-request-id`` (new), ``x-ms-correlation-request-id`` (echoed or new) and
                   ``x-ms-client-request-id`` (echoed) on every response, errors included;
2. host guard    — while listening on loopback, a ``Host`` other than a loopback name or one of
                   ``--allowed-hosts`` → 400 (DNS rebinding; docs/reference/security.md#host-guard,
                   ``api.access.HostGuard``);
3. authentication — with ``--auth-token`` or ``--auth-jwks``, every request but ``GET /_emulator/health``
                   needs a valid bearer token → else 401 (docs/reference/security.md#inbound-authentication,
                   ``api.access.Authenticator``); the caller it names goes on ``request.state.caller``; the
                   classic surface's paths are authenticated by management certificates instead
                   (docs/classic-api.md#management-certificates, ``api.classic.certificates``)
                   (docs/reference/authorization.md, ``api.authorization.Authorizer``);
4. URL length    — at most 2048 characters (docs/reference/arm-api.md#limits);
5. path casing   — literal ARM segments (``resourcegroups``, ``JOBCOLLECTIONS``…) are matched
                   case-insensitively by rewriting them to their canonical spelling before routing;
6. api-version   — required and checked on every ARM path: the Scheduler's three on its paths, any
                   date-shaped one on the Microsoft.Resources front door's
                   (docs/reference/front-door.md#api-version-and-paths);
7. names         — subscription, resource group, collection and job segments follow the name rules
                   (docs/reference/arm-api.md#paths-and-names): 400 ``InvalidResourceName`` on a PUT (it would create
                   them), else 404, so ``.``, ``..``, NUL, newline, ``?``, ``#``, backslash never reach a resource;
8. Content-Type  — a PUT/PATCH/POST carrying a Content-Type other than JSON is refused with 415 on ARM and
                   ``/_emulator/`` paths (a cross-site form POST cannot act); routes listed in
                   ``ANY_CONTENT_TYPE`` (e.g. classic routes) opt out; body-less requests may omit it;
9. body size     — a declared Content-Length over ``--max-body-bytes`` is refused before it is read
                   (a body without one is counted while read, see ``context.json_object``);
10. authorization — with roles (``--auth issued``, ``--auth-jwks``), the request's ARM action at its scope, from the
                   one table of every route (docs/reference/authorization.md#what-each-route-needs,
                   ``api.permissions.PermissionCheck``): 401/404 for another tenant's or an undeclared subscription,
                   403 ``AuthorizationFailed`` without the permission; left out of the pipeline without roles;
11. clock        — the scheduling clock catches up (``Clock.refresh``: a virtual clock another process moved),
                   off the event loop, so handlers read it without a database call (``context.now``);
then the FastAPI handlers, whose errors are rendered by ``install_error_handlers``.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from scheduler_emulator.api import errors
from scheduler_emulator.api.access import OPEN_PATHS, Authenticator, HostGuard
from scheduler_emulator.api.classic.paths import is_classic_path
from scheduler_emulator.config_groups import DEFAULT_MAX_BODY_BYTES
from scheduler_emulator.domain.authorization import Caller
from scheduler_emulator.domain.clock import Clock, WallClock

if TYPE_CHECKING:  # api/permissions.py reaches the store through api/context.py, which imports this module
    from scheduler_emulator.api.permissions import PermissionCheck

log = logging.getLogger("scheduler_emulator.api")
access_log = logging.getLogger("scheduler_emulator.access")

MAX_URL_LENGTH = 2048
# Path prefixes whose handlers read other media types (classic routes add theirs here).
ANY_CONTENT_TYPE: tuple[str, ...] = ()
# text/json too: the official 2016-03-01 spec lists it under "consumes" (and no browser form sends it).
_JSON_TYPE = re.compile(r"^(application/json|text/json|[\w.+-]+/[\w.-]+\+json)$", re.IGNORECASE)
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")
# Subscriptions and resource groups exist implicitly; Azure allows parentheses in resource group names.
_SCOPE_NAME = re.compile(r"^[A-Za-z0-9_(][A-Za-z0-9_.()-]{0,99}$")

# Position → accepted canonical spellings, for each shape of ARM path (keyed by segment 2). The Scheduler's
# paths and the Microsoft.Resources front door's (docs/reference/front-door.md) share the shapes: a segment is rewritten
# only when it matches one of its position's spellings.
_SUBSCRIPTION_SCOPE: dict[int, tuple[str, ...]] = {
    0: ("subscriptions",),
    2: ("providers",),
    3: ("Microsoft.Scheduler", "Microsoft.Resources", "Microsoft.Authorization"),
    4: ("jobCollections", "register", "unregister", "roleAssignments", "roleDefinitions"),
}
_RESOURCE_GROUP_SCOPE: dict[int, tuple[str, ...]] = {
    0: ("subscriptions",),
    2: ("resourceGroups",),
    4: ("providers", "resources", "deployments"),
    5: ("Microsoft.Scheduler", "Microsoft.Resources", "Microsoft.Authorization"),
    6: ("jobCollections", "deployments", "operations", "roleAssignments", "roleDefinitions"),
    8: ("jobs", "enable", "disable", "operationStatuses", "cancel", "validate", "exportTemplate", "operations"),
    10: ("run", "history"),
}
_OTHER_SUBSCRIPTION_SCOPE: dict[int, tuple[str, ...]] = {0: ("subscriptions",), 2: ("resources", "operationresults")}
# api-version on the front door's paths: any date-shaped value (docs/reference/front-door.md#api-version-and-paths).
_DATED_VERSION = re.compile(r"^\d{4}-\d{2}-\d{2}(-(preview|beta|alpha|privatepreview))?$", re.IGNORECASE)


def canonical_arm_path(path: str) -> str | None:
    """The path with its literal segments in canonical casing, or None when it is not an ARM path."""
    segments = path.strip("/").split("/")
    if len(segments) < 3 or segments[0].lower() != "subscriptions":
        return None
    shapes: dict[str, dict[int, tuple[str, ...]]] = {
        "providers": _SUBSCRIPTION_SCOPE,
        "resourcegroups": _RESOURCE_GROUP_SCOPE,
        "resources": _OTHER_SUBSCRIPTION_SCOPE,
        "operationresults": _OTHER_SUBSCRIPTION_SCOPE,
    }
    shape = shapes.get(segments[2].lower())
    if shape is None:
        return None
    for position, spellings in shape.items():
        if position < len(segments):
            for spelling in spellings:
                if segments[position].lower() == spelling.lower():
                    segments[position] = spelling
    return "/" + "/".join(segments)


def is_scheduler_path(segments: list[str]) -> bool:
    """A canonical path under Microsoft.Scheduler's resources (its own three api-versions apply); every other
    ARM path belongs to the Microsoft.Resources front door."""
    if segments[2] == "providers":
        return len(segments) > 4 and segments[3] == "Microsoft.Scheduler" and segments[4] == "jobCollections"
    # an extension resource of a collection (…/jobCollections/{c}/providers/Microsoft.Authorization/…) is not
    return (
        len(segments) > 6
        and segments[4] == "providers"
        and segments[5] == "Microsoft.Scheduler"
        and not (len(segments) > 8 and segments[8].lower() == "providers")
    )


def valid_name(name: str) -> bool:
    """A job collection or job name: 1–100 letters, digits, ``-``, ``_``, ``.``; starts with a letter or
    digit, does not end with ``.`` (docs/reference/arm-api.md#paths-and-names)."""
    return bool(_NAME.match(name)) and not name.endswith(".")


def _name_error(segments: list[str], method: str) -> errors.ArmError | None:
    """Step 7 on a canonical ARM path's segments."""
    kinds: list[tuple[int, str, re.Pattern[str]]] = [(1, "subscription", _SCOPE_NAME)]
    if len(segments) > 2 and segments[2] == "resourceGroups":
        kinds.append((3, "resource group", _SCOPE_NAME))
        if is_scheduler_path(segments):
            kinds += [(7, "job collection", _NAME), (9, "job", _NAME)]
        elif len(segments) > 7 and segments[6] == "deployments":
            kinds.append((7, "deployment", _NAME))
    for position, kind, rule in kinds:
        if position >= len(segments):
            break
        name = segments[position]
        if rule.match(name) and not name.endswith("."):
            continue
        if method == "PUT":  # a PUT names what it creates (subscriptions and groups exist implicitly)
            shown = name.encode("unicode_escape").decode("ascii")[:120]
            return errors.ArmError(
                400,
                "InvalidResourceName",
                f"The {kind} name '{shown}' is invalid: use 1-100 letters, digits, '-', '_' and '.', "
                "starting with a letter or digit and not ending with '.'.",
            )
        return errors.ArmError(404, "ResourceNotFound", f"No {kind} can have the name given in the path.")
    return None


def _content_type_error(scope: Scope, headers: dict[str, str], arm: bool) -> errors.ArmError | None:
    """Step 8."""
    if scope.get("method") not in ("PUT", "PATCH", "POST") or "content-type" not in headers:
        return None
    path: str = scope["path"]
    if not (arm or path.startswith("/_emulator/")) or any(path.startswith(p) for p in ANY_CONTENT_TYPE):
        return None
    media = headers["content-type"].split(";", 1)[0].strip()
    if _JSON_TYPE.match(media):
        return None
    shown = media.encode("unicode_escape").decode("ascii")[:80]
    return errors.ArmError(
        415, "UnsupportedMediaType", f"The content type '{shown}' is not supported; send application/json."
    )


class ArmPipeline:
    """Pure ASGI middleware implementing steps 1–11 above (2, 3 and 10 only when given their guards)."""

    def __init__(
        self,
        app: ASGIApp,
        hosts: HostGuard | None = None,
        auth: Authenticator | None = None,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        clock: Clock | None = None,
        permissions: PermissionCheck | None = None,
    ) -> None:
        self.app = app
        self.permissions = permissions
        self.clock = clock or WallClock()
        self.hosts = hosts
        self.auth = auth
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        request_id = str(uuid.uuid4())
        response_headers = [
            (b"x-ms-request-id", request_id.encode()),
            (b"x-ms-correlation-request-id", headers.get("x-ms-correlation-request-id", request_id).encode("latin-1")),
        ]
        if "x-ms-client-request-id" in headers:
            response_headers.append((b"x-ms-client-request-id", headers["x-ms-client-request-id"].encode("latin-1")))
        scope.setdefault("state", {})["request_id"] = request_id

        async def send_with_ids(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = list(message.get("headers", [])) + response_headers
            await send(message)

        began = time.perf_counter()
        status = 500
        error = await self._guard(scope, headers) or self._check(scope, headers)
        if error is None and self.permissions is not None:
            error = await self._authorize(scope)
        if error is not None:
            await error.response()(scope, receive, send_with_ids)
            self._observe(scope, request_id, error.status, time.perf_counter() - began)
            return
        await self._refresh_clock()
        started = False

        async def send_tracking(message: Message) -> None:
            nonlocal started, status
            if message["type"] == "http.response.start":
                started, status = True, message["status"]
            await send_with_ids(message)

        try:
            await self.app(scope, receive, send_tracking)
        except Exception:
            log.exception("unhandled error on %s %s", scope.get("method"), scope.get("path"))
            if started:
                raise
            status = 500
            await errors.internal_error().response()(scope, receive, send_with_ids)
        finally:
            self._observe(scope, request_id, status, time.perf_counter() - began)

    @staticmethod
    def _observe(scope: Scope, request_id: str, status: int, seconds: float) -> None:
        """One access-log line and the request metrics."""
        route = getattr(scope.get("route"), "path", None) or "unmatched"
        method = scope.get("method", "")
        access_log.info(
            "%s %s %d %.1f ms",
            method,
            scope.get("path"),
            status,
            seconds * 1000,
            extra={
                "fields": {
                    "request_id": request_id,
                    "method": method,
                    "path": scope.get("path"),
                    "route": route,
                    "status": status,
                    "duration_ms": round(seconds * 1000, 2),
                }
            },
        )
        app = scope.get("app")
        metrics = getattr(getattr(app, "state", None), "metrics", None)
        if metrics is not None:
            metrics.requests.labels(route, method, str(status)).inc()
            metrics.request_seconds.labels(route).observe(seconds)

    async def _refresh_clock(self) -> None:
        """Step 11. If the store cannot answer, the last known time stands: the handler's own store call reports
        the outage in the surface's shape (and health answers without one)."""
        try:
            await self.clock.refresh()
        except Exception as exc:  # noqa: BLE001 - see above
            log.debug("the clock could not catch up: %s", str(exc).splitlines()[0] if str(exc) else type(exc).__name__)

    async def _authorize(self, scope: Scope) -> errors.ArmError | None:
        """Step 10 (the grants are read from the store: its outage answers in ARM's shape, as a handler's would)."""
        assert self.permissions is not None
        try:
            return await self.permissions.check(scope)
        except errors.ArmError as exc:
            return exc
        except Exception:
            log.exception("authorization failed on %s %s", scope.get("method"), scope.get("path"))
            return errors.internal_error()

    async def _guard(self, scope: Scope, headers: dict[str, str]) -> errors.ArmError | None:
        """Steps 2 and 3: the Host guard, then authentication."""
        if self.hosts is not None and (error := self.hosts.check(headers.get("host"))) is not None:
            return error
        if self.auth is None:
            scope["state"]["caller"] = Caller.UNRESTRICTED
            return None
        if scope.get("method") in ("GET", "HEAD") and scope["path"] in OPEN_PATHS:
            scope["state"]["caller"] = self.auth.open_caller
            return None
        if self.auth.mode != "none" and is_classic_path(scope["path"]):
            # Its clients send no token: a management certificate authenticates them (api/classic/certificates.py).
            scope["state"]["caller"] = self.auth.open_caller
            return None
        checked = await self.auth.check(scope["path"], headers.get("authorization"))
        if isinstance(checked, errors.ArmError):
            return checked
        scope["state"]["caller"] = checked  # request.state.caller (api/authorization.py)
        return None

    def _check(self, scope: Scope, headers: dict[str, str]) -> errors.ArmError | None:
        raw_path: str = scope["path"]
        query: bytes = scope.get("query_string", b"")
        url_length = len(scope.get("raw_path") or raw_path.encode()) + (len(query) + 1 if query else 0)
        if url_length > MAX_URL_LENGTH:
            return errors.url_too_long(url_length, MAX_URL_LENGTH)
        canonical = canonical_arm_path(raw_path)
        if canonical is not None:
            scope["path"] = canonical
            scope["raw_path"] = canonical.encode()
            versions = parse_qs(query.decode("latin-1"), keep_blank_values=True).get("api-version")
            if not versions or not versions[0]:
                return errors.missing_api_version()
            segments = canonical.strip("/").split("/")
            if is_scheduler_path(segments):
                if versions[0] not in errors.ACCEPTED_API_VERSIONS:
                    return errors.invalid_api_version(versions[0])
            elif not _DATED_VERSION.match(versions[0]):
                return errors.invalid_api_version(versions[0], accepted="a date such as 2024-03-01")
            name_error = _name_error(segments, scope.get("method", ""))
            if name_error is not None:
                return name_error
        content_type_error = _content_type_error(scope, headers, canonical is not None)
        if content_type_error is not None:
            return content_type_error
        length = headers.get("content-length")
        if length is not None and length.isascii() and length.isdigit() and int(length) > self.max_body_bytes:
            return errors.request_too_large("request body", self.max_body_bytes, int(length))
        return None


def install_error_handlers(app: FastAPI) -> None:
    """Render every error as ARM JSON: never an HTML page, never FastAPI's ``{"detail": ...}``."""

    @app.exception_handler(errors.ArmError)
    async def _arm(_request: Request, exc: errors.ArmError) -> Response:
        return exc.response()

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> Response:
        if exc.status_code == 404:
            return errors.route_not_found(request.url.path).response()
        if exc.status_code == 405:
            return errors.method_not_allowed(request.method, request.url.path).response()
        return errors.ArmError(exc.status_code, "BadRequest", str(exc.detail)).response()

    @app.exception_handler(RequestValidationError)
    async def _validation(_request: Request, exc: RequestValidationError) -> Response:
        first: dict[str, Any] = exc.errors()[0] if exc.errors() else {}
        loc = [str(p) for p in first.get("loc", ()) if p not in ("query", "path", "body")]
        target = ".".join(loc) or None
        return errors.bad_request(
            f"The value of '{target}' is invalid: {first.get('msg', 'invalid')}", target
        ).response()
