"""The path shapes of the token service and the account endpoints, and which are open without a token.
Paths are matched segment by segment, literal segments in any case (as ARM matches them), so that
``/{tenant}/oauth2/v2.0/token`` and ``/Subscriptions`` need no FastAPI path syntax.

The token service's paths start with a tenant, like the classic surface's start with a subscription: the
classic route claims only its own second segments (``cloudservices``, ``services``…), these only theirs
(``oauth2``, ``v2.0``, ``.well-known``, ``discovery``), so neither can take the other's requests."""

from __future__ import annotations

from dataclasses import dataclass

ANY = None  # a segment that is an argument (tenant, subscription)


@dataclass(frozen=True, slots=True, kw_only=True)
class Shape:
    """One path shape: its name (the handler's key), segments (literal lower case, or ANY), whether it is
    answered without a bearer token, and its label in access logs and metrics (``path``)."""

    name: str
    segments: tuple[str | None, ...]
    open: bool
    path: str


SHAPES = (
    # The token service (docs/reference/token-service.md#endpoints): open, a client has no token yet.
    Shape(
        name="openid_v2",
        segments=(ANY, "v2.0", ".well-known", "openid-configuration"),
        open=True,
        path="/{tenant}/v2.0/.well-known/openid-configuration",
    ),
    Shape(
        name="openid_v1",
        segments=(ANY, ".well-known", "openid-configuration"),
        open=True,
        path="/{tenant}/.well-known/openid-configuration",
    ),
    Shape(name="keys_v2", segments=(ANY, "discovery", "v2.0", "keys"), open=True, path="/{tenant}/discovery/v2.0/keys"),
    Shape(name="keys_v1", segments=(ANY, "discovery", "keys"), open=True, path="/{tenant}/discovery/keys"),
    Shape(name="token_v2", segments=(ANY, "oauth2", "v2.0", "token"), open=True, path="/{tenant}/oauth2/v2.0/token"),
    Shape(name="token_v1", segments=(ANY, "oauth2", "token"), open=True, path="/{tenant}/oauth2/token"),
    # What az reads before logging in (open, as ARM's is), and calls after
    # (docs/reference/token-service.md#the-azure-cli).
    Shape(name="metadata", segments=("metadata", "endpoints"), open=True, path="/metadata/endpoints"),
    Shape(name="subscriptions", segments=("subscriptions",), open=False, path="/subscriptions"),
    Shape(name="subscription", segments=("subscriptions", ANY), open=False, path="/subscriptions/{subscriptionId}"),
    Shape(
        name="locations",
        segments=("subscriptions", ANY, "locations"),
        open=False,
        path="/subscriptions/{subscriptionId}/locations",
    ),
    Shape(name="tenants", segments=("tenants",), open=False, path="/tenants"),
)


def find(path: str) -> tuple[Shape, list[str]] | None:
    """The shape a path has, with the path's ANY segments; None for any other path. ``//metadata/endpoints``
    is the metadata path too (what az asks for when the registered endpoint ends in ``/``)."""
    if path.startswith("//metadata/"):
        path = path[1:]
    segments = path.split("/")[1:]
    if len(segments) > 1 and segments[-1] == "":
        segments.pop()  # a trailing slash
    for shape in SHAPES:
        if len(segments) != len(shape.segments):
            continue
        arguments = []
        for segment, expected in zip(segments, shape.segments, strict=True):
            if expected is ANY:
                if not segment:
                    break
                arguments.append(segment)
            elif segment.lower() != expected:
                break
        else:
            return shape, arguments
    return None


def is_open(path: str) -> bool:
    """Whether a path is answered without a bearer token whatever the auth mode (the token service's own
    paths and the metadata endpoint)."""
    found = find(path)
    return found is not None and found[0].open
