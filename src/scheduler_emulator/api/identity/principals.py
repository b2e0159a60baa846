"""The service principals the local token service knows (docs/reference/token-service.md#principals): whom it issues
tokens to, with what credential, in which tenant, and the one subscription each may list.

They come from the operator: ``--principal ID:SECRET[:TENANT[:SUBSCRIPTION]]`` (repeatable; env
``SCHEDULER_PRINCIPALS``, entries separated by commas or white space) and ``--principals-file FILE``, a JSON
document that can also name a certificate (PEM) whose key signs the principal's client assertions::

    {"principals": [{"clientId": "…", "secret": "…", "certificate": "app.pem", "tenant": "…",
                     "subscription": "…", "displayName": "…", "objectId": "…",
                     "roles": [{"role": "Reader", "scope": "/subscriptions/…/resourceGroups/…"}]}],
     "assignments": [{"principalId": "…", "role": "Owner", "scope": "/subscriptions/…"}]}

A principal without a tenant may sign in to any tenant its client names in the token URL; with one, only to
that tenant. ``roles`` are role assignments the principal starts with, and ``assignments`` name any object id
(an Entra ID principal's, with ``--auth-jwks``): docs/reference/authorization.md#who-starts-with-what. Secrets are
never echoed in error messages."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPublicKey

from scheduler_emulator.config import ConfigError
from scheduler_emulator.domain.authorization import is_assignable_scope, normalise_scope, role_by_id, role_by_name

ALL_ZERO = "00000000-0000-0000-0000-000000000000"
DEFAULT_SUBSCRIPTION = ALL_ZERO  # listed for a principal that names none, and for callers without our token
DEFAULT_TENANT = ALL_ZERO  # the tenant of callers without a token of ours
# Where the object ids of principals live: the same client id always gets the same oid.
_OID_NAMESPACE = uuid.UUID("6f1c2a5e-8d1b-4b7e-9a57-3c1f0e2d4b61")
# Client ids, tenants and subscriptions: GUIDs in Azure; any name of these characters here (a tenant may be a
# domain name, as in Entra ID URLs).
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientCertificate:
    """A certificate registered for a principal: its public key checks the principal's client assertions."""

    public_key: RSAPublicKey
    sha1_thumbprint: bytes  # what an assertion's ``x5t`` header names (azure-identity, az)
    sha256_thumbprint: bytes  # what ``x5t#S256`` names (MSAL's default since 1.35)


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfiguredRole:
    """A role assignment given in the configuration: the role's GUID for ``principal_id`` at ``scope``."""

    principal_id: str
    role_definition_id: str
    scope: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Principal:
    """One service principal (an app registration with its credentials)."""

    client_id: str
    secret: str | None  # None: it signs in with its certificate only
    certificate: ClientCertificate | None
    tenant: str | None  # None: any tenant
    subscription: str
    subscription_given: bool  # False: the all-zero default (DEFAULT_SUBSCRIPTION)
    display_name: str
    object_id: str  # its ``oid``: given in the file, else stable for a client id (default_object_id)
    roles: tuple[ConfiguredRole, ...] = ()

    def signs_in_to(self, tenant: str) -> bool:
        """Whether a token for ``tenant`` may be issued to this principal."""
        return self.tenant is None or self.tenant.lower() == tenant.lower()


def default_object_id(client_id: str) -> str:
    """The ``oid`` of a principal whose configuration names none: stable for a client id."""
    return str(uuid.uuid5(_OID_NAMESPACE, client_id.lower()))


class Principals:
    """The configured principals by client id (case-insensitive, as Entra ID compares application ids), and the
    role assignments the configuration gives to other object ids (``assignments``)."""

    def __init__(self, principals: list[Principal], assignments: tuple[ConfiguredRole, ...] = ()) -> None:
        self.assignments = assignments
        self._by_id: dict[str, Principal] = {}
        for principal in principals:
            key = principal.client_id.lower()
            if key in self._by_id:
                raise ConfigError(f"principal '{principal.client_id}' is configured twice")
            self._by_id[key] = principal

    def find(self, client_id: str) -> Principal | None:
        return self._by_id.get(client_id.lower())

    def __len__(self) -> int:
        return len(self._by_id)

    def __iter__(self) -> Iterator[Principal]:
        return iter(self._by_id.values())


def load_principals(flag_value: str | None, file: Path | None) -> Principals:
    """The principals from the ``--principal`` entries and the ``--principals-file``; ConfigError naming the
    entry (never its secret) when one cannot be read."""
    principals = [_from_flag(entry, number) for number, entry in enumerate(split_entries(flag_value), start=1)]
    assignments: tuple[ConfiguredRole, ...] = ()
    if file is not None:
        from_file, assignments = _from_file(file)
        principals += from_file
    return Principals(principals, assignments)


def split_entries(flag_value: str | None) -> list[str]:
    """The ``--principal`` entries in a joined value (commas or white space between them)."""
    return [entry for entry in re.split(r"[\s,]+", flag_value or "") if entry]


def _from_flag(entry: str, number: int) -> Principal:
    parts = entry.split(":")
    where = f"--principal entry {number}"
    if not 2 <= len(parts) <= 4 or not parts[1]:
        raise ConfigError(
            f"{where} must be CLIENT_ID:SECRET[:TENANT[:SUBSCRIPTION]] (a secret with ':' goes in --principals-file)"
        )
    client_id, secret = parts[0], parts[1]
    tenant = parts[2] if len(parts) > 2 and parts[2] else None
    subscription = parts[3] if len(parts) > 3 and parts[3] else None
    return _principal(
        where, client_id=client_id, secret=secret, certificate=None, tenant=tenant, subscription=subscription
    )


_PRINCIPAL_FIELDS = {"clientId", "secret", "certificate", "tenant", "subscription", "displayName", "objectId"}


def _from_file(path: Path) -> tuple[list[Principal], tuple[ConfiguredRole, ...]]:
    try:
        document = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        detail = exc.strerror if isinstance(exc, OSError) else "not valid JSON"
        raise ConfigError(f"--principals-file: cannot read {path}: {detail}") from None
    entries = document.get("principals", []) if isinstance(document, dict) else document
    if not isinstance(entries, list):
        raise ConfigError(f'--principals-file: {path} must hold {{"principals": [...]}} or a list')
    unknown_top = set(document) - {"principals", "assignments"} if isinstance(document, dict) else set()
    if unknown_top:
        raise ConfigError(f"--principals-file {path}: unknown field(s) {', '.join(sorted(unknown_top))}")
    assignments: list[ConfiguredRole] = []
    raw_assignments = document.get("assignments", []) if isinstance(document, dict) else []
    if not isinstance(raw_assignments, list):
        raise ConfigError(f"--principals-file {path}: 'assignments' must be a list")
    for number, item in enumerate(raw_assignments, start=1):
        where = f"--principals-file {path}, assignment {number}"
        if not isinstance(item, dict) or not isinstance(item.get("principalId"), str) or not item["principalId"]:
            raise ConfigError(f"{where}: each assignment names a 'principalId' (an object id), a 'role' and a 'scope'")
        extra = set(item) - {"principalId", "role", "scope"}
        if extra:
            raise ConfigError(f"{where}: unknown field(s) {', '.join(sorted(extra))}")
        assignments.append(_configured_role(where, item["principalId"], item))
    principals = []
    for number, entry in enumerate(entries, start=1):
        where = f"--principals-file {path}, principal {number}"
        if not isinstance(entry, dict) or not all(
            isinstance(value, str) for key, value in entry.items() if key != "roles"
        ):
            raise ConfigError(f"{where}: each principal is an object of strings (and a list of 'roles')")
        unknown = set(entry) - _PRINCIPAL_FIELDS - {"roles"}
        if unknown:
            raise ConfigError(f"{where}: unknown field(s) {', '.join(sorted(unknown))}")
        roles = entry.get("roles", [])
        if not isinstance(roles, list):
            raise ConfigError(f'{where}: \'roles\' is a list of {{"role": "…", "scope": "…"}}')
        certificate = None
        if entry.get("certificate"):
            certificate = _certificate(path.parent / entry["certificate"], where)
        if not entry.get("secret") and certificate is None:
            raise ConfigError(f"{where}: give it a 'secret', a 'certificate' or both")
        principals.append(
            _principal(
                where,
                client_id=entry.get("clientId", ""),
                secret=entry.get("secret") or None,
                certificate=certificate,
                tenant=entry.get("tenant") or None,
                subscription=entry.get("subscription") or None,
                display_name=entry.get("displayName"),
                object_id=entry.get("objectId") or None,
                roles=[(f"{where}, role {index}", role) for index, role in enumerate(roles, start=1)],
            )
        )
    return principals, tuple(assignments)


def _configured_role(where: str, principal_id: str, item: object) -> ConfiguredRole:
    """A ``{"role": NAME_OR_ID, "scope": SCOPE}`` entry as a ConfiguredRole; ConfigError naming the entry."""
    if not isinstance(item, dict) or not isinstance(item.get("role"), str) or not isinstance(item.get("scope"), str):
        raise ConfigError(f'{where}: a role is {{"role": "Reader", "scope": "/subscriptions/…"}}')
    role = role_by_name(item["role"]) or role_by_id(item["role"])
    if role is None:
        raise ConfigError(f"{where}: there is no built-in role '{item['role']}'")
    scope = normalise_scope(item["scope"])
    if not is_assignable_scope(scope):
        raise ConfigError(
            f"{where}: the scope '{item['scope']}' is not '/', a subscription, a resource group or a job collection"
        )
    return ConfiguredRole(principal_id=principal_id, role_definition_id=role.id, scope=scope)


def _principal(
    where: str,
    *,
    client_id: str,
    secret: str | None,
    certificate: ClientCertificate | None,
    tenant: str | None,
    subscription: str | None,
    display_name: str | None = None,
    object_id: str | None = None,
    roles: list[tuple[str, object]] | None = None,
) -> Principal:
    for label, value in (
        ("client id", client_id),
        ("tenant", tenant),
        ("subscription", subscription),
        ("object id", object_id),
    ):
        if value is not None and not _NAME.match(value):
            raise ConfigError(f"{where}: the {label} must be 1-100 letters, digits, '.', '_' or '-'")
    oid = object_id or default_object_id(client_id)
    return Principal(
        client_id=client_id,
        secret=secret,
        certificate=certificate,
        tenant=tenant,
        subscription=subscription or DEFAULT_SUBSCRIPTION,
        subscription_given=subscription is not None,
        display_name=display_name or f"Scheduler emulator ({client_id})",
        object_id=oid,
        roles=tuple(_configured_role(place, oid, item) for place, item in roles or []),
    )


def _certificate(path: Path, where: str) -> ClientCertificate:
    try:
        certificate = x509.load_pem_x509_certificate(path.read_bytes())
    except OSError as exc:
        raise ConfigError(f"{where}: cannot read the certificate {path}: {exc.strerror}") from None
    except ValueError:
        raise ConfigError(f"{where}: {path} is not a PEM certificate") from None
    key = certificate.public_key()
    if not isinstance(key, RSAPublicKey):
        raise ConfigError(f"{where}: the certificate {path} must hold an RSA key (Entra ID accepts only RSA)")
    return ClientCertificate(
        public_key=key,
        sha1_thumbprint=certificate.fingerprint(hashes.SHA1()),  # noqa: S303 - a thumbprint, as the clients send
        sha256_thumbprint=certificate.fingerprint(hashes.SHA256()),
    )
