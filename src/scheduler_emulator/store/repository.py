"""The queries the API and the dispatcher run. Nothing else in the service issues SQL."""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime
from functools import cache
from typing import Any

from sqlalchemy import (
    Boolean,
    ColumnElement,
    Connection,
    Insert,
    Integer,
    Select,
    Text,
    bindparam,
    delete,
    func,
    insert,
    literal_column,
    select,
)
from sqlalchemy import cast as sql_cast
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.orm import Session, aliased

from scheduler_emulator.store.models import (
    JOBS,
    ArmOperationRow,
    ClassicOperationRow,
    CloudServiceRow,
    DeploymentOperationRow,
    DeploymentRow,
    EmulatorSettingRow,
    GenericResourceRow,
    JobCollectionRow,
    JobHistoryRow,
    JobRow,
    ManagementCertificateRow,
    OccurrenceRow,
    ProviderRegistrationRow,
    ResourceGroupRow,
    RoleAssignmentRow,
)

FINAL_STATES = ("Completed", "Faulted")


@cache
def _advisory_lock() -> Select[Any]:
    return select(func.pg_advisory_xact_lock(func.hashtext(bindparam("key", type_=Text))))


def advisory_lock(session: Session, key: str) -> None:
    """Hold the PostgreSQL advisory lock named ``key`` until the transaction ends (store.write_scope, which takes
    the API's write locks so that writes checking limits before writing never interleave)."""
    session.execute(_advisory_lock(), {"key": key})


# The statements nearly every request runs are built once, with bound parameters: building one costs more
# than executing it (SQLAlchemy constructs the clauses and then computes their cache key at every call).


def _named_collection() -> tuple[ColumnElement[bool], ...]:
    """The collection matching the bound names ``subscription``, ``resource_group`` and ``name`` (lowercased), over
    the table's own columns: the same clause serves the ORM's selects and the Core ones run on a Connection."""
    table = JobCollectionRow.__table__.c
    return (
        table.subscription_key == bindparam("subscription"),
        table.resource_group_key == bindparam("resource_group"),
        table.name_key == bindparam("name"),
    )


def _names(subscription: str, resource_group: str, name: str, job_name: str | None = None) -> dict[str, str]:
    """The bound parameters of the statements above: the names as their keys (lowercase)."""
    names = {"subscription": subscription.lower(), "resource_group": resource_group.lower(), "name": name.lower()}
    if job_name is not None:
        names["job"] = job_name.lower()
    return names


@cache
def _collection_by_names() -> Select[JobCollectionRow]:
    return select(JobCollectionRow).where(*_named_collection())


@cache
def _collection_and_job() -> Select[JobCollectionRow, JobRow]:
    """The named collection with its job named by the bound ``job`` (None when it has none)."""
    return (
        select(JobCollectionRow, JobRow)
        .outerjoin(JobRow, (JobRow.collection_id == JobCollectionRow.id) & (JobRow.name_key == bindparam("job")))
        .where(*_named_collection())
    )


@cache
def _collection_job_and_count() -> Select[JobCollectionRow, JobRow, int]:
    """As _collection_and_job, with the collection's job count."""
    counted = aliased(JobRow)
    count = select(func.count()).where(counted.collection_id == JobCollectionRow.id).scalar_subquery()
    return _collection_and_job().add_columns(count)


@cache
def _job_by_name() -> Select[JobRow]:
    return select(JobRow).where(JobRow.collection_id == bindparam("collection"), JobRow.name_key == bindparam("name"))


def find_collection(session: Session, subscription: str, resource_group: str, name: str) -> JobCollectionRow | None:
    """The collection, matching all three names case-insensitively."""
    return session.scalar(_collection_by_names(), _names(subscription, resource_group, name))


def list_collections(
    session: Session, subscription: str, resource_group: str | None, *, skip: int, limit: int
) -> list[JobCollectionRow]:
    """A page of a subscription's (or resource group's) collections, in a stable order."""
    query = select(JobCollectionRow).where(JobCollectionRow.subscription_key == subscription.lower())
    if resource_group is not None:
        query = query.where(JobCollectionRow.resource_group_key == resource_group.lower())
    return list(session.scalars(query.order_by(JobCollectionRow.id).offset(skip).limit(limit)))


def count_collections(session: Session, subscription: str, sku: str | None = None) -> int:
    query = (
        select(func.count())
        .select_from(JobCollectionRow)
        .where(JobCollectionRow.subscription_key == subscription.lower())
    )
    if sku is not None:
        query = query.where(JobCollectionRow.sku == sku)
    return session.scalar(query) or 0


def find_collection_and_job(
    session: Session, subscription: str, resource_group: str, name: str, job_name: str
) -> tuple[JobCollectionRow, JobRow | None, int] | None:
    """The collection (as find_collection), its job named ``job_name`` if any, and its job count, in one
    statement (what a job write needs to know; None when there is no such collection)."""
    row = session.execute(_collection_job_and_count(), _names(subscription, resource_group, name, job_name)).first()
    return None if row is None else (row[0], row[1], int(row[2]))


@dataclass(frozen=True, slots=True)
class CollectionRead:
    """A collection as a read of one statement gives it (read_collection, read_collection_with_job): the columns its
    answer shows (api.rendering.collection_to_wire), read off the row without an ORM entity or session."""

    id: int
    subscription_id: str
    resource_group: str
    name: str
    location: str
    tags: dict[str, Any] | None
    properties: dict[str, Any]
    sku: str
    state: str


@dataclass(frozen=True, slots=True)
class JobRead:
    """A job as a read of one statement gives it (read_collection_with_job): the columns its answer shows
    (api.rendering.job_to_wire)."""

    name: str
    definition: dict[str, Any]
    state: str
    execution_count: int
    failure_count: int
    faulted_count: int
    last_execution_time: datetime | None
    next_execution_time: datetime | None


# The records' columns, in their fields' order: a column a record gains is read by naming it there.
_COLLECTION_COLUMNS = tuple(JobCollectionRow.__table__.c[field.name] for field in fields(CollectionRead))
_JOB_COLUMNS = tuple(JOBS.c[field.name] for field in fields(JobRead))


@cache
def _collection_read() -> Select[Any]:
    return select(*_COLLECTION_COLUMNS).where(*_named_collection())


@cache
def _collection_and_job_read() -> Select[Any]:
    collection = JobCollectionRow.__table__
    its_job = (JOBS.c.collection_id == collection.c.id) & (JOBS.c.name_key == bindparam("job"))
    return (
        select(*_COLLECTION_COLUMNS, *_JOB_COLUMNS)
        .select_from(collection.outerjoin(JOBS, its_job))
        .where(*_named_collection())
    )


def _collection_version() -> ColumnElement[str]:
    """A collection row's version, which every change to the row changes: the transaction that wrote it
    (PostgreSQL's ``xmin``), changed by every UPDATE (never by a row lock). The guarded insert's function compares
    it the same way (``xmin::text``: migrations/versions/0012_job_slot_function.py)."""
    return sql_cast(literal_column("job_collections.xmin"), Text)


@cache
def _collection_job_id_count_and_version() -> Select[Any]:
    """The named collection's columns (CollectionRead), the id of its job named by the bound ``job`` (None when it
    has none), its job count and its row's version: no entity (a create never uses the job's columns, and reads
    the collection's as a record, on the session's connection)."""
    collection = JobCollectionRow.__table__
    counted = JOBS.alias("counted")
    count = select(func.count()).where(counted.c.collection_id == collection.c.id).scalar_subquery()
    its_job = (JOBS.c.collection_id == collection.c.id) & (JOBS.c.name_key == bindparam("job"))
    return (
        select(*_COLLECTION_COLUMNS, JOBS.c.id, count, _collection_version())
        .select_from(collection.outerjoin(JOBS, its_job))
        .where(*_named_collection())
    )


@dataclass(frozen=True, slots=True)
class CreateBasis:
    """What a new job is built from before its collection's lock is taken (find_create_basis): the collection,
    the id of a job already holding the name (None: the name is free), the collection's job count and its row's
    version, which the guarded insert checks (insert_job_if_unchanged)."""

    collection: CollectionRead
    existing_id: int | None
    job_count: int
    version: str


def find_create_basis(
    session: Session, subscription: str, resource_group: str, name: str, job_name: str
) -> CreateBasis | None:
    """The collection (as find_collection) with what a guarded create of its job ``job_name`` needs, in one
    statement (PostgreSQL only: store.write_scope.PostgresWriteScope); None when there is no such collection."""
    found = (
        session.connection()
        .execute(_collection_job_id_count_and_version(), _names(subscription, resource_group, name, job_name))
        .first()
    )
    if found is None:
        return None
    existing_id, count, version = found[len(_COLLECTION_COLUMNS) :]
    return CreateBasis(
        collection=CollectionRead(*found[: len(_COLLECTION_COLUMNS)]),
        existing_id=existing_id,
        job_count=int(count),
        version=str(version),
    )


# A new job's row: every column of the table but its id, read from the JobRow the service built (a column added to
# store.models.JobRow, with its migration, is written here without naming it).
_NEW_JOB_COLUMNS = tuple(column.key for column in JOBS.c if not column.primary_key)


def _new_job_values(job: JobRow) -> dict[str, Any]:
    """``job``'s column values for its INSERT; a column it leaves unset takes the model's default (as a flush would)."""
    values: dict[str, Any] = {}
    for key in _NEW_JOB_COLUMNS:
        value = getattr(job, key)
        default = JOBS.c[key].default
        if value is None and default is not None and default.is_scalar:
            value = default.arg  # type: ignore[attr-defined]  # a scalar ColumnDefault
        values[key] = value
    return values


@cache
def _job_insert() -> Insert:
    """INSERT a new job's row (_NEW_JOB_COLUMNS), RETURNING its id."""
    values = {name: bindparam(name, type_=JOBS.c[name].type) for name in _NEW_JOB_COLUMNS}
    return insert(JOBS).values(values).returning(JOBS.c.id)


def insert_job(session: Session, job: JobRow) -> None:
    """Insert the new ``job`` (not added to the session) in the session's transaction and set its id: what
    adding it and flushing would write, by one statement built once, without the unit of work's bookkeeping
    (most of the database's share of a PUT's CPU)."""
    # Core: no ORM statement to set up
    job.id = session.connection().execute(_job_insert(), _new_job_values(job)).scalar_one()


@cache
def _guarded_job_insert() -> Insert:
    """The one guarded insert: INSERT a new job only while its name is free, its collection's row is still the
    version read (``collection_version``) and the collection holds fewer than ``max_jobs`` jobs; RETURNING its
    id. The collection's write lock (``lock``) is taken inside the statement, by the function that then checks the
    collection (``scheduler_job_slot``, migrations/versions/0012_job_slot_function.py: on a snapshot taken once the
    lock is granted); the name by ``ON CONFLICT DO NOTHING`` on its unique index. One statement, one round trip,
    where a lock of its own before the insert was one more."""
    values = [bindparam(name, type_=JOBS.c[name].type) for name in _NEW_JOB_COLUMNS]  # rendered with casts
    slot = func.scheduler_job_slot(
        bindparam("lock", type_=Text),
        bindparam("collection_id", type_=JOBS.c.collection_id.type),
        bindparam("collection_version", type_=Text),
        bindparam("max_jobs", type_=Integer),
        type_=Boolean,
    )
    return (
        postgresql_insert(JOBS)
        .from_select(list(_NEW_JOB_COLUMNS), select(*values).where(slot))
        .on_conflict_do_nothing(index_elements=[JOBS.c.collection_id, JOBS.c.name_key])
        .returning(JOBS.c.id)
    )


def insert_job_if_unchanged(
    session: Session, job: JobRow, *, lock: str, collection_version: str, max_jobs: int
) -> bool:
    """Take the write lock named ``lock`` (store.write_scope.collection_lock) and insert the new ``job`` (not added
    to the session) in the session's transaction if what it was built from still holds: its name free, its
    collection unchanged since it was read at ``collection_version``, fewer than ``max_jobs`` jobs in the
    collection, counted once the lock is granted (so every write that held it before has committed). True
    (``job.id`` set) when inserted; False when nothing was written (the lock is held all the same, and the
    session's objects are expired, to be read again in the same transaction)."""
    params = {**_new_job_values(job), "lock": lock, "collection_version": collection_version, "max_jobs": max_jobs}
    row = session.connection().execute(_guarded_job_insert(), params).first()
    if row is None:
        session.expire_all()
        return False
    job.id = row[0]
    return True


def read_collection(connection: Connection, subscription: str, resource_group: str, name: str) -> CollectionRead | None:
    """The collection (as find_collection) for an answer, in one statement outside a session."""
    row = connection.execute(_collection_read(), _names(subscription, resource_group, name)).first()
    return None if row is None else CollectionRead(*row)


def read_collection_with_job(
    connection: Connection, subscription: str, resource_group: str, name: str, job_name: str
) -> tuple[CollectionRead, JobRead | None] | None:
    """The collection and its job named ``job_name`` if any, for an answer (a job GET), in one statement outside a
    session (Database.statement_connection); None when there is no such collection."""
    row = connection.execute(_collection_and_job_read(), _names(subscription, resource_group, name, job_name)).first()
    if row is None:
        return None
    split = len(_COLLECTION_COLUMNS)
    job = None if row[split] is None else JobRead(*row[split:])
    return CollectionRead(*row[:split]), job


def find_job(session: Session, collection: JobCollectionRow, name: str) -> JobRow | None:
    return session.scalar(_job_by_name(), {"collection": collection.id, "name": name.lower()})


def list_jobs(
    session: Session, collection: JobCollectionRow, *, state: str | None, skip: int, limit: int, by_name: bool = False
) -> list[JobRow]:
    query = select(JobRow).where(JobRow.collection_id == collection.id)
    if state is not None:
        query = query.where(JobRow.state == state)
    order = JobRow.name_key if by_name else JobRow.id
    return list(session.scalars(query.order_by(order).offset(skip).limit(limit)))


def jobs_of(session: Session, collection: JobCollectionRow) -> list[JobRow]:
    return list(session.scalars(select(JobRow).where(JobRow.collection_id == collection.id)))


def count_jobs(session: Session, collection: JobCollectionRow | CollectionRead) -> int:
    return session.scalar(select(func.count()).select_from(JobRow).where(JobRow.collection_id == collection.id)) or 0


def set_jobs_state(session: Session, collection: JobCollectionRow, state: str, now: datetime) -> list[JobRow]:
    """Set every job of the collection that is not Completed or Faulted to ``state``; returns those jobs."""
    jobs = list(
        session.scalars(select(JobRow).where(JobRow.collection_id == collection.id, JobRow.state.not_in(FINAL_STATES)))
    )
    for job in jobs:
        job.state = state
        job.updated_at = now
    return jobs


def delete_collection(session: Session, collection: JobCollectionRow) -> None:
    """Remove the collection with its jobs and their history, and the role assignments at it and below it (a
    collection made again under the same name starts with none, as in ARM)."""
    job_ids = select(JobRow.id).where(JobRow.collection_id == collection.id).scalar_subquery()
    session.execute(delete(JobHistoryRow).where(JobHistoryRow.job_id.in_(job_ids)))
    session.execute(delete(JobRow).where(JobRow.collection_id == collection.id))
    delete_role_assignments_below(
        session,
        f"{group_scope(collection.subscription_key, collection.resource_group_key)}"
        f"/providers/Microsoft.Scheduler/jobCollections/{collection.name_key}",
    )
    session.delete(collection)


def group_scope(subscription: str, group: str) -> str:
    """A resource group's ARM id, the scope of role assignments made on it (docs/reference/authorization.md)."""
    return f"/subscriptions/{subscription}/resourceGroups/{group}"


def delete_job(session: Session, job: JobRow) -> None:
    session.execute(delete(JobHistoryRow).where(JobHistoryRow.job_id == job.id))
    session.delete(job)


def request_run(session: Session, job: JobRow, now: datetime) -> None:
    """Ask for one extra occurrence of the job now, outside its schedule."""
    job.run_requested_at = now
    job.updated_at = now


def list_history(session: Session, job: JobRow, *, status: str | None, skip: int, limit: int) -> list[JobHistoryRow]:
    """A page of the job's history, newest first."""
    query = select(JobHistoryRow).where(JobHistoryRow.job_id == job.id)
    if status is not None:
        query = query.where(JobHistoryRow.status == status)
    return list(session.scalars(query.order_by(JobHistoryRow.id.desc()).offset(skip).limit(limit)))


def record_history(session: Session, job_id: int, entry: JobHistoryRow) -> JobHistoryRow:
    """Store one history entry of the job."""
    entry.job_id = job_id
    session.add(entry)
    return entry


def read_setting(session: Session, name: str) -> str | None:
    row = session.get(EmulatorSettingRow, name)
    return None if row is None else row.value


def write_setting(session: Session, name: str, value: str) -> None:
    row = session.get(EmulatorSettingRow, name)
    if row is None:
        session.add(EmulatorSettingRow(name=name, value=value))
    else:
        row.value = value


def reset_everything(session: Session) -> None:
    """Remove every collection, job, history entry, occurrence record, classic cloud service and operation, and
    everything the front door keeps (deployments, resource groups, generic resources, provider registrations,
    ARM operations), and the role assignments on those (at a resource group or below it: the resources they were
    given on are gone); the emulator's settings, its dispatchers, its clock, the assignments at the root and at
    subscriptions, and the management certificates stay."""
    session.execute(delete(RoleAssignmentRow).where(RoleAssignmentRow.scope_key.contains("/resourcegroups/")))
    for table in (
        JobHistoryRow,
        OccurrenceRow,
        JobRow,
        JobCollectionRow,
        CloudServiceRow,
        ClassicOperationRow,
        DeploymentOperationRow,
        DeploymentRow,
        GenericResourceRow,
        ResourceGroupRow,
        ProviderRegistrationRow,
        ArmOperationRow,
    ):
        session.execute(delete(table))


def scheduled_jobs_due_by(session: Session, until: datetime) -> list[JobRow]:
    """Enabled jobs of enabled collections with a next execution time by ``until``."""
    query = (
        select(JobRow)
        .join(JobCollectionRow, JobRow.collection_id == JobCollectionRow.id)
        .where(
            JobRow.next_execution_time.is_not(None),
            JobRow.next_execution_time <= until,
            JobRow.state == "Enabled",
            JobCollectionRow.state == "Enabled",
        )
    )
    return list(session.scalars(query))


def all_collections(session: Session, limit: int) -> list[JobCollectionRow]:
    """Every subscription's collections (the first ``limit``), by subscription, resource group and name."""
    query = select(JobCollectionRow).order_by(
        JobCollectionRow.subscription_key, JobCollectionRow.resource_group_key, JobCollectionRow.name_key
    )
    return list(session.scalars(query.limit(limit)))


def job_counts(session: Session, collection_ids: list[int]) -> dict[int, int]:
    """How many jobs each of these collections holds (absent: none)."""
    if not collection_ids:
        return {}
    query = (
        select(JobRow.collection_id, func.count())
        .where(JobRow.collection_id.in_(collection_ids))
        .group_by(JobRow.collection_id)
    )
    return {collection_id: count for collection_id, count in session.execute(query).all()}


def latest_history(session: Session, job_ids: list[int]) -> dict[int, JobHistoryRow]:
    """Each job's newest history entry (absent: never run)."""
    if not job_ids:
        return {}
    newest = select(func.max(JobHistoryRow.id)).where(JobHistoryRow.job_id.in_(job_ids)).group_by(JobHistoryRow.job_id)
    return {entry.job_id: entry for entry in session.scalars(select(JobHistoryRow).where(JobHistoryRow.id.in_(newest)))}


# --- role assignments (docs/reference/authorization.md) -----------------------------------------------------------


def find_role_assignment(session: Session, name: str) -> RoleAssignmentRow | None:
    """The stored assignment of this GUID (assignment names are unique across scopes, as in Azure)."""
    return session.scalars(select(RoleAssignmentRow).where(RoleAssignmentRow.name == name.lower())).first()


def put_role_assignment(session: Session, row: RoleAssignmentRow) -> None:
    """Store a new assignment (its keys derived here)."""
    row.name = row.name.lower()
    row.scope_key = row.scope.lower()
    row.principal_key = row.principal_id.lower()
    session.add(row)
    session.flush()


def delete_role_assignment(session: Session, row: RoleAssignmentRow) -> None:
    session.delete(row)


def role_assignments_in_subscription(session: Session, subscription: str) -> list[RoleAssignmentRow]:
    """Every stored assignment at the subscription or below it, oldest first (callers filter by scope)."""
    query = select(RoleAssignmentRow).where(RoleAssignmentRow.subscription_key == subscription.lower())
    return list(session.scalars(query.order_by(RoleAssignmentRow.id)))


def all_role_assignments(session: Session) -> list[RoleAssignmentRow]:
    """Every stored assignment, oldest first (a list at the root scope; callers filter by scope)."""
    return list(session.scalars(select(RoleAssignmentRow).order_by(RoleAssignmentRow.id)))


def role_assignments_at_scope(session: Session, scope: str) -> list[RoleAssignmentRow]:
    """The stored assignments made exactly at ``scope`` (``$filter=atScope()`` also wants those above it)."""
    query = select(RoleAssignmentRow).where(RoleAssignmentRow.scope_key == scope.lower())
    return list(session.scalars(query.order_by(RoleAssignmentRow.id)))


def role_assignments_of_principal(session: Session, principal_id: str) -> list[RoleAssignmentRow]:
    """Every stored assignment naming this principal (its object id), at any scope, oldest first."""
    query = select(RoleAssignmentRow).where(RoleAssignmentRow.principal_key == principal_id.lower())
    return list(session.scalars(query.order_by(RoleAssignmentRow.id)))


def delete_role_assignments_below(session: Session, scope: str) -> None:
    """Remove the assignments at ``scope`` and below it (its resource is gone: ARM leaves none behind)."""
    key = scope.lower()
    session.execute(
        delete(RoleAssignmentRow).where(
            (RoleAssignmentRow.scope_key == key) | RoleAssignmentRow.scope_key.startswith(key + "/", autoescape=True)
        )
    )


# --- management certificates (docs/classic-api.md#management-certificates) ----------------------------------------


def management_certificates(session: Session, subscription: str) -> list[ManagementCertificateRow]:
    """The subscription's stored management certificates, oldest first."""
    query = select(ManagementCertificateRow).where(ManagementCertificateRow.subscription_key == subscription.lower())
    return list(session.scalars(query.order_by(ManagementCertificateRow.id)))


def find_management_certificate(
    session: Session, subscription: str, thumbprint: str
) -> ManagementCertificateRow | None:
    query = select(ManagementCertificateRow).where(
        ManagementCertificateRow.subscription_key == subscription.lower(),
        ManagementCertificateRow.thumbprint == thumbprint.upper(),
    )
    return session.scalars(query).first()


def add_management_certificate(session: Session, row: ManagementCertificateRow) -> None:
    row.subscription_key = row.subscription_key.lower()
    row.thumbprint = row.thumbprint.upper()
    session.add(row)
    session.flush()


def delete_management_certificate(session: Session, row: ManagementCertificateRow) -> None:
    session.delete(row)
