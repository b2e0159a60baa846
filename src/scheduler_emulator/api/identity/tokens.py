"""Issuing and checking tokens (docs/reference/token-service.md#tokens): the client-credentials grant, with a client
secret or a certificate-signed client assertion (RFC 7523, what MSAL sends for azure-identity's CertificateCredential
and ``az login --certificate``), for either management audience; and the check ``--auth issued`` applies to every API
request.

Tokens are RS256 JWTs carrying what ARM's tokens carry: ``aud``, ``iss``, ``tid``, ``oid``, ``sub``,
``appid``, ``iat``, ``nbf``, ``exp`` (and ``azp``, ``idtyp``, ``ver``, ``uti``). PyJWT signs and verifies."""

from __future__ import annotations

import base64
import hmac
import time
import uuid
from dataclasses import dataclass
from typing import Any

import jwt

from scheduler_emulator.api.identity import entra
from scheduler_emulator.api.identity.principals import Principal, Principals
from scheduler_emulator.api.identity.signing import ALGORITHM, SigningKey

# The resource ids of Azure Resource Manager, both accepted: az asks for the first (the cloud's
# ``activeDirectoryResourceId``), the SDKs through azure-identity for the second.
MANAGEMENT_AUDIENCES = ("https://management.core.windows.net/", "https://management.azure.com/")
ACCEPTED_AUDIENCES = [*MANAGEMENT_AUDIENCES, *(audience.rstrip("/") for audience in MANAGEMENT_AUDIENCES)]
TOKEN_LIFETIME_SECONDS = 3600  # what Entra ID gives an app token by default (60-90 minutes)
LEEWAY_SECONDS = 60  # clock skew tolerated on exp/nbf, as for --auth-jwks
JWT_BEARER = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
# Asymmetric only: MSAL signs assertions with PS256 (x5t#S256) or RS256 (x5t, what azure-identity asks for).
ASSERTION_ALGORITHMS = ["RS256", "PS256"]
MULTI_TENANT_ALIASES = frozenset({"common", "organizations", "consumers"})


@dataclass(frozen=True, slots=True, kw_only=True)
class TokenRequest:
    """A token request as it arrived: the form fields, the HTTP Basic credentials if any, and where."""

    form: dict[str, str]
    basic: tuple[str, str] | None  # client_secret_basic: (client id, secret) from the Authorization header
    tenant: str  # the tenant segment of the URL
    v2: bool  # /oauth2/v2.0/token (scope) rather than /oauth2/token (resource)
    base_url: str  # scheme://host[:port] the client reached, without a trailing slash


@dataclass(frozen=True, slots=True, kw_only=True)
class Caller:
    """Who a verified token of ours names."""

    client_id: str
    tenant: str
    principal: Principal | None  # None: no longer configured
    issuer: str = ""  # the token's ``iss``


class TokenService:
    """Issues tokens to the configured principals and verifies tokens it issued."""

    def __init__(self, principals: Principals, key: SigningKey) -> None:
        self.principals = principals
        self.key = key

    # --- issuing ----------------------------------------------------------------------------------------

    def issue(self, request: TokenRequest) -> dict[str, Any]:
        """The token response for ``request``; EntraError when it is refused."""
        form = request.form
        grant_type = form.get("grant_type")
        if not grant_type:
            raise entra.missing_parameter("grant_type")
        if grant_type != "client_credentials":
            raise entra.unsupported_grant_type(grant_type)
        if request.tenant.lower() in MULTI_TENANT_ALIASES:
            raise entra.invalid_tenant(request.tenant)
        client_id = form.get("client_id") or (request.basic[0] if request.basic else "")
        if not client_id:
            raise entra.missing_parameter("client_id")
        audience = self._audience(request)
        principal = self.principals.find(client_id)
        if principal is None or not principal.signs_in_to(request.tenant):
            raise entra.unknown_client(client_id, request.tenant)
        method = self._authenticate(principal, request)
        now = int(time.time())
        token_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        tenant = request.tenant.lower()
        claims: dict[str, Any] = {
            "aud": audience,
            "iss": f"{request.base_url}/{tenant}/v2.0" if request.v2 else f"{request.base_url}/{tenant}/",
            "iat": now,
            "nbf": now,
            "exp": now + TOKEN_LIFETIME_SECONDS,
            "tid": tenant,
            "oid": principal.object_id,
            "sub": principal.object_id,
            "appid": principal.client_id,
            "azp": principal.client_id,
            # How the client proved itself: 1 a secret, 2 a certificate (appidacr in v1, azpacr in v2).
            ("azpacr" if request.v2 else "appidacr"): method,
            "idtyp": "app",
            "uti": token_id,
            "ver": "2.0" if request.v2 else "1.0",
        }
        token = self.key.sign(claims)
        if request.v2:
            return {
                "token_type": "Bearer",
                "expires_in": TOKEN_LIFETIME_SECONDS,
                "ext_expires_in": TOKEN_LIFETIME_SECONDS,
                "access_token": token,
            }
        # The v1 endpoint answers numbers as strings, and names the resource.
        return {
            "token_type": "Bearer",
            "expires_in": str(TOKEN_LIFETIME_SECONDS),
            "ext_expires_in": str(TOKEN_LIFETIME_SECONDS),
            "expires_on": str(claims["exp"]),
            "not_before": str(claims["nbf"]),
            "resource": audience,
            "access_token": token,
        }

    @staticmethod
    def _audience(request: TokenRequest) -> str:
        """The resource asked for (v2: ``scope`` = RESOURCE/.default; v1: ``resource``), if it is ARM's."""
        if request.v2:
            scope = request.form.get("scope", "").strip()
            if not scope:
                raise entra.missing_parameter("scope")
            if " " in scope or not scope.endswith("/.default"):
                raise entra.invalid_scope(scope)
            resource = scope.removesuffix("/.default")
        else:
            resource = request.form.get("resource", "").strip()
            if not resource:
                raise entra.missing_parameter("resource")
        if resource not in ACCEPTED_AUDIENCES:
            raise entra.unknown_resource(resource, request.tenant, MANAGEMENT_AUDIENCES)
        return resource

    def _authenticate(self, principal: Principal, request: TokenRequest) -> str:
        """``"1"`` (secret) or ``"2"`` (certificate) when the request proves to be ``principal``; else EntraError."""
        form = request.form
        assertion = form.get("client_assertion")
        if assertion:
            assertion_type = form.get("client_assertion_type", "")
            if assertion_type != JWT_BEARER:
                raise entra.invalid_assertion_type(assertion_type)
            self._check_assertion(principal, assertion, request)
            return "2"
        secret = form.get("client_secret") or (request.basic[1] if request.basic else None)
        if not secret:
            raise entra.credential_missing()
        # Constant-time, so response timing does not reveal how much of a guess was right.
        if principal.secret is None or not hmac.compare_digest(secret.encode(), principal.secret.encode()):
            raise entra.invalid_secret(principal.client_id)
        return "1"

    @staticmethod
    def _check_assertion(principal: Principal, assertion: str, request: TokenRequest) -> None:
        """The assertion is signed by the principal's certificate key, names the principal as ``iss`` and
        ``sub`` and this token endpoint as ``aud``, and is within its time range."""
        certificate = principal.certificate
        if certificate is None:
            raise entra.invalid_assertion(f"no certificate is registered for application '{principal.client_id}'.")
        try:
            header = jwt.get_unverified_header(assertion)
        except jwt.PyJWTError:
            raise entra.invalid_assertion("the assertion is not a JWT.") from None
        if header.get("alg") not in ASSERTION_ALGORITHMS:
            raise entra.invalid_assertion(f"the algorithm must be one of {', '.join(ASSERTION_ALGORITHMS)}.")
        thumbprints = {
            "x5t": certificate.sha1_thumbprint,
            "x5t#S256": certificate.sha256_thumbprint,
        }
        for name, expected in thumbprints.items():
            if name in header and _unb64(str(header[name])) != expected:
                raise entra.invalid_assertion(
                    f"the certificate named by '{name}' is not registered for application '{principal.client_id}'."
                )
        tenant = request.tenant
        endpoints = [f"{request.base_url}/{tenant}/oauth2/v2.0/token", f"{request.base_url}/{tenant}/oauth2/token"]
        try:
            claims = jwt.decode(
                assertion,
                certificate.public_key,
                algorithms=ASSERTION_ALGORITHMS,
                audience=endpoints,
                leeway=LEEWAY_SECONDS,
                options={"require": ["exp", "aud", "iss", "sub"]},
            )
        except (jwt.ExpiredSignatureError, jwt.ImmatureSignatureError):
            raise entra.assertion_expired() from None
        except jwt.InvalidAudienceError:
            raise entra.invalid_assertion(f"its audience must be this token endpoint ({endpoints[0]}).") from None
        except jwt.PyJWTError as exc:
            raise entra.invalid_assertion(f"{exc}.") from None
        if str(claims["iss"]).lower() != principal.client_id.lower() or str(claims["sub"]).lower() != (
            principal.client_id.lower()
        ):
            raise entra.assertion_client_mismatch()

    # --- checking (--auth issued) -------------------------------------------------------------------------

    def verify(self, token: str) -> Caller:
        """The caller a token of ours names; ``InvalidToken`` (with ARM's code) when it is not one, or not
        valid now, or not for Azure Resource Manager."""
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise InvalidToken("InvalidAuthenticationToken", "The access token is not a JWT.") from None
        if header.get("alg") != ALGORITHM:
            raise InvalidToken("InvalidAuthenticationToken", f"The access token must be signed with {ALGORITHM}.")
        if header.get("kid") != self.key.kid:
            raise InvalidToken(
                "InvalidAuthenticationToken", "The access token was not signed by this emulator's token service."
            )
        try:
            claims = jwt.decode(
                token,
                self.key.public_key(),
                algorithms=[ALGORITHM],
                audience=ACCEPTED_AUDIENCES,
                leeway=LEEWAY_SECONDS,
                options={"require": ["exp", "nbf", "iat", "aud", "iss", "tid", "appid"]},
            )
        except jwt.ExpiredSignatureError:
            raise InvalidToken("ExpiredAuthenticationToken", "The access token has expired.") from None
        except jwt.InvalidAudienceError:
            raise InvalidToken(
                "InvalidAuthenticationTokenAudience",
                "The access token has been obtained for wrong audience or resource. It should exactly match one of "
                f"the allowed audiences {', '.join(repr(a) for a in ACCEPTED_AUDIENCES)}.",
            ) from None
        except jwt.PyJWTError as exc:
            raise InvalidToken("InvalidAuthenticationToken", f"The access token is not valid: {exc}.") from None
        tenant, client_id = str(claims["tid"]), str(claims["appid"])
        issuer = str(claims["iss"])
        if not (issuer.endswith(f"/{tenant}/v2.0") or issuer.endswith(f"/{tenant}/")):
            raise InvalidToken(
                "InvalidAuthenticationTokenTenant", "The access token's issuer does not match its tenant."
            )
        principal = self.principals.find(client_id)
        if principal is None or not principal.signs_in_to(tenant):
            raise InvalidToken(
                "InvalidAuthenticationToken", f"The application '{client_id}' is no longer a configured principal."
            )
        return Caller(client_id=client_id, tenant=tenant, principal=principal, issuer=issuer)

    def caller_of(self, authorization: str | None) -> Caller | None:
        """The caller a request's ``Authorization: Bearer`` token of ours names; None without a valid one."""
        scheme, _, credential = (authorization or "").strip().partition(" ")
        if scheme.lower() != "bearer" or not credential.strip() or len(self.principals) == 0:
            return None
        try:
            return self.verify(credential.strip())
        except InvalidToken:
            return None


class InvalidToken(Exception):
    """A bearer token ``--auth issued`` refuses; ``code`` is ARM's error code for it."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _unb64(value: str) -> bytes:
    try:
        return base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))
    except ValueError:
        return b""
