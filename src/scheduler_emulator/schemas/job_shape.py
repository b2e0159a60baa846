"""A job definition's shape, declared once: where actions sit, each action type's payload, each secret slot
with its kind, each duration. Every walker of a definition reads these tables rather than knowing paths of
its own (STYLE, "Knowledge declared once"):

- answers leave the secrets out (``strip_secrets``: ARM, classic) and the dashboard masks them (``masked``);
- the store seals them at rest and opens them on read (``transform_secrets``, ``secret_values``);
- an update that omits one keeps it only for the target it was given for (``keep_omitted_secrets``,
docs/reference/security.md#secrets);
- the dispatcher scrubs a job's secrets from history messages and log lines (``secrets_of_action``, ``scrub``);
- the client dialects rewrite durations (``duration_fields``).

Adding a secret field is one line in ``SECRETS``. Definitions are walked as the JSON they are stored and sent
as (``properties``), not yet validated: a level that is missing or not an object is skipped, never an error.
"""

from __future__ import annotations

import base64
import copy
from collections.abc import Callable, Hashable, Iterator, Mapping
from dataclasses import dataclass
from enum import StrEnum
from functools import cache
from typing import Any
from urllib.parse import urlsplit

from pydantic.alias_generators import to_snake as _to_snake

from scheduler_emulator.domain.errors import FieldError

# A member's attribute name, worked out once per name: pydantic's to_snake runs several regular expressions, and
# a PUT (validation) and every fire (secrets_of_action) ask for the same few names again and again.
to_snake = cache(_to_snake)


class SecretKind(StrEnum):
    """What a secret is. Every kind is write-only (never answered), sealed at rest, masked on the dashboard
    and never logged (docs/reference/arm-api.md#write-only-secrets)."""

    PASSWORD = "password"
    PFX = "pfx"
    CLIENT_SECRET = "client secret"
    SAS_KEY = "SAS key"
    SAS_TOKEN = "SAS token"


@dataclass(frozen=True, slots=True, kw_only=True)
class ActionPlace:
    """Where an action sits in ``properties``."""

    keys: tuple[str, ...]  # ("action",) or ("action", "errorAction")

    @property
    def path(self) -> str:
        """Its ARM field path: ``properties.action.errorAction``."""
        return ".".join(("properties", *self.keys))

    @property
    def attributes(self) -> tuple[str, ...]:
        """Its path through the validated model (``JobProperties``)."""
        return tuple(to_snake(key) for key in self.keys)


ACTION_PLACES = (ActionPlace(keys=("action",)), ActionPlace(keys=("action", "errorAction")))


def _http_target(payload: Mapping[str, Any]) -> Hashable:
    return origin(payload.get("uri"))


def _storage_target(payload: Mapping[str, Any]) -> Hashable:
    return _folded(payload.get("storageAccount")), _folded(payload.get("queueName"))


def _service_bus_target(payload: Mapping[str, Any]) -> Hashable:
    return _folded(payload.get("namespace"))


@dataclass(frozen=True, slots=True, kw_only=True)
class Payload:
    """The payload of some action types, and what a secret stored in it is bound to
    (docs/reference/security.md#secrets)."""

    key: str  # its member in the action
    action_types: tuple[str, ...]
    target: Callable[[Mapping[str, Any]], Hashable]  # where the payload's secrets go: equal means same target
    target_words: str  # that target in an error message ("the {target_words} changed")
    # The member naming the kind of authentication its secrets belong to: a secret is not carried over to
    # another kind (it would mean something else there), nor refused (the new kind may not need it).
    kind_path: tuple[str, ...] | None = None

    @property
    def attribute(self) -> str:
        """Its attribute in the validated action model."""
        return to_snake(self.key)


PAYLOADS = (
    Payload(
        key="request",
        action_types=("Http", "Https"),
        target=_http_target,
        target_words="request.uri's origin",
        kind_path=("authentication", "type"),
    ),
    Payload(
        key="queueMessage",
        action_types=("StorageQueue",),
        target=_storage_target,
        target_words="storage account or queue",
    ),
    Payload(
        key="serviceBusQueueMessage",
        action_types=("ServiceBusQueue",),
        target=_service_bus_target,
        target_words="namespace",
    ),
    Payload(
        key="serviceBusTopicMessage",
        action_types=("ServiceBusTopic",),
        target=_service_bus_target,
        target_words="namespace",
    ),
)
PAYLOAD_OF = {action_type: payload for payload in PAYLOADS for action_type in payload.action_types}


@dataclass(frozen=True, slots=True, kw_only=True)
class SecretSlot:
    """One place a secret sits, below its payload."""

    payload: str  # Payload.key
    keys: tuple[str, ...]  # from the payload: ("authentication", "password")
    kind: SecretKind

    @property
    def holder(self) -> tuple[str, ...]:
        return self.keys[:-1]

    @property
    def name(self) -> str:
        return self.keys[-1]


SECRETS = (
    SecretSlot(payload="request", keys=("authentication", "password"), kind=SecretKind.PASSWORD),
    SecretSlot(payload="request", keys=("authentication", "pfx"), kind=SecretKind.PFX),
    SecretSlot(payload="request", keys=("authentication", "secret"), kind=SecretKind.CLIENT_SECRET),
    SecretSlot(payload="queueMessage", keys=("sasToken",), kind=SecretKind.SAS_TOKEN),
    SecretSlot(payload="serviceBusQueueMessage", keys=("authentication", "sasKey"), kind=SecretKind.SAS_KEY),
    SecretSlot(payload="serviceBusTopicMessage", keys=("authentication", "sasKey"), kind=SecretKind.SAS_KEY),
)

# Durations, as (payload key or None for the action itself, keys from there).
DURATIONS: tuple[tuple[str | None, tuple[str, ...]], ...] = (
    (None, ("retryPolicy", "retryInterval")),
    ("serviceBusQueueMessage", ("brokeredMessageProperties", "timeToLive")),
    ("serviceBusTopicMessage", ("brokeredMessageProperties", "timeToLive")),
)


@dataclass(frozen=True, slots=True)
class FoundSecret:
    """A secret slot that holds a value in one definition."""

    place: ActionPlace
    slot: SecretSlot
    holder: dict[str, Any]  # the object holding it, in the walked definition

    @property
    def path(self) -> str:
        """Its ARM field path: ``properties.action.request.authentication.password``."""
        return ".".join((self.place.path, self.slot.payload, *self.slot.keys))

    @property
    def value(self) -> str:
        return self.holder[self.slot.name]  # type: ignore[no-any-return]


# --- walking stored or sent JSON -------------------------------------------------------------------------


def member(node: Any, *keys: str) -> Any:
    """``node[k1][k2]...``, or None where a level is missing or not an object."""
    for key in keys:
        node = node.get(key) if isinstance(node, dict) else None
    return node


def actions_in(properties: Any) -> Iterator[tuple[ActionPlace, dict[str, Any]]]:
    """Each action object of job ``properties`` with its place."""
    for place in ACTION_PLACES:
        action = member(properties, *place.keys)
        if isinstance(action, dict):
            yield place, action


def secrets_in(properties: Any) -> Iterator[FoundSecret]:
    """Every secret slot of job ``properties`` that holds a string."""
    for place, action in actions_in(properties):
        for slot in SECRETS:
            holder = member(action, slot.payload, *slot.holder)
            if isinstance(holder, dict) and isinstance(holder.get(slot.name), str):
                yield FoundSecret(place, slot, holder)


def secret_values(properties: Any) -> Iterator[str]:
    """Every secret value in job ``properties`` (as stored: sealed or not)."""
    return (found.value for found in secrets_in(properties))


def transform_secrets(properties: dict[str, Any], change: Callable[[str], str]) -> dict[str, Any]:
    """A copy of ``properties`` with ``change`` applied to each secret; ``properties`` itself when it holds
    none (most jobs: no copy)."""
    if next(secrets_in(properties), None) is None:
        return properties
    result = copy.deepcopy(properties)
    for found in list(secrets_in(result)):
        found.holder[found.slot.name] = change(found.value)
    return result


def strip_secrets(properties: dict[str, Any]) -> dict[str, Any]:
    """A copy of job ``properties`` without its write-only secrets, for answers."""
    result = copy.deepcopy(properties)
    for found in list(secrets_in(result)):
        del found.holder[found.slot.name]
    return result


def masked(properties: dict[str, Any], mask: str) -> dict[str, Any]:
    """A copy of job ``properties`` with each secret's value replaced by ``mask``."""
    return transform_secrets(properties, lambda _: mask) if isinstance(properties, dict) else properties


def duration_fields(properties: Any) -> Iterator[tuple[dict[str, Any], str]]:
    """(object, key) of every duration string in job ``properties``, stored or as sent."""
    for _, action in actions_in(properties):
        for payload, keys in DURATIONS:
            holder = member(action, *(() if payload is None else (payload,)), *keys[:-1])
            if isinstance(holder, dict) and isinstance(holder.get(keys[-1]), str):
                yield holder, keys[-1]


# --- secrets that follow their target (docs/reference/security.md#secrets) ----------------------------


def keep_omitted_secrets(new: dict[str, Any], old: dict[str, Any]) -> dict[str, Any]:
    """``new`` with each write-only secret it omits taken from the stored ``old``, so that a GET-modify-PUT
    round trip does not lose it — but only while it goes where it went before: the same payload with the
    same target (``Payload.target``) and the same kind of authentication. A secret omitted for a new target
    → FieldError naming its field (a stored secret is never sent somewhere new); one whose kind of
    authentication changed is not carried."""
    result = copy.deepcopy(new)
    old_actions = {place: action for place, action in actions_in(old)}
    for place, action in actions_in(result):
        previous = old_actions.get(place)
        if previous is None:
            continue
        for payload in PAYLOADS:
            new_payload, old_payload = member(action, payload.key), member(previous, payload.key)
            if not isinstance(new_payload, dict) or not isinstance(old_payload, dict):
                continue
            for slot in (slot for slot in SECRETS if slot.payload == payload.key):
                new_holder, old_holder = member(new_payload, *slot.holder), member(old_payload, *slot.holder)
                if not isinstance(new_holder, dict) or not isinstance(old_holder, dict):
                    continue
                if slot.name in new_holder or not isinstance(old_holder.get(slot.name), str):
                    continue
                if payload.kind_path is not None and _folded(member(new_payload, *payload.kind_path)) != _folded(
                    member(old_payload, *payload.kind_path)
                ):
                    continue
                if payload.target(new_payload) != payload.target(old_payload):
                    path = ".".join((place.path, payload.key, *slot.keys))
                    raise FieldError(
                        path,
                        f"must be given again: the {payload.target_words} changed, and a stored secret is only "
                        "kept for the target it was given for",
                    )
                new_holder[slot.name] = old_holder[slot.name]
    return result


def origin(uri: object) -> tuple[str, str, int | None] | None:
    """(scheme, host, port) of a URI, the default port filled in; None when it is not a URI."""
    if not isinstance(uri, str):
        return None
    try:
        parts = urlsplit(uri)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    return scheme, (parts.hostname or "").lower(), port or {"http": 80, "https": 443}.get(scheme)


def _folded(value: object) -> str:
    return value.lower() if isinstance(value, str) else ""


# --- the validated model: what the dispatcher scrubs --------------------------------------------------------


def secrets_of_action(action: Any) -> list[str]:
    """The secret values of one validated action (``ActionBase``), its error action's not included, and
    the form a Basic password travels in: what must never appear in a history message or a log line about
    its attempts (a target that echoes the request it got would put them in its answer's excerpt)."""
    found = []
    for slot in SECRETS:
        node = getattr(action, to_snake(slot.payload), None)
        for key in slot.keys:
            node = getattr(node, to_snake(key), None) if node is not None else None
        if isinstance(node, str) and node:
            found.append(node)
    auth = getattr(getattr(action, "request", None), "authentication", None)
    if auth is not None and auth.type == "Basic" and auth.password:
        found.append(base64.b64encode(f"{auth.username or ''}:{auth.password}".encode()).decode())
    return found


# Shorter values are not scrubbed: replacing every "a" or "ok" in a message would garble it, and a secret that
# short protects nothing anyway.
MIN_SCRUBBED = 4


def scrub(text: str, secrets: list[str]) -> str:
    """``text`` with every occurrence of each secret (the longest first) replaced by ``***``."""
    for secret in sorted(secrets, key=len, reverse=True):
        if len(secret) >= MIN_SCRUBBED:
            text = text.replace(secret, "***")
    return text
