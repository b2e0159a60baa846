"""Jobs: create or replace, merge-patch, run now, delete, find, list and history, with every rule.

Write-only secrets an update does not repeat are carried over from the stored definition, only for the
target they were given for (docs/reference/security.md#secrets; where they sit: schemas.job_shape).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from pydantic import ValidationError
from sqlalchemy import Connection
from sqlalchemy.orm import Session

from scheduler_emulator.domain import recurrence as rec
from scheduler_emulator.domain.certificates import read_pfx
from scheduler_emulator.domain.clock import isoformat_z
from scheduler_emulator.domain.errors import Conflict, NotFound, TooLarge
from scheduler_emulator.domain.job_rules import RetrySpec, check_job, check_job_count
from scheduler_emulator.domain.merge import merge_patch
from scheduler_emulator.domain.plans import Limits
from scheduler_emulator.domain.states import JobState
from scheduler_emulator.schemas.job import HttpAuthentication, JobDefinitionIn, JobProperties
from scheduler_emulator.schemas.job_collection import stored_limits
from scheduler_emulator.schemas.job_shape import ACTION_PLACES, ActionPlace, keep_omitted_secrets, strip_secrets
from scheduler_emulator.service.refs import CollectionRef
from scheduler_emulator.service.validation import check_name_length, read_model
from scheduler_emulator.store import repository as repo
from scheduler_emulator.store.models import JobCollectionRow, JobHistoryRow, JobRow
from scheduler_emulator.store.wakeups import note_due
from scheduler_emulator.store.write_scope import WriteScope

log = logging.getLogger("scheduler_emulator.service")

MAX_DEFINITION_BYTES = 16 * 1024
JOB_STATES = tuple(state.value for state in JobState)
HISTORY_STATUSES = ("Completed", "Failed", "Postponed")


def get(session: Session, collection: JobCollectionRow, name: str) -> JobRow:
    """The job; NotFound when there is none."""
    job = repo.find_job(session, collection, name)
    if job is None:
        raise NotFound("job", f"{collection.name}/{name}")
    return job


def read_in(connection: Connection, ref: CollectionRef, name: str) -> tuple[repo.CollectionRead, repo.JobRead]:
    """The collection ``ref`` names and its job ``name``, read together in one statement for an answer (a GET);
    NotFound for whichever is missing."""
    found = repo.read_collection_with_job(connection, ref.subscription_id, ref.resource_group, ref.name, name)
    if found is None:
        raise NotFound("job collection", ref.name)
    collection, job = found
    if job is None:
        raise NotFound("job", f"{collection.name}/{name}")
    return collection, job


def put(
    session: Session, ref: CollectionRef, name: str, raw: dict[str, Any], *, moment: datetime, floor: timedelta
) -> tuple[JobCollectionRow, JobRow, bool]:
    """Create or replace the job from its ARM ``properties`` in the collection ``ref`` names, under the write
    locks the caller holds; a new series starts at ``moment``. Returns the collection, the job and whether it
    was created."""
    found = repo.find_collection_and_job(session, ref.subscription_id, ref.resource_group, ref.name, name)
    if found is None:
        raise NotFound("job collection", ref.name)
    collection, existing, count = found
    definition = raw
    if existing is not None:
        _refuse_final(existing)
        definition = keep_omitted_secrets(raw, existing.definition)
    write = JobWrite(
        collection=collection, name=name, raw=definition, moment=moment, floor=floor, existing=existing, job_count=count
    )
    return collection, _store(session, write), existing is None


def put_locking_late(
    scope: WriteScope, ref: CollectionRef, name: str, raw: dict[str, Any], *, moment: datetime, floor: timedelta
) -> tuple[JobCollectionRow | repo.CollectionRead, JobRow, bool]:
    """As put, taking the collection's write lock through ``scope`` as late as the store allows
    (store.write_scope: one route per database, chosen with the scope). Where the scope inserts before locking
    (PostgreSQL), a new job is read and validated before the lock is taken and inserted under it by the guarded
    insert (_create_before_locking); a replace, and every write on a store that locks from the start, runs under
    the lock."""
    if not scope.inserts_before_locking:
        scope.lock(ref)
        return put(scope.session, ref, name, raw, moment=moment, floor=floor)
    return _create_before_locking(scope, ref, name, raw, moment=moment, floor=floor)


def _create_before_locking(
    scope: WriteScope, ref: CollectionRef, name: str, raw: dict[str, Any], *, moment: datetime, floor: timedelta
) -> tuple[JobCollectionRow | repo.CollectionRead, JobRow, bool]:
    """Create or replace, holding the collection's write lock for a new job only while the database runs its
    INSERT and the end of the transaction: the collection, the name and the job count are read and the job
    built and validated before the lock is taken, then inserted by one statement that checks that what it was
    built from still holds (the name free, the collection unchanged, its job count under the limit). Jobs
    written into one collection queue on that lock, so what runs under it bounds their rate. A name already
    taken is a replace, done under the lock from the start. When the insert writes nothing (another write changed
    the collection or took the name between the read and the lock), the write is decided again under the lock,
    which is then held, from what is stored then: its inputs changed, so the job is built again from them. Until
    that lock, the read and the insert each commit by themselves (WriteScope.commit_each_statement_until_locked)."""
    session = scope.session
    scope.commit_each_statement_until_locked()
    basis = repo.find_create_basis(session, ref.subscription_id, ref.resource_group, ref.name, name)
    if basis is None:
        raise NotFound("job collection", ref.name)
    collection = basis.collection
    if basis.existing_id is None:
        job, limits = _build(
            JobWrite(collection=collection, name=name, raw=raw, moment=moment, floor=floor, job_count=basis.job_count)
        )
        if scope.insert_if_unchanged(job, collection=ref, collection_version=basis.version, max_jobs=limits.max_jobs):
            note_due(session, job.next_execution_time, None, at_once=False)
            return collection, job, True
    scope.lock(ref)
    session.expire_all()  # what was read before the lock is read again under it
    return put(session, ref, name, raw, moment=moment, floor=floor)


def patch(
    session: Session,
    collection: JobCollectionRow,
    name: str,
    changes: dict[str, Any],
    *,
    moment: datetime,
    floor: timedelta,
) -> JobRow:
    """Merge-patch the job's ``properties``; the series restarts only when its timing changed (or on enabling)."""
    job = get(session, collection, name)
    _refuse_final(job)
    # Secrets the patch does not mention are kept only for an unchanged target (keep_omitted_secrets).
    merged = keep_omitted_secrets(merge_patch(strip_secrets(job.definition), changes), job.definition)
    write = JobWrite(
        collection=collection, name=job.name, raw=merged, moment=moment, floor=floor, existing=job, new_series=None
    )
    return _store(session, write)


def delete(session: Session, collection: JobCollectionRow, name: str) -> None:
    repo.delete_job(session, get(session, collection, name))


def run_now(session: Session, collection: JobCollectionRow, name: str, moment: datetime) -> JobRow:
    """Ask for one extra occurrence now, outside the schedule."""
    job = get(session, collection, name)
    repo.request_run(session, job, moment)
    return job


def list_page(
    session: Session, collection: JobCollectionRow, *, state: str | None, skip: int, limit: int, by_name: bool = False
) -> list[JobRow]:
    """Jobs in a stable order (by creation, or by name), optionally only those in ``state``."""
    return repo.list_jobs(session, collection, state=state, skip=skip, limit=limit, by_name=by_name)


def set_all_states(session: Session, collection: JobCollectionRow, state: str, moment: datetime) -> None:
    """Enable or disable every job of the collection that is not Completed or Faulted; an enabled job's
    series restarts at ``moment``."""
    for job in repo.set_jobs_state(session, collection, state, moment):
        job.version += 1
        if state == JobState.Enabled:
            restart_series(job, moment)
        else:
            job.next_execution_time = None


def history_page(
    session: Session, collection: JobCollectionRow, name: str, *, status: str | None, skip: int, limit: int
) -> tuple[JobRow, list[JobHistoryRow]]:
    """The job and a page of its history, newest first, optionally only entries with ``status``."""
    job = get(session, collection, name)
    return job, repo.list_history(session, job, status=status, skip=skip, limit=limit)


def stored_properties(job: JobRow) -> JobProperties:
    """The stored definition read back (ValidationError if today's rules refuse it)."""
    return JobDefinitionIn.model_validate({"properties": job.definition}).properties


def restart_series(job: JobRow, moment: datetime) -> None:
    """Enabling recomputes from now: the series starts again at ``moment``."""
    job.series_origin = moment
    try:
        job.next_execution_time = first_run(stored_properties(job), moment)
    except ValidationError:
        job.next_execution_time = None  # no longer valid: the dispatcher sets such a job aside
        log.warning("job %s no longer validates; it has no next run", job.name)


def first_run(properties: JobProperties, origin: datetime) -> datetime | None:
    """When the series defined at ``origin`` first runs (None: never)."""
    return next(iter(rec.occurrences(properties.timing(), origin)), None)


def collection_limits_of(collection: JobCollectionRow | repo.CollectionRead, floor: timedelta) -> Limits:
    """The collection's plan tightened by its quota."""
    return stored_limits(collection.sku, collection.properties, floor)


def check_definition(properties: JobProperties, limits: Limits, origin: datetime) -> None:
    """Every plan, quota and time rule (FieldError or Conflict)."""
    retries = []
    auth_paths = []
    for place in ACTION_PLACES:
        action: Any = properties
        for attribute in place.attributes:
            action = getattr(action, attribute, None)
        if action is None:
            continue
        policy = action.retry_policy
        if policy is not None:
            retries.append(
                RetrySpec(f"{place.path}.retryPolicy", policy.retry_type, policy.retry_count, policy.retry_interval)
            )
        if action.authentication is not None and action.authentication.type != "NotSpecified":
            auth_paths.append(f"{place.path}.request.authentication")
    check_job(properties.timing(), origin, retries, auth_paths, limits)


@dataclass(frozen=True, slots=True, kw_only=True)
class JobWrite:
    """What a job is built from: ``raw``, its properties as sent, for the job ``name`` of ``collection`` at
    ``moment`` (``floor``: the operator's retry-interval floor)."""

    collection: JobCollectionRow | repo.CollectionRead  # a row, or the record a create before locking read
    name: str
    raw: dict[str, Any]
    moment: datetime
    floor: timedelta
    existing: JobRow | None = None  # the job replaced or patched (changed in place); None: a new one
    # an existing job's series restarts at ``moment`` (a new job's always starts there); None: only when its
    # timing (startTime, recurrence) changed
    new_series: bool | None = True
    job_count: int | None = None  # the collection's jobs, for a new one (None: counted when stored)


def _store(session: Session, write: JobWrite) -> JobRow:
    """Validate the job against every rule and store it."""
    existing = write.existing
    before = existing.next_execution_time if existing is not None else None
    claimed = existing is not None and existing.lease_owner is not None
    if existing is None and write.job_count is None:
        write = replace(write, job_count=repo.count_jobs(session, write.collection))
    job, _ = _build(write)
    if existing is None:
        repo.insert_job(session, job)
    else:
        session.flush()
    # Dispatchers need waking only for a job due soon, or one whose claimed occurrence must re-check it.
    note_due(session, job.next_execution_time, before, at_once=claimed)
    return job


def _build(write: JobWrite) -> tuple[JobRow, Limits]:
    """Validate ``write.raw`` against every rule; the job it makes (``existing`` changed, or a new row not yet
    added) and the collection's limits."""
    collection, name, moment, existing = write.collection, write.name, write.moment, write.existing
    if existing is None:
        check_name_length("job", name)
    raw = merge_patch({}, write.raw)  # explicit nulls mean "omitted": never stored, never echoed
    raw.pop("status", None)
    size = len(json.dumps(raw, separators=(",", ":")))
    if size > MAX_DEFINITION_BYTES:
        raise TooLarge("job definition", MAX_DEFINITION_BYTES, size)
    properties = read_model(JobDefinitionIn, {"properties": raw}).properties
    limits = collection_limits_of(collection, write.floor)
    if existing is None:
        check_job_count(write.job_count or 0, limits)
    check_definition(properties, limits, moment)
    definition = _with_certificate_details(properties).canonical()
    state = properties.state or JobState.Enabled
    job = existing or JobRow(
        collection_id=collection.id,
        name=name,
        name_key=name.lower(),
        created_at=moment,
        execution_count=0,
        failure_count=0,
        faulted_count=0,
        repeat_count=0,
    )
    new_series = write.new_series
    if new_series is None and existing is not None:
        new_series = any(definition.get(k) != existing.definition.get(k) for k in ("startTime", "recurrence"))
    job.definition = definition
    job.version = (existing.version + 1) if existing is not None else 1
    job.updated_at = moment
    enabling = existing is not None and existing.state == JobState.Disabled and state == JobState.Enabled
    job.state = state
    if existing is None or new_series or enabling:
        job.series_origin = moment
    job.next_execution_time = first_run(properties, job.series_origin) if state == JobState.Enabled else None
    return job, limits


def _refuse_final(job: JobRow) -> None:
    if job.state in repo.FINAL_STATES:
        raise Conflict(f"The job '{job.name}' is {job.state}; a {job.state} job cannot be changed, only deleted.")


def _with_certificate_details(properties: JobProperties) -> JobProperties:
    """``properties`` with what each ClientCertificate authentication's pfx says (thumbprint, subject, expiry)."""
    for place in ACTION_PLACES:
        parsed: Any = properties
        for attribute in place.attributes:
            parsed = getattr(parsed, attribute, None)
        auth = parsed.authentication if parsed is not None else None
        if auth is None or auth.type != "ClientCertificate" or auth.pfx is None:
            continue
        info = read_pfx(auth.pfx, auth.password, f"{place.path}.request.authentication")
        read = auth.model_copy(
            update={
                "certificate_thumbprint": info.thumbprint,
                "certificate_subject_name": info.subject_name,
                "certificate_expiration_date": isoformat_z(info.expiration),
            }
        )
        properties = _with_authentication(properties, place, read)
    return properties


def _with_authentication(properties: JobProperties, place: ActionPlace, auth: HttpAuthentication) -> JobProperties:
    """``properties`` with the HTTP authentication of the action at ``place`` replaced (the models are frozen)."""
    chain: list[Any] = [properties]
    for attribute in place.attributes:
        chain.append(getattr(chain[-1], attribute))
    action = chain[-1]
    value: Any = action.model_copy(update={"request": action.request.model_copy(update={"authentication": auth})})
    for parent, attribute in zip(reversed(chain[:-1]), reversed(place.attributes), strict=True):
        value = parent.model_copy(update={attribute: value})
    return value  # type: ignore[no-any-return]
