"""SQLAlchemy tables. ARM field paths are not columns: a job's definition is kept in its canonical form
(JSON), next to the columns the service queries and updates (state, counters, next due time)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, cast

from sqlalchemy import (
    JSON,
    BigInteger,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Table,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator

from scheduler_emulator.store.secrets import PREFIX as SEALED
from scheduler_emulator.store.secrets import SecretBox


class UTCDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC datetimes on every backend (SQLite stores naive text, so re-attach UTC on read)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to the store")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)

    # SQLite keeps datetimes as text, "YYYY-MM-DD HH:MM:SS.ffffff" (SQLAlchemy's format, which SQL compares as
    # strings). Written and read here with one C call each instead of SQLAlchemy's %-formatting and parsing
    # on top of the conversions above: the dispatcher binds and reads several per fire.

    def bind_processor(self, dialect: Dialect) -> Any:
        if dialect.name != "sqlite":
            return super().bind_processor(dialect)

        def process(value: datetime | None) -> str | None:
            if value is None:
                return None
            if value.tzinfo is not UTC:
                if value.tzinfo is None:
                    raise ValueError("naive datetime given to the store")
                value = value.astimezone(UTC)
            return value.isoformat(" ", "microseconds")[:26]  # without the "+00:00"

        return process

    def result_processor(self, dialect: Dialect, coltype: object) -> Any:
        if dialect.name != "sqlite":
            return super().result_processor(dialect, coltype)

        def process(value: str | None) -> datetime | None:
            return None if value is None else datetime.fromisoformat(value).replace(tzinfo=UTC)

        return process


def secret_box_of(dialect: Dialect) -> SecretBox | None:
    """The key a database's secrets are sealed with (``Database`` attaches it to its engine's dialect: a
    column type's hooks see nothing else of the engine)."""
    return getattr(dialect, "scheduler_secret_box", None)


class SealedJSON(TypeDecorator[dict[str, Any]]):
    """A job definition as JSON whose secrets are sealed at rest (store.secrets): the service reads and
    writes plaintext, the database holds ciphertext."""

    impl = JSON
    cache_ok = True

    def process_bind_param(self, value: dict[str, Any] | None, dialect: Dialect) -> dict[str, Any] | None:
        box = secret_box_of(dialect)
        return box.seal_definition(value) if box is not None and value is not None else value

    def process_result_value(self, value: dict[str, Any] | None, dialect: Dialect) -> dict[str, Any] | None:
        box = secret_box_of(dialect)
        return box.open_definition(value) if box is not None and value is not None else value

    # SQLite hands the definition over as its JSON text: one without a sealed value (most jobs) is only parsed,
    # not also walked for secret slots to open (a tenth of a dispatcher's claim at 3,000 fires/s).

    def result_processor(self, dialect: Dialect, coltype: object) -> Any:
        loads = self.impl_instance.dialect_impl(dialect).result_processor(dialect, coltype)
        if dialect.name != "sqlite" or loads is None:
            return super().result_processor(dialect, coltype)

        def process(value: str | None) -> dict[str, Any] | None:
            if value is None:
                return None
            loaded = cast(dict[str, Any], loads(value))
            return self.process_result_value(loaded, dialect) if SEALED in value else loaded

        return process


# BigInteger primary keys autoincrement on PostgreSQL; on SQLite only INTEGER does.
BigId = BigInteger().with_variant(Integer(), "sqlite")


class Base(DeclarativeBase):
    type_annotation_map = {datetime: UTCDateTime, dict[str, Any]: JSON}


class JobCollectionRow(Base):
    __tablename__ = "job_collections"
    __table_args__ = (UniqueConstraint("subscription_key", "resource_group_key", "name_key"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    subscription_id: Mapped[str] = mapped_column(String(100))
    subscription_key: Mapped[str] = mapped_column(String(100), index=True)
    resource_group: Mapped[str] = mapped_column(String(100))
    resource_group_key: Mapped[str] = mapped_column(String(100))
    name: Mapped[str] = mapped_column(String(100))
    name_key: Mapped[str] = mapped_column(String(100))
    location: Mapped[str] = mapped_column(String(100))
    tags: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    # `properties` in their canonical form (schemas.job_collection.JobCollectionProperties.canonical).
    properties: Mapped[dict[str, Any]] = mapped_column(JSON)
    sku: Mapped[str] = mapped_column(String(20))  # canonical: Free, Standard, P10Premium, P20Premium
    state: Mapped[str] = mapped_column(String(20))  # canonical: Enabled, Disabled, Suspended, Deleted
    # The classic (2014) surface's label, as the client sent it (base64 on that wire); not shown on ARM.
    label: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]


class JobRow(Base):
    __tablename__ = "jobs"
    __table_args__ = (
        UniqueConstraint("collection_id", "name_key"),
        Index("ix_jobs_next_execution_time", "next_execution_time"),
        # Partial: only the few rows that have a value, so that "IS NULL" (nearly every job) never
        # tempts a planner into walking these indexes instead of the due-time one.
        Index(
            "ix_jobs_run_requested_at",
            "run_requested_at",
            sqlite_where=text("run_requested_at IS NOT NULL"),
            postgresql_where=text("run_requested_at IS NOT NULL"),
        ),
        Index(
            "ix_jobs_lease_owner",
            "lease_owner",
            sqlite_where=text("lease_owner IS NOT NULL"),
            postgresql_where=text("lease_owner IS NOT NULL"),
        ),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    collection_id: Mapped[int] = mapped_column(ForeignKey("job_collections.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(100))
    name_key: Mapped[str] = mapped_column(String(100))
    # `properties` in their canonical form (schemas.job.JobProperties.canonical), secrets included (sealed at rest;
    # never returned: see api.rendering).
    definition: Mapped[dict[str, Any]] = mapped_column(SealedJSON)
    state: Mapped[str] = mapped_column(String(20))  # canonical: Enabled, Disabled, Completed, Faulted
    # The instant the current series was defined (create/replace/enable): past instances before it are skipped.
    series_origin: Mapped[datetime]
    execution_count: Mapped[int] = mapped_column(default=0)
    failure_count: Mapped[int] = mapped_column(default=0)
    faulted_count: Mapped[int] = mapped_column(default=0)
    last_execution_time: Mapped[datetime | None]
    next_execution_time: Mapped[datetime | None]
    # Set by POST .../run: one extra occurrence is due now (the dispatcher clears it when it fires).
    run_requested_at: Mapped[datetime | None]
    # Bumped by every API write, so the dispatcher can tell whether the definition changed under an attempt.
    version: Mapped[int] = mapped_column(default=1)
    repeat_count: Mapped[int] = mapped_column(default=0)  # occurrences started so far
    # The dispatcher running an occurrence of this job; its lease lives as long as that dispatcher's
    # heartbeat (DispatcherRow), so one UPDATE renews every lease a process holds.
    lease_owner: Mapped[str | None] = mapped_column(String(64))
    finished_at: Mapped[datetime | None]  # when the job became Completed or Faulted
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]


class JobHistoryRow(Base):
    __tablename__ = "job_history"
    __table_args__ = (Index("ix_job_history_job_id_id", "job_id", "id"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"))
    history_id: Mapped[str] = mapped_column(String(40))  # unique within its job (by construction), not table-wide
    start_time: Mapped[datetime]
    end_time: Mapped[datetime | None]
    expected_execution_time: Mapped[datetime | None]
    action_name: Mapped[str] = mapped_column(String(20))  # MainAction | ErrorAction
    status: Mapped[str] = mapped_column(String(20))  # Completed | Failed | Postponed
    message: Mapped[str] = mapped_column(Text, default="")
    retry_count: Mapped[int] = mapped_column(default=0)
    repeat_count: Mapped[int] = mapped_column(default=0)


class OccurrenceRow(Base):
    """One occurrence of a job, claimed by one dispatcher. The unique key makes a double fire impossible
    to record; ``finished_at`` stays empty while it runs, so a crashed owner's occurrence can be taken over.
    How far it got is kept with it, written with each failed attempt that has more to come, so that whoever runs
    it next (this dispatcher's next start, or another) resumes with the retries it has left, at the retry's time."""

    __tablename__ = "job_occurrences"
    __table_args__ = (
        UniqueConstraint("job_id", "expected_time"),
        # Partial: only the occurrences with a retry pending (an occurrence's end clears it), which the dashboard
        # lists by time, however many occurrences a day of fires leaves.
        Index(
            "ix_job_occurrences_retry_at",
            "retry_at",
            sqlite_where=text("retry_at IS NOT NULL"),
            postgresql_where=text("retry_at IS NOT NULL"),
        ),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), index=True)
    expected_time: Mapped[datetime]
    repeat_count: Mapped[int]
    owner: Mapped[str] = mapped_column(String(64))  # the dispatcher running it now
    first_owner: Mapped[str | None] = mapped_column(String(64))  # the one that claimed it first (kept on takeover)
    claimed_at: Mapped[datetime]
    finished_at: Mapped[datetime | None]
    outcome: Mapped[str | None] = mapped_column(String(20))  # Completed | Faulted
    # The action whose attempt comes next (MainAction | ErrorAction); NULL: none recorded yet, the main action's
    # first attempt comes next.
    pending_action: Mapped[str | None] = mapped_column(String(20))
    # Attempts of that action made so far: the next attempt's retryCount.
    attempts_made: Mapped[int] = mapped_column(default=0, server_default=text("0"))
    # When the pending retry is due; NULL when none is pending (the error action's first attempt, due at once,
    # or the occurrence has finished).
    retry_at: Mapped[datetime | None]


class DispatcherRow(Base):
    """A running dispatcher process and how long its heartbeat keeps its leases alive."""

    __tablename__ = "dispatchers"

    owner: Mapped[str] = mapped_column(String(64), primary_key=True)
    started_at: Mapped[datetime]
    expires_at: Mapped[datetime]


class EmulatorSettingRow(Base):
    """Values the service keeps about the database itself, e.g. the check value of its secret key."""

    __tablename__ = "emulator_settings"

    name: Mapped[str] = mapped_column(String(100), primary_key=True)
    value: Mapped[str] = mapped_column(Text)


class CloudServiceRow(Base):
    """A classic (2014) cloud service: the classic name of a resource group, with its label and region."""

    __tablename__ = "classic_cloud_services"
    __table_args__ = (UniqueConstraint("subscription_key", "name_key"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    subscription_id: Mapped[str] = mapped_column(String(100))
    subscription_key: Mapped[str] = mapped_column(String(100))
    name: Mapped[str] = mapped_column(String(100))
    name_key: Mapped[str] = mapped_column(String(100))
    label: Mapped[str] = mapped_column(Text)
    description: Mapped[str] = mapped_column(Text)
    geo_region: Mapped[str] = mapped_column(String(100))
    email: Mapped[str | None] = mapped_column(String(256), nullable=True)
    created_at: Mapped[datetime]


class ClassicOperationRow(Base):
    """A classic asynchronous operation (its id is the 202's x-ms-request-id); they complete at once."""

    __tablename__ = "classic_operations"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    subscription_key: Mapped[str] = mapped_column(String(100))
    http_status: Mapped[int]
    created_at: Mapped[datetime] = mapped_column(index=True)


class ResourceGroupRow(Base):
    """A resource group someone created (PUT) or changed (PATCH). Groups that only exist because a collection
    was created in one (implicit: docs/reference/arm-api.md#paths-and-names) have no row: the service lists them from
    the collections."""

    __tablename__ = "resource_groups"
    __table_args__ = (UniqueConstraint("subscription_key", "name_key"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    subscription_id: Mapped[str] = mapped_column(String(100))
    subscription_key: Mapped[str] = mapped_column(String(100))
    name: Mapped[str] = mapped_column(String(100))
    name_key: Mapped[str] = mapped_column(String(100))
    location: Mapped[str] = mapped_column(String(100))
    tags: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    created_at: Mapped[datetime]


class ProviderRegistrationRow(Base):
    """A resource provider's registration state in a subscription, as the last register/unregister left it."""

    __tablename__ = "provider_registrations"
    __table_args__ = (UniqueConstraint("subscription_key", "namespace_key"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    subscription_key: Mapped[str] = mapped_column(String(100))
    namespace_key: Mapped[str] = mapped_column(String(100))
    state: Mapped[str] = mapped_column(String(20))  # Registered | Unregistered


class DeploymentRow(Base):
    """A template deployment at resource-group scope. Secure parameter values are never stored (only their
    names), so nothing here can echo one."""

    __tablename__ = "deployments"
    __table_args__ = (UniqueConstraint("subscription_key", "resource_group_key", "name_key"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    subscription_id: Mapped[str] = mapped_column(String(100))
    subscription_key: Mapped[str] = mapped_column(String(100))
    resource_group: Mapped[str] = mapped_column(String(100))
    resource_group_key: Mapped[str] = mapped_column(String(100))
    name: Mapped[str] = mapped_column(String(100))
    name_key: Mapped[str] = mapped_column(String(100))
    # Accepted | Running | Succeeded | Failed | Canceled
    state: Mapped[str] = mapped_column(String(20))
    mode: Mapped[str] = mapped_column(String(20))
    operation_id: Mapped[str] = mapped_column(String(64), index=True)  # the current run's status URL id
    correlation_id: Mapped[str] = mapped_column(String(64))
    template: Mapped[dict[str, Any]] = mapped_column(JSON)
    template_hash: Mapped[str] = mapped_column(String(40))
    # The parameters as the deployment shows them: secure values left out.
    parameters: Mapped[dict[str, Any]] = mapped_column(JSON)
    # What the run is to do (resources in dependency order, outputs), evaluated at preflight; secure values
    # that resources need sit sealed in job definitions only once deployed.
    plan: Mapped[dict[str, Any]] = mapped_column(JSON)
    outputs: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    output_resources: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    error: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    # onErrorDeployment: {type, deploymentName} resolved at preflight, plus provisioningState once it ran.
    on_error: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    cancel_requested: Mapped[bool] = mapped_column(default=False)
    started_at: Mapped[datetime]
    updated_at: Mapped[datetime]


class DeploymentOperationRow(Base):
    """One resource a deployment run created or updated (or failed to), in the order it ran."""

    __tablename__ = "deployment_operations"

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    deployment_id: Mapped[int] = mapped_column(ForeignKey("deployments.id", ondelete="CASCADE"), index=True)
    operation_id: Mapped[str] = mapped_column(String(40))
    resource_type: Mapped[str] = mapped_column(String(200))
    resource_name: Mapped[str] = mapped_column(String(300))
    target_id: Mapped[str] = mapped_column(Text)
    state: Mapped[str] = mapped_column(String(20))  # Succeeded | Failed
    status_code: Mapped[str] = mapped_column(String(40))
    status_message: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    timestamp: Mapped[datetime]
    duration_ms: Mapped[int] = mapped_column(default=0)


class GenericResourceRow(Base):
    """Another provider's resource deployed with ``--arm-foreign-resources inert``: kept, listed, answered by
    reference() and listKeys(), never run."""

    __tablename__ = "generic_resources"
    __table_args__ = (UniqueConstraint("subscription_key", "resource_group_key", "type_key", "name_key"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    subscription_id: Mapped[str] = mapped_column(String(100))
    subscription_key: Mapped[str] = mapped_column(String(100))
    resource_group: Mapped[str] = mapped_column(String(100))
    resource_group_key: Mapped[str] = mapped_column(String(100))
    type: Mapped[str] = mapped_column(String(200))
    type_key: Mapped[str] = mapped_column(String(200))
    name: Mapped[str] = mapped_column(String(300))
    name_key: Mapped[str] = mapped_column(String(300))
    location: Mapped[str | None] = mapped_column(String(100), nullable=True)
    tags: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    # The resource as the template gave it (minus type/name/apiVersion...), sku and kind included.
    body: Mapped[dict[str, Any]] = mapped_column(JSON)
    keys: Mapped[dict[str, Any]] = mapped_column(JSON)  # generated once, what listKeys() answers (inert: not real)
    created_at: Mapped[datetime]


class ArmOperationRow(Base):
    """A Microsoft.Resources long-running operation (a resource group's deletion), polled at its Location."""

    __tablename__ = "arm_operations"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    subscription_key: Mapped[str] = mapped_column(String(100))
    status: Mapped[str] = mapped_column(String(20))  # Running | Succeeded
    created_at: Mapped[datetime] = mapped_column(index=True)


class RoleAssignmentRow(Base):
    """A role assignment someone made (Microsoft.Authorization roleAssignments PUT, or a template's resource):
    ``role_definition_id`` given to ``principal_id`` at ``scope`` and below it (docs/reference/authorization.md).
    Assignments derived from the configuration are not stored."""

    __tablename__ = "role_assignments"

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    name: Mapped[str] = mapped_column(String(36))  # the assignment's GUID, lower case
    scope: Mapped[str] = mapped_column(String(400))  # as normalised (domain.authorization.normalise_scope)
    scope_key: Mapped[str] = mapped_column(String(400), index=True)  # lower case
    subscription_key: Mapped[str] = mapped_column(String(100), index=True)  # lower case
    role_definition_id: Mapped[str] = mapped_column(String(36))  # the role's GUID
    principal_id: Mapped[str] = mapped_column(String(100))
    principal_key: Mapped[str] = mapped_column(String(100), index=True)  # lower case
    principal_type: Mapped[str] = mapped_column(String(40))
    created_by: Mapped[str | None] = mapped_column(String(100), nullable=True)  # the creator's object id
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]

    __table_args__ = (UniqueConstraint("name"),)


class ManagementCertificateRow(Base):
    """A subscription's management certificate added over the Service Management API: a client presenting it over TLS
    may use the subscription's classic surface (docs/classic-api.md#management-certificates). Certificates named by
    --management-certificate are configuration, not stored. A certificate is public: nothing here is secret."""

    __tablename__ = "management_certificates"

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    subscription_key: Mapped[str] = mapped_column(String(100))  # lower case
    thumbprint: Mapped[str] = mapped_column(String(40), index=True)  # SHA-1 of the DER, upper-case hex
    data: Mapped[bytes] = mapped_column(LargeBinary)  # the certificate, DER
    created_at: Mapped[datetime]

    __table_args__ = (UniqueConstraint("subscription_key", "thumbprint"),)


# The tables, for the statements written in SQLAlchemy Core (store.dispatching, store.dispatch_batches,
# store.repository).
JOBS = cast(Table, JobRow.__table__)
COLLECTIONS = cast(Table, JobCollectionRow.__table__)
HISTORY = cast(Table, JobHistoryRow.__table__)
OCCURRENCES = cast(Table, OccurrenceRow.__table__)
DISPATCHERS = cast(Table, DispatcherRow.__table__)
