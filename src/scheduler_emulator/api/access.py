"""Who may use the API (docs/reference/security.md#inbound-authentication): the Host guard against DNS rebinding and
inbound authentication (none, a shared bearer token, JWTs signed by a key of a JWKS, or tokens issued by the local token
service, docs/reference/token-service.md#accepting-issued-tokens)."""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import json
import logging
from pathlib import Path
from typing import Any

import jwt

from scheduler_emulator.api import errors
from scheduler_emulator.api.identity import paths as identity_paths
from scheduler_emulator.api.identity.tokens import InvalidToken, TokenService
from scheduler_emulator.config import ConfigError
from scheduler_emulator.config_groups import SecuritySettings, ServerSettings
from scheduler_emulator.domain.authorization import ANONYMOUS, Caller

log = logging.getLogger("scheduler_emulator.api")

# Only asymmetric algorithms: ``none`` and HMAC (where a public key could be misused as the shared
# secret) never verify a token here, whatever its header says.
JWT_ALGORITHMS = ["RS256", "ES256"]
JWT_LEEWAY_SECONDS = 60  # clock skew tolerated on exp/nbf/iat
JWKS_CACHE_SECONDS = 300
# Open without a token: health, the dashboard's page and assets (they hold no data; the page asks for the
# token and sends it with every API call), and / (which leads a browser to that page).
OPEN_PATHS = frozenset(
    {"/", "/_emulator/health", "/_emulator/ui", "/_emulator/ui/", "/_emulator/ui/app.js", "/_emulator/ui/app.css"}
)
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


def is_loopback(host: str) -> bool:
    """Whether a listen address (or a Host header's name) is a loopback one."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def host_name(header: str) -> str:
    """The name in a ``Host`` header, without its port, lower case (``[::1]:80`` → ``::1``)."""
    value = header.strip().lower()
    if value.startswith("["):
        return value[1 : value.find("]")] if "]" in value else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


class HostGuard:
    """While the service listens on loopback, only requests naming a loopback host (or an allowed name)
    are served: a browser page on another origin that rebinds its DNS name to 127.0.0.1 still sends its
    own name in ``Host``."""

    def __init__(self, server: ServerSettings) -> None:
        self.active = is_loopback(server.host)
        # The address it listens on (e.g. 127.0.0.2) is its own name too.
        self.allowed = LOOPBACK_NAMES | server.allowed_host_names | {server.host.strip("[]").lower()}

    def check(self, host_header: str | None) -> errors.ArmError | None:
        if not self.active or host_header is None:
            return None
        if host_name(host_header) in self.allowed:
            return None
        return errors.host_not_allowed(host_header)


class Authenticator:
    """Checks the ``Authorization`` header of a request according to the security settings' auth mode."""

    def __init__(self, security: SecuritySettings, issued: TokenService | None = None) -> None:
        """``issued``: the token service whose tokens ``--auth issued`` accepts (needed in that mode)."""
        self.mode = security.mode
        self._issued = issued
        self._token = security.token.get_secret_value().encode() if security.token else b""
        self._audience = security.audience
        self._issuer = security.issuer
        self._keys: JwksKeys | None = JwksKeys(security.jwks) if security.jwks else None

    async def check(self, path: str, authorization: str | None) -> Caller | errors.ArmError:
        """The caller when the request may proceed (docs/reference/authorization.md: unrestricted with no auth
        flag and with the shared ``--auth-token``; the token's tenant, object id and client with ``--auth issued``
        and ``--auth-jwks``), else the 401 to answer with (the caller lets health through)."""
        if self.mode == "none":
            return Caller.UNRESTRICTED
        if identity_paths.is_open(path):  # a client has no token before it signs in
            return self.open_caller
        scheme, _, credential = (authorization or "").strip().partition(" ")
        credential = credential.strip()
        if scheme.lower() != "bearer" or not credential:
            return errors.authentication_failed("The request has no 'Authorization: Bearer' token.")
        if self.mode == "token":
            # Constant-time, so response timing does not reveal how much of a guess was right.
            if hmac.compare_digest(credential.encode(), self._token):
                return Caller.UNRESTRICTED
            return errors.authentication_failed("The bearer token is not valid.")
        if self.mode == "issued":
            assert self._issued is not None
            try:
                verified = self._issued.verify(credential)  # our own key, in memory: quick enough for the event loop
            except InvalidToken as exc:
                return errors.authentication_failed(exc.message, code=exc.code)
            principal = verified.principal
            return Caller(
                tenant_id=verified.tenant,
                object_id=principal.object_id if principal is not None else None,
                client_id=verified.client_id,
                issuer=verified.issuer,
            )
        try:
            claims = await asyncio.to_thread(self._verify_jwt, credential)  # a JWKS URL may be fetched: not on the loop
        except (jwt.PyJWTError, ValueError, TypeError) as exc:  # a key of the wrong type raises plain errors
            return errors.authentication_failed(f"The access token is not valid: {exc}")
        return Caller(
            tenant_id=_claim(claims, "tid"),
            object_id=_claim(claims, "oid"),
            client_id=_claim(claims, "appid") or _claim(claims, "azp"),
            issuer=_claim(claims, "iss"),
        )

    @property
    def open_caller(self) -> Caller:
        """The caller of a request on a path open without a token: unrestricted unless authorization is in
        force (``--auth issued``, ``--auth-jwks``), where it holds nothing."""
        return ANONYMOUS if self.mode in ("issued", "jwt") else Caller.UNRESTRICTED

    def _verify_jwt(self, token: str) -> dict[str, Any]:
        assert self._keys is not None
        header = jwt.get_unverified_header(token)
        if header.get("alg") not in JWT_ALGORITHMS:
            raise jwt.InvalidAlgorithmError(f"the algorithm must be one of {', '.join(JWT_ALGORITHMS)}")
        key = self._keys.key_for(header)
        required = ["exp", "aud"] + (["iss"] if self._issuer else [])
        return jwt.decode(
            token,
            key.key,
            algorithms=JWT_ALGORITHMS,
            audience=self._audience,
            issuer=self._issuer,
            leeway=JWT_LEEWAY_SECONDS,
            options={"require": required},
        )


def _claim(claims: dict[str, Any], name: str) -> str | None:
    value = claims.get(name)
    return value if isinstance(value, str) and value else None


class JwksKeys:
    """The signing keys of a JWKS, from a file (read once) or a URL (fetched, cached, refetched for an
    unknown key id)."""

    def __init__(self, source: str) -> None:
        self._client: jwt.PyJWKClient | None = None
        self._file_keys: jwt.PyJWKSet | None = None
        if source.lower().startswith(("http://", "https://")):
            self._client = jwt.PyJWKClient(source, cache_keys=True, lifespan=JWKS_CACHE_SECONDS, timeout=10)
        else:
            try:
                self._file_keys = jwt.PyJWKSet.from_dict(json.loads(Path(source).read_text()))
            except (OSError, ValueError, jwt.PyJWTError) as exc:
                raise ConfigError(f"--auth-jwks: cannot read a JWKS from {source}: {exc}") from None

    def key_for(self, header: dict[str, Any]) -> jwt.PyJWK:
        """The key the token's header names (``kid``; the only key when the set has one and no kid is given)."""
        kid = header.get("kid")
        if self._client is not None:
            if kid is None:
                keys = self._client.get_signing_keys()
                if len(keys) == 1:
                    return keys[0]
                raise jwt.InvalidTokenError("the token has no 'kid' and the JWKS has several keys")
            try:
                return self._client.get_signing_key(kid)
            except jwt.PyJWKClientError as exc:
                raise jwt.InvalidTokenError(str(exc)) from None
        assert self._file_keys is not None
        keys = self._file_keys.keys
        if kid is None and len(keys) == 1:
            return keys[0]
        for key in keys:
            if key.key_id == kid:
                return key
        raise jwt.InvalidTokenError(f"no key with kid '{kid}' in the JWKS")
