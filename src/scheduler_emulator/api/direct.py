"""The ARM routes served without FastAPI's per-request work (the API's cost per request, issue 33).

For every request FastAPI walks the app's routes, checking each through its route-context wrapper, solves
the endpoint's dependencies (each path parameter validated as a ``str`` by pydantic) and opens two exit
stacks for dependencies with ``yield``. Profiled under 16 clients on SQLite, that was 15-22 % of the samples
holding the interpreter lock for a ``PUT job`` or ``GET job``; serving them here cut their CPU by 11-12 %
(bench/README.md#the-apis-request-path). The ARM handlers need none of it: each takes the ``Request`` and
its path's segments as strings, and returns a ``Response``.

``DirectRoutes`` sits first in the app's router and serves those routes itself: the route's own compiled
path regex (``APIRoute.path_regex``), looked up by method in the routers' order, and the endpoint called
with the matched segments. The first route in that order that matches both path and method answers, as in
FastAPI; a route that cannot be served directly (a path convertor, a query parameter, a dependency) stays in
the table as a *blocker*: a request it would answer falls through to FastAPI, as does every request no route
of the table answers (a method the path lacks gets FastAPI's 405, a trailing slash its redirect). The
routes stay registered with FastAPI as before, so OpenAPI and ``url_path_for`` are unchanged. Errors an
endpoint raises reach the same handlers (``install_error_handlers``) through Starlette's exception
middleware, which wraps the router.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from fastapi import APIRouter, Request
from fastapi.routing import APIRoute
from starlette.convertors import StringConvertor
from starlette.responses import Response
from starlette.routing import BaseRoute, Match, NoMatchFound
from starlette.types import Receive, Scope, Send

Endpoint = Callable[..., Awaitable[Response]]


def served_directly(route: BaseRoute) -> bool:
    """Whether ``route`` can be served without FastAPI: an ``async`` endpoint taking the ``Request`` first and
    then exactly its path's parameters, each a plain ``str`` (no convertor, no default); no dependencies and
    no response model."""
    if not isinstance(route, APIRoute) or not inspect.iscoroutinefunction(route.endpoint):
        return False
    if route.dependencies or route.response_model is not None or route.dependency_overrides_provider is not None:
        return False
    try:
        parameters = list(inspect.signature(route.endpoint, eval_str=True).parameters.values())
    except (NameError, TypeError, ValueError):  # annotations that do not resolve: leave it to FastAPI
        return False
    if not parameters or parameters[0].annotation is not Request:
        return False
    segments = parameters[1:]
    if sorted(p.name for p in segments) != sorted(route.param_convertors):
        return False
    plain = all(p.annotation is str and p.default is p.empty and p.kind is p.POSITIONAL_OR_KEYWORD for p in segments)
    return plain and all(type(c) is StringConvertor for c in route.param_convertors.values())


class DirectRoutes(BaseRoute):
    """The routes of ``routers`` (included without a prefix, in this order) that ``served_directly``, by
    method; the others as blockers."""

    def __init__(self, routers: Iterable[APIRouter]) -> None:
        self.served: list[APIRoute] = []  # in the routers' order
        self.left_to_fastapi: list[BaseRoute] = []  # the blockers
        self._by_method: dict[str, list[tuple[re.Pattern[str], BaseRoute, Endpoint | None]]] = {}
        for router in routers:
            for route in router.routes:
                regex = getattr(route, "path_regex", None)
                methods = getattr(route, "methods", None)
                if regex is None or not methods:
                    raise ValueError(f"{route!r} has no path and methods: DirectRoutes cannot order it")
                endpoint: Endpoint | None = None
                if isinstance(route, APIRoute) and served_directly(route):
                    endpoint = route.endpoint
                    self.served.append(route)
                else:
                    self.left_to_fastapi.append(route)
                for method in methods:
                    self._by_method.setdefault(method, []).append((regex, route, endpoint))

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        if scope["type"] == "http" and not scope.get("root_path"):  # under a root path, FastAPI's rules apply
            path = scope["path"]
            for regex, route, endpoint in self._by_method.get(scope["method"], ()):
                found = regex.match(path)
                if found is not None:
                    if endpoint is None:  # a blocker answers it: FastAPI's routing does
                        break
                    return Match.FULL, {"route": route, "endpoint": endpoint, "path_params": found.groupdict()}
        return Match.NONE, {}

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        endpoint: Endpoint = scope["endpoint"]
        response = await endpoint(Request(scope, receive, send), **scope["path_params"])
        await response(scope, receive, send)

    def url_path_for(self, name: str, /, **path_params: Any) -> Any:
        raise NoMatchFound(name, path_params)  # the FastAPI routes behind these answer it


__all__ = ["DirectRoutes", "served_directly"]
