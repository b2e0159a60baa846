"""Secrets at rest (SPEC §11): the write-only secrets inside a job's definition (passwords, pfx files,
client secrets, Service Bus SAS keys, storage SAS tokens) are stored encrypted with the process's key.

Encryption is Fernet (AES-128-CBC with HMAC-SHA256, from ``cryptography``). A sealed value is the string
``enc:v1:`` followed by the Fernet token, in place of the plaintext, so the definition keeps its shape.
The rest of the service sees plaintext: the ``definition`` column's type seals on write and opens on read."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from typing import Any

from cryptography.fernet import Fernet, InvalidToken

PREFIX = "enc:v1:"

# Where secrets sit in a job definition's ``properties``, below each action (main and error action).
_ACTION_PATHS = (("action",), ("action", "errorAction"))
_SECRET_FIELDS = (
    (("request", "authentication"), ("password", "pfx", "secret")),
    (("serviceBusQueueMessage", "authentication"), ("sasKey",)),
    (("serviceBusTopicMessage", "authentication"), ("sasKey",)),
    (("queueMessage",), ("sasToken",)),
)


class SecretKeyMismatch(Exception):
    """The key cannot decrypt what is stored: another key wrote it."""


class SecretBox:
    """Seals and opens single values with one key."""

    def __init__(self, key: bytes) -> None:
        self._fernet = Fernet(key)  # ValueError for a key that is not 32 url-safe base64-encoded bytes

    def seal(self, plaintext: str) -> str:
        return PREFIX + self._fernet.encrypt(plaintext.encode()).decode("ascii")

    def open(self, sealed: str) -> str:
        """The plaintext of a sealed value; a value without the prefix (written before encryption) as it is."""
        if not sealed.startswith(PREFIX):
            return sealed
        try:
            return self._fernet.decrypt(sealed[len(PREFIX) :].encode("ascii")).decode()
        except (InvalidToken, ValueError):
            raise SecretKeyMismatch(
                "a stored secret does not decrypt with this secret key: it was written with another key"
            ) from None

    def seal_definition(self, properties: dict[str, Any]) -> dict[str, Any]:
        """A copy of job ``properties`` with every secret sealed."""
        return _transform(properties, self.seal)

    def open_definition(self, properties: dict[str, Any]) -> dict[str, Any]:
        """A copy of stored job ``properties`` with every secret opened."""
        return _transform(properties, self.open)


def secret_values(properties: dict[str, Any]) -> Iterator[str]:
    """Every secret value in job ``properties`` (as stored: sealed or not)."""
    for holder, name in _secret_slots(properties):
        yield holder[name]


def _secret_slots(properties: dict[str, Any]) -> Iterator[tuple[dict[str, Any], str]]:
    for action_path in _ACTION_PATHS:
        action: Any = properties
        for key in action_path:
            action = action.get(key) if isinstance(action, dict) else None
        if not isinstance(action, dict):
            continue
        for holder_path, names in _SECRET_FIELDS:
            holder: Any = action
            for key in holder_path:
                holder = holder.get(key) if isinstance(holder, dict) else None
            if isinstance(holder, dict):
                for name in names:
                    if isinstance(holder.get(name), str):
                        yield holder, name


def _transform(properties: dict[str, Any], change: Callable[[str], str]) -> dict[str, Any]:
    if not isinstance(properties, dict) or next(_secret_slots(properties), None) is None:
        return properties  # nothing secret (most jobs): no copy
    result = copy.deepcopy(properties)
    for holder, name in _secret_slots(result):
        holder[name] = change(holder[name])
    return result
