"""Which classic handler a path reaches (docs/reference/classic-api.md#addressing).

Classic paths start with the subscription id (no ``/subscriptions/`` prefix). Literal segments match in
any case, ``~`` after ``resources/scheduler`` is optional, a trailing ``/`` is ignored. ``ClassicRoute``
sits after the ARM routes: it claims only paths of the classic shapes, so every other path still gets
ARM's 404 and 405.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import Request
from fastapi.responses import Response
from starlette.routing import BaseRoute, Match
from starlette.types import Receive, Scope, Send

from scheduler_emulator.api import errors
from scheduler_emulator.api.classic import certificates, cloud_services, collections, jobs, wire
from scheduler_emulator.api.classic.paths import is_classic_path
from scheduler_emulator.api.classic.wire import ClassicError

Handler = Callable[..., Awaitable[Response]]


def resolve(method: str, path: str) -> tuple[Handler, list[str], bool] | None:
    """(handler, its path arguments, whether its errors are XML) for a classic path; None when the path has
    no classic shape. A known shape with an unsupported method raises 405."""
    segments = path.strip("/").split("/")
    if "" in segments or not is_classic_path(path):
        return None
    subscription, rest = segments[0], segments[1:]
    lowered = [segment.lower() for segment in rest]
    table: dict[str, Handler] = {}
    arguments = [subscription]
    xml = True
    if lowered == ["services"]:
        table = {"PUT": cloud_services.register}
    elif lowered == ["resourceproviders", "scheduler", "properties"]:
        table = {"GET": cloud_services.provider_properties}
    elif lowered == ["entitleresource"]:
        table = {"POST": cloud_services.entitle}
    elif len(rest) == 2 and lowered[0] == "operations":
        table, arguments = {"GET": cloud_services.operation}, [subscription, rest[1]]
    elif lowered == ["cloudservices"]:
        table = {"GET": cloud_services.list_all}
    elif lowered == ["certificates"]:
        table = {"GET": certificates.list_all, "POST": certificates.add}
    elif len(rest) == 2 and lowered[0] == "certificates":
        table, arguments = {"GET": certificates.get, "DELETE": certificates.delete}, [subscription, rest[1]]
    elif len(rest) == 2 and lowered[0] == "cloudservices":
        table = {"PUT": cloud_services.create, "GET": cloud_services.get, "DELETE": cloud_services.delete}
        arguments = [subscription, rest[1]]
    elif len(rest) >= 5 and lowered[0] == "cloudservices" and lowered[2:4] == ["resources", "scheduler"]:
        tail = rest[4:]
        if tail and tail[0] == "~":
            tail = tail[1:]
        if not tail or tail[0].lower() != "jobcollections":
            return None
        found = _collection_routes(tail[1:])
        if found is None:
            return None
        table, xml, names = found
        arguments = [subscription, rest[1], *names]
    else:
        return None
    handler = table.get(method)
    if handler is None:
        raise ClassicError(405, "MethodNotAllowed", f"The method '{method}' is not allowed on '{path[:200]}'.")
    return handler, arguments, xml


def _collection_routes(tail: list[str]) -> tuple[dict[str, Handler], bool, list[str]] | None:
    """Routes below ``.../resources/scheduler[/~]/JobCollections``: (methods, whether XML, the names in
    the path: collection, then job)."""
    lowered = [segment.lower() for segment in tail]
    if not tail:
        return {"GET": collections.check_name, "POST": collections.check_name}, True, []
    if len(tail) == 1:
        return {"PUT": collections.put, "GET": collections.get, "DELETE": collections.delete}, True, tail
    if len(tail) == 2 and lowered[1] == "jobs":
        return {"GET": jobs.list_page, "POST": jobs.post, "PATCH": jobs.patch_all}, False, tail[:1]
    if len(tail) == 3 and lowered[1] == "jobs":
        return {"PUT": jobs.put, "GET": jobs.get, "PATCH": jobs.patch, "DELETE": jobs.delete}, False, [tail[0], tail[2]]
    if len(tail) == 4 and lowered[1] == "jobs" and lowered[3] == "history":
        return {"GET": jobs.history}, False, [tail[0], tail[2]]
    return None


class ClassicRoute(BaseRoute):
    """One route for the whole classic surface; errors rendered in the classic shapes."""

    path = "/{subscriptionId}/(classic)"  # the route label in access logs and metrics

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        if scope["type"] != "http":
            return Match.NONE, {}
        if not is_classic_path(scope["path"]):
            return Match.NONE, {}
        return Match.FULL, {"route": self, "path_params": {"subscription_id": scope["path"].strip("/").split("/")[0]}}

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        response = await self.respond(request)
        await response(scope, receive, send)

    @staticmethod
    async def respond(request: Request) -> Response:
        xml = True
        try:
            # Authentication first, as RDFE did: a client without its subscription's certificate learns nothing
            # (api/classic/certificates.py; XML whatever the route).
            subscription = request.url.path.strip("/").split("/")[0]
            await request.app.state.management_certificates.check(request, subscription)
            found = resolve(request.method, request.url.path)
            if found is None:
                raise ClassicError(404, "ResourceNotFound", f"No classic route matches '{request.url.path[:200]}'.")
            handler, arguments, xml = found
            wire.check_versions(request)
            return await handler(request, *arguments)
        except ClassicError as exc:
            return exc.response(xml)
        except errors.ArmError as exc:
            return wire.from_arm(exc).response(xml)

    def url_path_for(self, name: str, /, **path_params: Any) -> Any:
        raise NotImplementedError


__all__ = ["ClassicRoute", "resolve"]
