"""Secrets at rest (docs/reference/security.md#secrets-at-rest): the write-only secrets inside a job's definition (every
slot of ``schemas.job_shape.SECRETS``: passwords, pfx files, client secrets, Service Bus SAS keys, storage SAS tokens)
are stored encrypted with the process's key.

Encryption is Fernet (AES-128-CBC with HMAC-SHA256, from ``cryptography``). A sealed value is the string
``enc:v1:`` followed by the Fernet token, in place of the plaintext, so the definition keeps its shape.
The rest of the service sees plaintext: the ``definition`` column's type seals on write and opens on read."""

from __future__ import annotations

from typing import Any

from cryptography.fernet import Fernet, InvalidToken

from scheduler_emulator.schemas.job_shape import secret_values, transform_secrets

__all__ = ["PREFIX", "SecretBox", "SecretKeyMismatch", "secret_values"]

PREFIX = "enc:v1:"


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
        return transform_secrets(properties, self.seal)

    def open_definition(self, properties: dict[str, Any]) -> dict[str, Any]:
        """A copy of stored job ``properties`` with every secret opened."""
        return transform_secrets(properties, self.open)
