"""Jobs: create or replace, merge-patch, run now, delete, find, list and history, with every rule.

Write-only secrets an update does not repeat are carried over from the stored definition, only for the
target they were given for (SPEC §11; where they sit: schemas.job_shape).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError
from sqlalchemy.orm import Session

from scheduler_emulator.domain import recurrence as rec
from scheduler_emulator.domain.certificates import read_pfx
from scheduler_emulator.domain.clock import isoformat_z
from scheduler_emulator.domain.errors import Conflict, FieldError, InvalidName, NotFound, TooLarge
from scheduler_emulator.domain.job_rules import RetrySpec, check_job, check_job_count
from scheduler_emulator.domain.merge import merge_patch
from scheduler_emulator.domain.plans import Limits
from scheduler_emulator.domain.states import JobState
from scheduler_emulator.schemas.job import JobDefinitionIn, JobProperties, use_spec_occurrence_key
from scheduler_emulator.schemas.job_collection import stored_limits
from scheduler_emulator.schemas.job_shape import ACTION_PLACES, keep_omitted_secrets, member, strip_secrets
from scheduler_emulator.service.validation import check_name_length, read_model
from scheduler_emulator.store import repository as repo
from scheduler_emulator.store.dispatching import note_due
from scheduler_emulator.store.models import JobCollectionRow, JobHistoryRow, JobRow

if TYPE_CHECKING:  # service.collections imports this module
    from scheduler_emulator.service.collections import CollectionRef

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


def get_in(session: Session, ref: CollectionRef, name: str) -> tuple[JobCollectionRow, JobRow]:
    """The collection ``ref`` names and its job ``name``, read together; NotFound for whichever is missing."""
    found = repo.find_collection_with_job(session, ref.subscription_id, ref.resource_group, ref.name, name)
    if found is None:
        raise NotFound("job collection", ref.name)
    collection, job = found
    if job is None:
        raise NotFound("job", f"{collection.name}/{name}")
    return collection, job


def put(
    session: Session,
    ref: CollectionRef,
    name: str,
    raw: dict[str, Any],
    moment: datetime,
    floor: timedelta,
    locks: Sequence[str] = (),
) -> tuple[JobCollectionRow, JobRow, bool]:
    """Create or replace the job from its ARM ``properties`` in the collection ``ref`` names; a new series
    starts at ``moment``. Returns the collection, the job and whether it was created. ``locks``: the write
    locks the caller left to put to take (none: they are held). A new job is then read and validated first
    and inserted under them (see _create_before_locking); anything else runs under them."""
    if locks:
        created = _create_before_locking(session, ref, name, raw, moment, floor, locks)
        if created is not None:
            return created
        repo.lock(session, *locks)
    found = repo.find_collection_and_job(session, ref.subscription_id, ref.resource_group, ref.name, name)
    if found is None:
        raise NotFound("job collection", ref.name)
    collection, existing, count = found
    definition = raw
    if existing is not None:
        _refuse_final(existing)
        definition = keep_omitted_secrets(raw, existing.definition)
    job = _store(session, collection, name, definition, existing, moment, True, floor, count)
    return collection, job, existing is None


def _create_before_locking(
    session: Session,
    ref: CollectionRef,
    name: str,
    raw: dict[str, Any],
    moment: datetime,
    floor: timedelta,
    locks: Sequence[str],
) -> tuple[JobCollectionRow, JobRow, bool] | None:
    """A new job on PostgreSQL, holding the collection's write lock only while the database runs its INSERT
    and the COMMIT: read and validated before the lock is taken, then inserted by one statement that checks
    that what it was built from still holds (the name free, the collection unchanged, its job count under the
    limit), sent with the lock and the COMMIT in one round trip. Jobs written into one collection queue on that
    lock, so what runs under it bounds their rate. None when it is not a plain create, when the read led to
    an error, or when something changed meanwhile (then nothing was written, and the transaction that read it
    has ended): the caller then does it all under the lock, as for any other write."""
    if not repo.takes_guarded_inserts(session):
        return None
    found = repo.find_collection_job_and_version(session, ref.subscription_id, ref.resource_group, ref.name, name)
    if found is None or found[1] is not None:
        return None
    collection, _, count, version = found
    try:
        job, limits = _build(collection, name, raw, None, moment, True, floor, count)
    except (FieldError, Conflict, InvalidName, TooLarge):
        return None  # decided under the lock, from what is stored then
    if not repo.insert_job_locked_and_commit(session, job, version, limits.max_jobs, locks):
        return None
    note_due(session, job.next_execution_time, None, at_once=False)
    return collection, job, True


def patch(
    session: Session,
    collection: JobCollectionRow,
    name: str,
    changes: dict[str, Any],
    moment: datetime,
    floor: timedelta,
) -> JobRow:
    """Merge-patch the job's ``properties``; the series restarts only when its timing changed (or on enabling)."""
    job = get(session, collection, name)
    _refuse_final(job)
    # Secrets the patch does not mention are kept only for an unchanged target (keep_omitted_secrets).
    merged = keep_omitted_secrets(merge_patch(strip_secrets(job.definition), changes), job.definition)
    timing_changed = any(merged.get(k) != job.definition.get(k) for k in ("startTime", "recurrence"))
    return _store(session, collection, job.name, merged, job, moment, timing_changed, floor)


def delete(session: Session, collection: JobCollectionRow, name: str) -> None:
    repo.delete_job(session, get(session, collection, name))


def run_now(session: Session, collection: JobCollectionRow, name: str, moment: datetime) -> JobRow:
    """Ask for one extra occurrence now, outside the schedule."""
    job = get(session, collection, name)
    repo.request_run(session, job, moment)
    return job


def list_page(
    session: Session, collection: JobCollectionRow, state: str | None, skip: int, limit: int, by_name: bool = False
) -> list[JobRow]:
    """Jobs in a stable order (by creation, or by name), optionally only those in ``state``."""
    return repo.list_jobs(session, collection, state, skip, limit, by_name)


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
    session: Session, collection: JobCollectionRow, name: str, status: str | None, skip: int, limit: int
) -> tuple[JobRow, list[JobHistoryRow]]:
    """The job and a page of its history, newest first, optionally only entries with ``status``."""
    job = get(session, collection, name)
    return job, repo.list_history(session, job, status, skip, limit)


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


def collection_limits_of(collection: JobCollectionRow, floor: timedelta) -> Limits:
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


def _store(
    session: Session,
    collection: JobCollectionRow,
    name: str,
    raw: dict[str, Any],
    existing: JobRow | None,
    moment: datetime,
    new_series: bool,
    floor: timedelta,
    job_count: int | None = None,
) -> JobRow:
    """Validate ``raw`` (the job's properties) against every rule and store it."""
    before = existing.next_execution_time if existing is not None else None
    claimed = existing is not None and existing.lease_owner is not None
    if existing is None and job_count is None:
        job_count = repo.count_jobs(session, collection)
    job, _ = _build(collection, name, raw, existing, moment, new_series, floor, job_count)
    if existing is None:
        session.add(job)
    session.flush()
    # Dispatchers need waking only for a job due soon, or one whose claimed occurrence must re-check it.
    note_due(session, job.next_execution_time, before, at_once=claimed)
    return job


def _build(
    collection: JobCollectionRow,
    name: str,
    raw: dict[str, Any],
    existing: JobRow | None,
    moment: datetime,
    new_series: bool,
    floor: timedelta,
    job_count: int | None,
) -> tuple[JobRow, Limits]:
    """Validate ``raw`` (the job's properties) against every rule (``job_count``: the collection's jobs, for a
    new one); the job it makes (``existing`` changed, or a new row not yet added) and the collection's limits."""
    if existing is None:
        check_name_length("job", name)
    raw = merge_patch({}, raw)  # explicit nulls mean "omitted": never stored, never echoed
    raw.pop("status", None)
    size = len(json.dumps(raw, separators=(",", ":")))
    if size > MAX_DEFINITION_BYTES:
        raise TooLarge("job definition", MAX_DEFINITION_BYTES, size)
    properties = read_model(JobDefinitionIn, {"properties": raw}).properties
    use_spec_occurrence_key(raw)  # after validation, whose messages name the key the client sent
    limits = collection_limits_of(collection, floor)
    if existing is None:
        check_job_count(job_count or 0, limits)
    check_definition(properties, limits, moment)
    _add_certificate_details(raw, properties)
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
    job.definition = raw
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


def _add_certificate_details(raw: dict[str, Any], properties: JobProperties) -> None:
    """For ClientCertificate authentication, record what the pfx says (thumbprint, subject, expiry)."""
    for place in ACTION_PLACES:
        parsed: Any = properties
        for attribute in place.attributes:
            parsed = getattr(parsed, attribute, None)
        auth = parsed.authentication if parsed is not None else None
        if auth is None or auth.type != "ClientCertificate" or auth.pfx is None:
            continue
        info = read_pfx(auth.pfx, auth.password, f"{place.path}.request.authentication")
        stored = member(raw, *place.keys, "request", "authentication")
        stored["certificateThumbprint"] = info.thumbprint
        stored["certificateSubjectName"] = info.subject_name
        stored["certificateExpirationDate"] = isoformat_z(info.expiration)
