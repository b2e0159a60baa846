"""The settings' groups (config.py builds each from the flat Settings, once): what each collaborator is given
instead of the whole Settings. Records only — frozen, keyword-only, the flags' syntax already parsed — so that a
collaborator imports this light module, not the settings' loader."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Literal

from pydantic import SecretStr

from scheduler_emulator.domain.outbound import OutboundPolicy

LogLevel = Literal["critical", "error", "warning", "info", "debug"]
LogFormat = Literal["auto", "json", "text"]
DurationFormat = Literal["auto", "echo", "iso", "timespan"]
ClockMode = Literal["real", "virtual"]
AuthChoice = Literal["issued"]
ForeignResources = Literal["refuse", "inert"]
ProcessMode = Literal["auto", "on", "off"]


DEFAULT_MAX_BODY_BYTES = 64 * 1024  # --max-body-bytes when not given


@dataclass(frozen=True, kw_only=True, slots=True)
class ServerSettings:
    """The HTTP server (serving.py, connections.py, api/access.py's Host guard, api/pipeline.py's body cap)."""

    host: str
    port: int
    https: bool
    cert: Path | None
    key: Path | None
    certificate_dir: Path  # where a self-signed certificate is made (no --cert): DATA_DIR/tls
    allowed_host_names: frozenset[str]  # lower case, besides the loopback ones (docs/reference/security.md)
    max_body_bytes: int
    max_head_bytes: int
    head_timeout: float
    body_timeout: float
    keep_alive_timeout: float
    max_connections: int
    max_heavy_requests: int

    @property
    def self_signed(self) -> bool:
        """Whether the server makes its own certificate (HTTPS without --cert/--key)."""
        return self.https and self.cert is None


@dataclass(frozen=True, kw_only=True, slots=True)
class RoleSettings:
    """What this process serves, and on which processes (serving.py, app.py)."""

    api: bool
    dispatcher: bool
    dispatcher_process: ProcessMode
    supervised: bool  # the dispatcher role run as another emulator process's child (dispatcher/role.py)


@dataclass(frozen=True, kw_only=True, slots=True)
class StoreSettings:
    """The store (store/database.py, at_rest.py): the database, the data directory, the secret key's source and
    the time bounds of PostgreSQL connections (None: derived from ``lease_seconds`` by
    store.database.ConnectionBounds.for_lease; 0: no bound)."""

    data_dir: Path
    database_url: str | None  # as given; ``url`` is the one used
    in_memory: bool
    secret_key: SecretStr | None
    secret_key_file: Path | None
    lease_seconds: float  # the dispatchers' lease (also in DispatchSettings): the bounds' default derives from it
    statement_timeout: float | None
    lock_timeout: float | None
    idle_in_transaction_timeout: float | None
    keepalive: float | None

    @property
    def url(self) -> str:
        """The SQLAlchemy URL the store connects to."""
        if self.in_memory:
            return "sqlite://"
        if self.database_url:
            return self.database_url
        return f"sqlite:///{(self.data_dir / 'scheduler.db').resolve()}"

    @property
    def kind(self) -> str:
        """``sqlite`` or ``postgresql`` (the dialect name), as reported by the health endpoint."""
        return self.url.split(":", 1)[0].split("+", 1)[0]


@dataclass(frozen=True, kw_only=True, slots=True)
class DispatchSettings:
    """The dispatcher (dispatcher/): when it looks for due jobs, its leases, its clock, the retry floor (which the
    API checks jobs against too) and what housekeeping keeps."""

    poll_interval: float
    claim_ahead: float
    lease_seconds: float
    shutdown_grace: float
    clock: ClockMode
    clock_start: datetime | None
    min_retry_interval: float
    history_max_entries: int
    history_max_age_days: float
    finished_job_retention_days: float
    housekeeping_interval: float

    @property
    def virtual_clock(self) -> bool:
        """Whether scheduling time moves only when told (``--clock virtual``)."""
        return self.clock == "virtual"


@dataclass(frozen=True, kw_only=True, slots=True)
class OutboundSettings:
    """The actions' connections (dispatcher/actions/): their time limit, where they may connect
    (docs/reference/security.md#outbound-policy) and the endpoints of the Azure services they call."""

    action_timeout: float
    policy: OutboundPolicy
    oauth_authority: str
    storage_endpoints: dict[str, str]  # storage account (lower case) → queue service endpoint
    servicebus_endpoints: dict[str, str]  # Service Bus namespace (lower case) → endpoint


@dataclass(frozen=True, kw_only=True, slots=True)
class SecuritySettings:
    """Inbound authentication (api/access.py, docs/reference/security.md#inbound-authentication)."""

    auth: AuthChoice | None
    token: SecretStr | None
    jwks: str | None
    audience: str | None
    issuer: str | None
    # --management-certificate: (subscription, certificate file) pairs (api/classic/certificates.py)
    management_certificates: tuple[tuple[str, Path], ...] = ()

    @property
    def mode(self) -> str:
        """``none``, ``token``, ``jwt`` or ``issued``: how inbound requests are authenticated (reported by health)."""
        if self.auth == "issued":
            return "issued"
        if self.token is not None:
            return "token"
        return "jwt" if self.jwks else "none"


@dataclass(frozen=True, kw_only=True, slots=True)
class IdentitySettings:
    """The local token service (api/identity/, docs/reference/token-service.md)."""

    principals: SecretStr | None
    principals_file: Path | None
    subscriptions: str | None  # --subscription SUBSCRIPTION:TENANT entries, joined (api/authorization.py)
    signing_key_file: Path | None  # as given; None: DATA_DIR/token-signing-key.pem (api/identity/signing.py)
    data_dir: Path
    required: bool  # --auth issued: every request needs one of its tokens, so its key is read at start

    @property
    def has_principals(self) -> bool:
        """Whether any principal may sign in (then the signing key is made on first use)."""
        return bool(self.principals or self.principals_file)


@dataclass(frozen=True, kw_only=True, slots=True)
class LoggingSettings:
    """The log lines (logs.py)."""

    level: LogLevel
    format: LogFormat


@dataclass(frozen=True, kw_only=True, slots=True)
class ArmSettings:
    """Choices of the ARM surfaces (api/): how durations are written, whether resource groups must exist, and
    the template front door's treatment of other providers (docs/reference/front-door.md)."""

    duration_format: DurationFormat
    strict_resource_groups: bool
    site_hosts: dict[str, str]  # inert web app name (lower case) → host[:port] that reference() answers
    foreign_resources: ForeignResources


def host_names(text: str) -> frozenset[str]:
    """A comma-separated list of host names, lower case."""
    return frozenset(part.strip().lower() for part in text.split(",") if part.strip())


def parse_mapping(text: str, flag: str) -> dict[str, str]:
    """``NAME=TARGET`` pairs, comma-separated, as {name (lower case): target}; ValueError naming ``flag``."""
    result = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, target = item.partition("=")
        if not sep or not name.strip() or not target.strip():
            raise ValueError(f"{flag} takes NAME=ENDPOINT, not '{item}'")
        result[name.strip().lower()] = target.strip()
    return result
