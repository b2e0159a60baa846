"""The token service's signing key (docs/reference/token-service.md#tokens): an RSA key kept 0600 in the data directory
(``<data-dir>/token-signing-key.pem``, or ``--token-signing-key-file``), created on first use, published in the JWKS
under its RFC 7638 thumbprint as ``kid``. Processes that should accept each other's tokens share the file."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import threading
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from scheduler_emulator.config import ConfigError

KEY_FILE_NAME = "token-signing-key.pem"
ALGORITHM = "RS256"


class SigningKey:
    """The key, loaded (or generated and written) the first time it is needed; thread-safe."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._key: rsa.RSAPrivateKey | None = None
        self._kid = ""

    def load(self) -> None:
        """Read the key now (or create it); ConfigError when the file is unreadable or not an RSA key."""
        with self._lock:
            if self._key is not None:
                return
            key = _read_or_create(self.path)
            public = key.public_key().public_numbers()
            # RFC 7638: SHA-256 of the required members in lexicographic order, no white space.
            canonical = json.dumps({"e": _b64(public.e), "kty": "RSA", "n": _b64(public.n)}, separators=(",", ":"))
            self._kid = base64.urlsafe_b64encode(hashlib.sha256(canonical.encode()).digest()).rstrip(b"=").decode()
            self._key = key

    @property
    def kid(self) -> str:
        self.load()
        return self._kid

    def sign(self, claims: dict[str, Any]) -> str:
        """``claims`` as a compact RS256 JWT with this key's ``kid``."""
        self.load()
        assert self._key is not None
        return jwt.encode(claims, self._key, algorithm=ALGORITHM, headers={"kid": self._kid, "typ": "JWT"})

    def public_key(self) -> rsa.RSAPublicKey:
        self.load()
        assert self._key is not None
        return self._key.public_key()

    def jwks(self) -> dict[str, Any]:
        """The JWKS document: this one key, for signatures."""
        jwk = jwt.algorithms.RSAAlgorithm.to_jwk(self.public_key(), as_dict=True)
        return {"keys": [{**jwk, "kid": self.kid, "use": "sig", "alg": ALGORITHM}]}


def _b64(number: int) -> str:
    data = number.to_bytes((number.bit_length() + 7) // 8, "big")
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _read_or_create(path: Path) -> rsa.RSAPrivateKey:
    if not path.exists():
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        pem = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        # Written whole to a private temporary file (0600 from its creation), then linked into place: a process
        # sharing the directory sees either no key or a complete one, and the first to link wins.
        temporary = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(descriptor, "wb") as file:
            file.write(pem)
        try:
            os.link(temporary, path)
        except FileExistsError:
            pass  # another process made it meanwhile: use theirs
        else:
            return key
        finally:
            temporary.unlink(missing_ok=True)
    try:
        loaded = serialization.load_pem_private_key(path.read_bytes(), password=None)
    except OSError as exc:
        raise ConfigError(f"cannot read the token signing key {path}: {exc.strerror}") from None
    except (ValueError, TypeError):
        raise ConfigError(f"{path} is not an unencrypted PEM private key (the token signing key)") from None
    if not isinstance(loaded, rsa.RSAPrivateKey) or loaded.key_size < 2048:
        raise ConfigError(f"the token signing key {path} must be an RSA key of at least 2048 bits")
    return loaded
