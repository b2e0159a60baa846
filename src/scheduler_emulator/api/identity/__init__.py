"""The local token service (docs/reference/token-service.md) and the account endpoints the Azure CLI calls around
logging in: ``principals`` (who may sign in), ``signing`` (the key), ``tokens`` (issuing and checking), ``entra`` (its
error shape), ``endpoints`` and ``accounts`` (the HTTP handlers), ``routes`` (which path reaches which)."""

from __future__ import annotations

from scheduler_emulator.api.identity.principals import load_principals
from scheduler_emulator.api.identity.signing import KEY_FILE_NAME, SigningKey
from scheduler_emulator.api.identity.tokens import TokenService
from scheduler_emulator.config_groups import IdentitySettings


def token_service(identity: IdentitySettings) -> TokenService:
    """The token service ``identity`` describes; ConfigError when a principal or the key cannot be read. The key
    is read at once with ``--auth issued`` (a bad key file stops start-up), else on first use."""
    principals = load_principals(
        identity.principals.get_secret_value() if identity.principals else None, identity.principals_file
    )
    key = SigningKey(identity.signing_key_file or identity.data_dir / KEY_FILE_NAME)
    if identity.required:
        key.load()
    return TokenService(principals, key)


__all__ = ["token_service"]
