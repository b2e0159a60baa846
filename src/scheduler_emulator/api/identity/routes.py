"""The route that sends the token service's and the account endpoints' paths (``paths.SHAPES``) to their
handlers; a known path with another method → 405 in ARM's shape."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import Request
from fastapi.responses import Response
from starlette.routing import BaseRoute, Match
from starlette.types import Receive, Scope, Send

from scheduler_emulator.api import errors
from scheduler_emulator.api.identity import accounts, endpoints
from scheduler_emulator.api.identity.paths import SHAPES, Shape, find

Handler = Callable[..., Awaitable[Response]]

HANDLERS: dict[str, dict[str, Handler]] = {
    "openid_v2": {"GET": endpoints.openid_configuration_v2},
    "openid_v1": {"GET": endpoints.openid_configuration_v1},
    "keys_v2": {"GET": endpoints.keys},
    "keys_v1": {"GET": endpoints.keys},
    "token_v2": {"POST": endpoints.token_v2},
    "token_v1": {"POST": endpoints.token_v1},
    "metadata": {"GET": accounts.metadata_endpoints},
    "subscriptions": {"GET": accounts.list_subscriptions},
    "subscription": {"GET": accounts.get_subscription},
    "locations": {"GET": accounts.list_locations},
    "tenants": {"GET": accounts.list_tenants},
}
assert set(HANDLERS) == {shape.name for shape in SHAPES}


class IdentityRoute(BaseRoute):
    """One route for the token service and the account endpoints."""

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        if scope["type"] != "http":
            return Match.NONE, {}
        found = find(scope["path"])
        if found is None:
            return Match.NONE, {}
        # The shape is the route the pipeline's access log and metrics see (its ``path`` is the label).
        return Match.FULL, {"route": found[0], "path_params": {"arguments": found[1]}}

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        shape: Shape = scope["route"]
        methods = HANDLERS[shape.name]
        handler = methods.get(request.method)
        if handler is None:
            response: Response = errors.method_not_allowed(request.method, shape.path).response(
                headers={"Allow": ", ".join(methods)}
            )
        else:
            try:
                response = await handler(request, *scope["path_params"]["arguments"])
            except errors.ArmError as exc:
                response = exc.response()
        await response(scope, receive, send)

    def url_path_for(self, name: str, /, **path_params: Any) -> Any:
        raise NotImplementedError


__all__ = ["IdentityRoute"]
