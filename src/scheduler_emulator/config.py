"""Settings (environment prefix ``SCHEDULER_``), the command line that maps 1:1 onto them, and their groups.

``Settings`` stays flat: one field per flag and environment variable. What a collaborator is given is one of its
groups (``settings.server``, ``.roles``, ``.store``, ``.dispatch``, ``.outbound``, ``.security``, ``.identity``,
``.logging``, ``.arm``): a frozen record built once from the fields, with the flags' syntax already parsed (the
mappings, the CIDR lists). Only app.py and serving.py take a whole Settings apart (tests/test_settings_groups.py)."""

from __future__ import annotations

import argparse
import difflib
import os
from datetime import datetime
from functools import cached_property
from pathlib import Path
from typing import NoReturn, get_args

from pydantic import Field, SecretStr, ValidationError, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from scheduler_emulator.config_groups import (
    DEFAULT_MAX_BODY_BYTES,
    ArmSettings,
    AuthChoice,
    ClockMode,
    DispatchSettings,
    DurationFormat,
    ForeignResources,
    IdentitySettings,
    LogFormat,
    LoggingSettings,
    LogLevel,
    OutboundSettings,
    ProcessMode,
    RoleSettings,
    SecuritySettings,
    ServerSettings,
    StoreSettings,
    host_names,
    parse_mapping,
)
from scheduler_emulator.domain.outbound import DEFAULT_DENY, OutboundPolicy


class ConfigError(ValueError):
    """Settings that cannot work together; the CLI prints the message and exits with status 2."""


class Settings(BaseSettings):
    """Everything an operator can set. Each field is also a CLI flag (``--data-dir`` for ``data_dir``) and lands in
    a group (below)."""

    model_config = SettingsConfigDict(env_prefix="SCHEDULER_", extra="ignore")

    host: str = Field("127.0.0.1", description="Interface to listen on (loopback only by default).")
    port: int = Field(7480, ge=0, le=65535, description="TCP port (0 picks a free one).")
    data_dir: Path = Field(Path("./data"), description="Directory for the SQLite file and the TLS certificate.")
    database_url: str | None = Field(None, description="Any SQLAlchemy URL; default: SQLite in the data dir.")
    in_memory: bool = Field(False, description="Keep everything in memory; lost on exit.")
    https: bool = Field(False, description="Serve HTTPS (self-signed certificate unless --cert/--key).")
    cert: Path | None = Field(None, description="PEM certificate for HTTPS (implies --https).")
    key: Path | None = Field(None, description="PEM private key for HTTPS (implies --https).")
    log_level: LogLevel = Field("info", description="Log verbosity.")
    log_format: LogFormat = Field("auto", description="Log lines as JSON, as text, or auto (text on a terminal).")
    shutdown_grace: float = Field(
        10.0, ge=0, description="Seconds a stopping server lets attempts in flight finish before releasing them."
    )
    api: bool = Field(
        True, description="Serve the ARM API (off: a dispatcher-only process; health and metrics stay up)."
    )
    dispatcher: bool = Field(True, description="Run the dispatcher that fires jobs (off: API only).")
    dispatcher_process: ProcessMode = Field(
        "auto",
        description="With a store on disk (a SQLite file or PostgreSQL), run the dispatcher role in a child process "
        "the emulator starts and supervises (the same program with --no-api), so that the API and the dispatcher "
        "each have a core (auto: when the machine gives the process 2 CPUs or more; never in memory or with --clock "
        "virtual, nor with --no-api or --no-dispatcher).",
    )
    supervised: bool = Field(
        False,
        description="Internal: run as the dispatcher role of the emulator process that started this one (with "
        "--no-api; no listener; ends when that process ends). Set by the emulator for its child, not by hand.",
    )
    min_retry_interval: float = Field(
        15.0,
        gt=0,
        le=15.0,
        description="Shortest retryInterval (seconds) a Standard/Premium job may ask for; lower it for fast tests.",
    )
    action_timeout: float = Field(60.0, gt=0, le=60.0, description="Seconds an action may take before it fails.")
    poll_interval: float = Field(
        5.0, gt=0, description="Seconds between due-job checks when nothing wakes the dispatcher."
    )
    claim_ahead: float = Field(
        1.0,
        ge=0,
        le=10,
        description="Seconds before an occurrence is due that the dispatcher claims it, so that it fires on time "
        "(an API change that lands in this window still applies: the occurrence is re-checked before it fires).",
    )
    lease_seconds: float = Field(
        30.0, gt=0, description="How long a dispatcher's leases outlive its last heartbeat (then others take over)."
    )
    # Time bounds on every PostgreSQL connection (store.database.ConnectionBounds), by default derived from the
    # lease: no frozen or cut-off process may hold locks others need for longer than a lease. 0: no bound.
    db_statement_timeout: float | None = Field(
        None, ge=0, description="Seconds a PostgreSQL statement may run (0: no bound); default --lease-seconds."
    )
    db_lock_timeout: float | None = Field(
        None,
        ge=0,
        description="Seconds a PostgreSQL statement may wait for a lock (0: no bound); default a third of "
        "--lease-seconds, at least 1.",
    )
    db_idle_in_transaction_timeout: float | None = Field(
        None,
        ge=0,
        description="Seconds PostgreSQL lets a session sit idle inside a transaction before ending it, releasing "
        "its locks (0: no bound); default a third of --lease-seconds, at least 1.",
    )
    db_keepalive: float | None = Field(
        None,
        ge=0,
        description="Seconds after which a silent PostgreSQL connection is found dead, at both ends (TCP "
        "keepalives and tcp_user_timeout; 0: the system's defaults); default half of --lease-seconds, at least 3.",
    )
    history_max_entries: int = Field(1000, ge=1, description="History entries kept per job.")
    history_max_age_days: float = Field(60.0, gt=0, description="Days a history entry is kept.")
    finished_job_retention_days: float = Field(
        60.0, gt=0, description="Days a Completed or Faulted job is kept before it is deleted."
    )
    storage_endpoints: str = Field(
        "",
        description="Storage account → queue endpoint mappings, ACCOUNT=URL, comma-separated "
        "(e.g. devstoreaccount1=http://127.0.0.1:10001/devstoreaccount1); other accounts use "
        "https://ACCOUNT.queue.core.windows.net.",
    )
    servicebus_endpoints: str = Field(
        "",
        description="Service Bus namespace → endpoint mappings, NAMESPACE=HOST[:PORT] or NAMESPACE=amqp://HOST:PORT "
        "(plain TCP, the SDK's development-emulator mode), comma-separated; other namespaces use "
        "NAMESPACE.servicebus.windows.net.",
    )
    oauth_authority: str = Field(
        "https://login.microsoftonline.com",
        description="Azure AD authority for ActiveDirectoryOAuth actions "
        "(tokens from {authority}/{tenant}/oauth2/token).",
    )
    clock: ClockMode = Field(
        "real",
        description="real: jobs run on the wall clock. virtual: scheduling time moves only when told "
        "(POST /_emulator/clock), kept in the database; for tests.",
    )
    clock_start: datetime | None = Field(
        None, description="With --clock virtual: its first value (ISO-8601 UTC); default the real time at first start."
    )
    duration_format: DurationFormat = Field(
        "auto",
        description="How responses write durations (retryInterval, timeToLive): auto (by the client's "
        "User-Agent), or as for every client echo (as sent), iso (ISO-8601) or timespan "
        "(azure-mgmt-scheduler 1.1.3/2.0.0: TimeSpan with days x30, lists in ISO-8601).",
    )
    housekeeping_interval: float = Field(
        300.0, gt=0, description="Seconds between clean-ups of old history and finished jobs."
    )
    # --- security (docs/reference/security.md) ---
    auth_token: SecretStr | None = Field(
        None, description="Require 'Authorization: Bearer TOKEN' on every request but health (default: any or none)."
    )
    auth_jwks: str | None = Field(
        None, description="Require RS256/ES256 JWTs signed by a key of this JWKS (a file or an http(s) URL)."
    )
    auth_audience: str | None = Field(None, description="The 'aud' a JWT must carry (with --auth-jwks).")
    auth_issuer: str | None = Field(None, description="The 'iss' a JWT must carry (with --auth-jwks; optional).")
    auth: AuthChoice | None = Field(
        None,
        description="issued: require a token issued by this server's own token service "
        "(docs/reference/token-service.md) on every request but health, the dashboard's page, the token service "
        "and /metadata/endpoints.",
    )
    # --- the local token service (docs/reference/token-service.md) ---
    principals: SecretStr | None = Field(
        None,
        description="Service principals the token service issues tokens to: CLIENT_ID:SECRET[:TENANT[:SUBSCRIPTION]], "
        "separated by commas or spaces (no TENANT: any tenant; no SUBSCRIPTION: the all-zero one).",
    )
    principals_file: Path | None = Field(
        None,
        description='A JSON file of service principals: {"principals": [{"clientId", "secret"?, "certificate"? '
        '(a PEM file, relative to this one), "tenant"?, "subscription"?, "displayName"?}]}.',
    )
    management_certificates: str | None = Field(
        None,
        description="Management certificates of the classic surface, SUBSCRIPTION:FILE (a PEM or DER .cer file), "
        "separated by commas: a client presenting one over HTTPS may use that subscription's classic API (with an "
        "auth flag and --https; more are added over the API; docs/classic-api.md#management-certificates).",
    )
    subscriptions: str | None = Field(
        None,
        description="Subscriptions and the tenant each belongs to, SUBSCRIPTION:TENANT, separated by commas or "
        "spaces (with --auth issued or --auth-jwks; principals' subscriptions are declared with them; "
        "docs/reference/authorization.md#tenants-and-subscriptions).",
    )
    token_signing_key_file: Path | None = Field(
        None,
        description="The RSA key (PEM) the token service signs with (created 0600 on first use; default "
        "DATA_DIR/token-signing-key.pem). Processes that accept each other's tokens share it.",
    )
    outbound_deny: str = Field(
        DEFAULT_DENY,
        description="CIDR ranges jobs' HTTP actions (their redirects and OAuth token requests) may not connect to, "
        "judged on the resolved address, comma-separated; 'none' clears the list.",
    )
    outbound_allow: str = Field(
        "", description="When set, the only CIDR ranges jobs' HTTP actions may connect to, comma-separated."
    )
    secret_key_file: Path | None = Field(
        None,
        description="File holding the key that encrypts stored secrets (created on first start; default "
        "DATA_DIR/secret.key). Processes sharing a database must share the key.",
    )
    # Env only (SCHEDULER_SECRET_KEY): a key on the command line would show in the process list.
    secret_key: SecretStr | None = Field(None, description="The key that encrypts stored secrets (overrides the file).")
    allowed_hosts: str = Field(
        "",
        description="Host names besides localhost, 127.0.0.1 and [::1] that requests may name in their Host "
        "header while the service listens on loopback, comma-separated (DNS-rebinding guard).",
    )

    max_body_bytes: int = Field(
        DEFAULT_MAX_BODY_BYTES,
        ge=1024,
        description="Largest request body in bytes (413 beyond; counted while it is read).",
    )
    max_head_bytes: int = Field(
        16 * 1024, ge=1024, description="Largest request head (request line and headers) in bytes (431 beyond)."
    )
    head_timeout: float = Field(
        10.0, gt=0, description="Seconds a client has to send a whole request head before it is disconnected."
    )
    body_timeout: float = Field(
        30.0, gt=0, description="Seconds a client has to send a whole request body before it is disconnected."
    )
    # Longer than the idle expiry of the clients' own pools (httpx 5 s, aiohttp 15 s, .NET 60 s, Go 90 s), so that
    # the client retires an idle connection first: a server closing first races the client's next request on it
    # (connections.py). IIS's default is 120 s too.
    keep_alive_timeout: float = Field(
        120.0,
        gt=0,
        description="Seconds an idle keep-alive connection is kept open (longer than clients' own pool expiry, so "
        "that they close it first; at --max-connections an idle one makes room for a new one).",
    )
    max_connections: int = Field(
        1000,
        ge=1,
        description="Most open client connections; beyond it an idle kept-alive one is closed to make room, or, "
        "with none idle, the new one is refused at once (503, not queued).",
    )
    max_heavy_requests: int = Field(
        2, ge=1, description="Most CPU-heavy requests (recurrence previews) computed at once; 429 beyond."
    )
    # --- the ARM front door (docs/reference/front-door.md) ---
    arm_site_hosts: str = Field(
        "",
        description="SITE=HOST[:PORT] pairs, comma-separated: the host name an inert web app (Microsoft.Web/sites) "
        "named SITE answers in reference() (default SITE.azurewebsites.net), so a template's job calling it reaches "
        "a local stand-in.",
    )
    strict_resource_groups: bool = Field(
        False,
        description="A job collection PUT into a resource group nobody created answers 404 ResourceGroupNotFound "
        "(as ARM does) instead of creating the group implicitly.",
    )
    arm_foreign_resources: ForeignResources = Field(
        "refuse",
        description="Other providers' resources in a template: refuse the deployment at preflight, naming each "
        "type, or keep them as inert resources (listed, answered by reference() and listKeys(), never run).",
    )

    @model_validator(mode="after")
    def _check_combination(self) -> Settings:
        if self.in_memory and self.database_url:
            raise ValueError("--in-memory and --database-url cannot be used together: choose one store")
        if (self.cert is None) != (self.key is None):
            raise ValueError("--cert and --key must be given together")
        if self.cert is not None:
            self.https = True
        if not self.api and not self.dispatcher:
            raise ValueError("--no-api and --no-dispatcher together leave nothing to run")
        if self.supervised and (self.api or not self.dispatcher):
            raise ValueError("--supervised is the dispatcher role of another emulator process: it needs --no-api")
        if self.auth_token is not None and not self.auth_token.get_secret_value():
            raise ValueError("--auth-token must not be empty")
        if self.auth_token is not None and self.auth_jwks:
            raise ValueError("--auth-token and --auth-jwks cannot be used together: choose one")
        if self.auth_jwks and not self.auth_audience:
            raise ValueError("--auth-jwks needs --auth-audience (the 'aud' tokens must carry)")
        if self.auth == "issued" and (self.auth_token is not None or self.auth_jwks):
            raise ValueError("--auth issued cannot be combined with --auth-token or --auth-jwks: choose one")
        if self.auth == "issued" and not (
            (self.principals and self.principals.get_secret_value().strip()) or self.principals_file
        ):
            raise ValueError("--auth issued needs a principal to sign in with: --principal or --principals-file")
        if (self.auth_audience or self.auth_issuer) and not self.auth_jwks:
            raise ValueError("--auth-audience and --auth-issuer only apply with --auth-jwks")
        if self.management_certificates and not self.https:
            raise ValueError("--management-certificate needs --https: a client certificate is sent over TLS only")
        if self.management_certificates and not (self.auth or self.auth_token is not None or self.auth_jwks):
            raise ValueError(
                "--management-certificate applies with an auth flag (--auth issued, --auth-jwks, --auth-token): "
                "without one the classic surface checks no credentials"
            )
        if self.clock_start is not None:
            if self.clock != "virtual":
                raise ValueError("--clock-start only applies with --clock virtual")
            if self.clock_start.tzinfo is None:
                raise ValueError("--clock-start needs a time zone, e.g. 2030-01-01T00:00:00Z")
        # The groups that parse a flag's syntax (the endpoint and site mappings, the CIDR lists), so that a
        # mistake stops the start. Built here, after the fields above are final; each is kept (cached_property).
        self.outbound  # noqa: B018
        self.arm  # noqa: B018
        self.security  # noqa: B018
        return self

    # The groups: what each collaborator is given (a whole Settings stops at app.py and serving.py). Each is built
    # once, on first use, from the fields above; the fields stay flat because each is one flag and one variable.

    @cached_property
    def server(self) -> ServerSettings:
        """The HTTP server: where it listens, TLS, and the connection and request limits."""
        return ServerSettings(
            host=self.host,
            port=self.port,
            https=self.https,
            cert=self.cert,
            key=self.key,
            certificate_dir=self.data_dir / "tls",
            allowed_host_names=host_names(self.allowed_hosts),
            max_body_bytes=self.max_body_bytes,
            max_head_bytes=self.max_head_bytes,
            head_timeout=self.head_timeout,
            body_timeout=self.body_timeout,
            keep_alive_timeout=self.keep_alive_timeout,
            max_connections=self.max_connections,
            max_heavy_requests=self.max_heavy_requests,
        )

    @cached_property
    def roles(self) -> RoleSettings:
        """What this process serves (the API, the dispatcher) and whether the dispatcher runs in a child."""
        return RoleSettings(
            api=self.api,
            dispatcher=self.dispatcher,
            dispatcher_process=self.dispatcher_process,
            supervised=bool(self.supervised),
        )

    @cached_property
    def store(self) -> StoreSettings:
        """The database, the data directory and the key that seals stored secrets."""
        return StoreSettings(
            data_dir=self.data_dir,
            database_url=self.database_url,
            in_memory=self.in_memory,
            secret_key=self.secret_key,
            secret_key_file=self.secret_key_file,
            lease_seconds=self.lease_seconds,
            statement_timeout=self.db_statement_timeout,
            lock_timeout=self.db_lock_timeout,
            idle_in_transaction_timeout=self.db_idle_in_transaction_timeout,
            keepalive=self.db_keepalive,
        )

    @cached_property
    def dispatch(self) -> DispatchSettings:
        """The dispatcher's pacing, leases, clock, retry floor and retention."""
        return DispatchSettings(
            poll_interval=self.poll_interval,
            claim_ahead=self.claim_ahead,
            lease_seconds=self.lease_seconds,
            shutdown_grace=self.shutdown_grace,
            clock=self.clock,
            clock_start=self.clock_start,
            min_retry_interval=self.min_retry_interval,
            history_max_entries=self.history_max_entries,
            history_max_age_days=self.history_max_age_days,
            finished_job_retention_days=self.finished_job_retention_days,
            housekeeping_interval=self.housekeeping_interval,
        )

    @cached_property
    def outbound(self) -> OutboundSettings:
        """Where and how the actions connect."""
        return OutboundSettings(
            action_timeout=self.action_timeout,
            policy=OutboundPolicy.from_flags(self.outbound_deny, self.outbound_allow),
            oauth_authority=self.oauth_authority,
            storage_endpoints=parse_mapping(self.storage_endpoints, "--storage-endpoint"),
            servicebus_endpoints=parse_mapping(self.servicebus_endpoints, "--servicebus-endpoint"),
        )

    @cached_property
    def security(self) -> SecuritySettings:
        """How inbound requests are authenticated."""
        return SecuritySettings(
            auth=self.auth,
            token=self.auth_token,
            jwks=self.auth_jwks,
            audience=self.auth_audience,
            issuer=self.auth_issuer,
            management_certificates=management_certificate_entries(self.management_certificates),
        )

    @cached_property
    def identity(self) -> IdentitySettings:
        """The local token service: its principals and its signing key."""
        return IdentitySettings(
            principals=self.principals,
            principals_file=self.principals_file,
            subscriptions=self.subscriptions,
            signing_key_file=self.token_signing_key_file,
            data_dir=self.data_dir,
            required=self.auth == "issued",
        )

    @cached_property
    def logging(self) -> LoggingSettings:
        """The log lines: their level and format."""
        return LoggingSettings(level=self.log_level, format=self.log_format)

    @cached_property
    def arm(self) -> ArmSettings:
        """The ARM surfaces' choices: duration spellings, resource groups and the template front door."""
        return ArmSettings(
            duration_format=self.duration_format,
            strict_resource_groups=self.strict_resource_groups,
            site_hosts=parse_mapping(self.arm_site_hosts, "--arm-site-host"),
            foreign_resources=self.arm_foreign_resources,
        )


def usable_cpus() -> int:
    """How many CPUs this process may run on: its affinity mask where the system has one (a container's or
    ``taskset``'s limit), else the machine's count."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def load_settings(**overrides: object) -> Settings:
    """Settings from the environment, with explicit overrides (CLI flags) taking precedence."""
    try:
        return Settings(**{k: v for k, v in overrides.items() if v is not None})  # type: ignore[arg-type]
    except ValidationError as exc:
        problems = "; ".join(
            (f"--{'-'.join(str(p) for p in err['loc']).replace('_', '-')}: " if err["loc"] else "")
            + err["msg"].removeprefix("Value error, ")
            for err in exc.errors()
        )
        raise ConfigError(problems) from None


class FlagParser(argparse.ArgumentParser):
    """argparse with a one-line error: the problem, a close match for a mistyped flag, and a pointer to
    ``--help`` (not the whole usage, which is as long as the flag list)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}{self._hint(message)}; see {self.prog} --help\n")

    def _hint(self, message: str) -> str:
        """`` (did you mean --https?)`` for the unrecognized flags that are close to one of ours."""
        if not message.startswith("unrecognized arguments:"):
            return ""
        flags = [name for name in self._option_string_actions if name.startswith("--")]
        given = [word.split("=", 1)[0] for word in message.split(":", 1)[1].split() if word.startswith("-")]
        close = [match for word in given for match in difflib.get_close_matches(word, flags, n=1, cutoff=0.6)]
        return f" (did you mean {', '.join(dict.fromkeys(close))}?)" if close else ""


def shown_default(name: str) -> str:
    """How ``--help`` shows the default of the field ``name``: the value the service uses (on/off for a
    switch, the data directory resolved against the current directory), nothing when it is unset."""
    value = Settings.model_fields[name].default
    if value is None or value == "":
        return ""
    if isinstance(value, bool):
        text = "on" if value else "off"
    elif isinstance(value, float):
        text = f"{value:g}"
    elif isinstance(value, Path):
        text = f"{value if value.is_absolute() else f'./{value}'} (here {value.resolve()})"
    else:
        text = str(value)
    return f"; default {text}".replace("%", "%%")  # argparse expands %-formats in help texts


def management_certificate_entries(value: str | None) -> tuple[tuple[str, Path], ...]:
    """(subscription, file) of each SUBSCRIPTION:FILE entry; ValueError naming an entry that is not one."""
    entries = []
    for entry in (value or "").split(","):
        if not entry.strip():
            continue
        subscription, _, path = entry.strip().partition(":")
        if not subscription or not path:
            raise ValueError(f"--management-certificate '{entry.strip()}' is not SUBSCRIPTION:FILE")
        entries.append((subscription, Path(path)))
    return tuple(entries)


def build_parser() -> argparse.ArgumentParser:
    """The ``scheduler-emulator`` command line; every flag maps onto a Settings field."""
    fields = Settings.model_fields
    parser = FlagParser(
        prog="scheduler-emulator",
        usage="%(prog)s [FLAG ...]",
        description="Azure Scheduler (Microsoft.Scheduler) emulator. Every flag can also be set with "
        "an environment variable SCHEDULER_<FLAG> (e.g. SCHEDULER_PORT=8443).",
    )

    def describe(name: str) -> str:
        return f"{fields[name].description} Env SCHEDULER_{name.upper()}{shown_default(name)}."

    parser.add_argument("--host", help=describe("host"))
    parser.add_argument("--port", type=int, help=describe("port"))
    parser.add_argument("--data-dir", type=Path, help=describe("data_dir"))
    parser.add_argument("--database-url", help=describe("database_url"))
    parser.add_argument("--in-memory", action="store_true", default=None, help=describe("in_memory"))
    parser.add_argument("--https", action="store_true", default=None, help=describe("https"))
    parser.add_argument("--cert", type=Path, help=describe("cert"))
    parser.add_argument("--key", type=Path, help=describe("key"))
    parser.add_argument("--log-level", choices=list(get_args(LogLevel)), help=describe("log_level"))
    parser.add_argument("--log-format", choices=list(get_args(LogFormat)), help=describe("log_format"))
    parser.add_argument("--shutdown-grace", type=float, help=describe("shutdown_grace"))
    parser.add_argument("--api", action=argparse.BooleanOptionalAction, default=None, help=describe("api"))
    parser.add_argument(
        "--dispatcher", action=argparse.BooleanOptionalAction, default=None, help=describe("dispatcher")
    )
    parser.add_argument(
        "--dispatcher-process", choices=list(get_args(ProcessMode)), help=describe("dispatcher_process")
    )
    parser.add_argument("--supervised", action="store_true", default=None, help=describe("supervised"))
    parser.add_argument("--min-retry-interval", type=float, help=describe("min_retry_interval"))
    parser.add_argument("--action-timeout", type=float, help=describe("action_timeout"))
    parser.add_argument("--poll-interval", type=float, help=describe("poll_interval"))
    parser.add_argument("--claim-ahead", type=float, help=describe("claim_ahead"))
    parser.add_argument("--lease-seconds", type=float, help=describe("lease_seconds"))
    for name in ("db_statement_timeout", "db_lock_timeout", "db_idle_in_transaction_timeout", "db_keepalive"):
        help_text = f"{fields[name].description} Env SCHEDULER_{name.upper()}."
        parser.add_argument("--" + name.replace("_", "-"), type=float, metavar="SECONDS", help=help_text)
    parser.add_argument("--history-max-entries", type=int, help=describe("history_max_entries"))
    parser.add_argument("--history-max-age-days", type=float, help=describe("history_max_age_days"))
    parser.add_argument("--finished-job-retention-days", type=float, help=describe("finished_job_retention_days"))
    parser.add_argument("--housekeeping-interval", type=float, help=describe("housekeeping_interval"))
    for name in (
        "max_body_bytes",
        "max_head_bytes",
        "head_timeout",
        "body_timeout",
        "keep_alive_timeout",
        "max_connections",
        "max_heavy_requests",
    ):
        kind = int if fields[name].annotation is int else float
        parser.add_argument("--" + name.replace("_", "-"), type=kind, help=describe(name))
    parser.add_argument(
        "--storage-endpoint",
        action="append",
        metavar="ACCOUNT=URL",
        help=describe("storage_endpoints") + " Repeatable.",
    )
    parser.add_argument(
        "--servicebus-endpoint",
        action="append",
        metavar="NAMESPACE=ENDPOINT",
        help=describe("servicebus_endpoints") + " Repeatable.",
    )
    parser.add_argument("--oauth-authority", help=describe("oauth_authority"))
    parser.add_argument("--clock", choices=list(get_args(ClockMode)), help=describe("clock"))
    parser.add_argument("--clock-start", metavar="TIME", help=describe("clock_start"))
    parser.add_argument("--duration-format", choices=list(get_args(DurationFormat)), help=describe("duration_format"))
    parser.add_argument("--auth-token", metavar="TOKEN", help=describe("auth_token"))
    parser.add_argument("--auth-jwks", metavar="FILE_OR_URL", help=describe("auth_jwks"))
    parser.add_argument("--auth-audience", metavar="AUD", help=describe("auth_audience"))
    parser.add_argument("--auth-issuer", metavar="ISS", help=describe("auth_issuer"))
    parser.add_argument("--auth", choices=list(get_args(AuthChoice)), help=describe("auth"))
    parser.add_argument(
        "--management-certificate",
        action="append",
        metavar="SUBSCRIPTION:FILE",
        help=describe("management_certificates").replace(", separated by commas", "") + " Repeatable.",
    )
    parser.add_argument(
        "--principal",
        action="append",
        metavar="CLIENT_ID:SECRET[:TENANT[:SUBSCRIPTION]]",
        help=describe("principals").replace(", separated by commas or spaces", "")
        + " Repeatable. A secret on the command line shows in the process list: prefer SCHEDULER_PRINCIPALS or "
        "--principals-file.",
    )
    parser.add_argument("--principals-file", type=Path, metavar="FILE", help=describe("principals_file"))
    parser.add_argument(
        "--subscription",
        action="append",
        metavar="SUBSCRIPTION:TENANT",
        help=describe("subscriptions").replace(", separated by commas or spaces", "") + " Repeatable.",
    )
    parser.add_argument("--token-signing-key-file", type=Path, metavar="FILE", help=describe("token_signing_key_file"))
    parser.add_argument("--outbound-deny", metavar="CIDRS", help=describe("outbound_deny"))
    parser.add_argument("--outbound-allow", metavar="CIDRS", help=describe("outbound_allow"))
    parser.add_argument("--secret-key-file", type=Path, metavar="FILE", help=describe("secret_key_file"))
    parser.add_argument("--allowed-hosts", metavar="NAMES", help=describe("allowed_hosts"))
    parser.add_argument(
        "--strict-resource-groups", action="store_true", default=None, help=describe("strict_resource_groups")
    )
    parser.add_argument(
        "--arm-site-host", action="append", metavar="SITE=HOST[:PORT]", help=describe("arm_site_hosts") + " Repeatable."
    )
    parser.add_argument(
        "--arm-foreign-resources", choices=list(get_args(ForeignResources)), help=describe("arm_foreign_resources")
    )
    return parser


def settings_from_args(argv: list[str] | None = None) -> Settings:
    """Parse ``argv`` and merge it over the environment."""
    args = vars(build_parser().parse_args(argv))
    for repeated, field in (
        ("storage_endpoint", "storage_endpoints"),
        ("servicebus_endpoint", "servicebus_endpoints"),
        ("principal", "principals"),
        ("subscription", "subscriptions"),
        ("management_certificate", "management_certificates"),
        ("arm_site_host", "arm_site_hosts"),
    ):
        values = args.pop(repeated)
        args[field] = ",".join(values) if values else None
    return load_settings(**args)
