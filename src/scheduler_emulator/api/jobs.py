"""Jobs: ``{root}/jobCollections/{jc}/jobs[/{job}[/run]]``."""

from __future__ import annotations

import copy
import json
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from sqlalchemy.orm import Session

from scheduler_emulator.api import errors
from scheduler_emulator.api.client_dialects import client_dialect, read_sent_durations
from scheduler_emulator.api.context import in_session, json_object, now, retry_floor, validated
from scheduler_emulator.api.paging import equality_filter, list_body, page_of
from scheduler_emulator.api.rendering import job_to_wire
from scheduler_emulator.domain import recurrence as rec
from scheduler_emulator.domain.certificates import read_pfx
from scheduler_emulator.domain.clock import isoformat_z
from scheduler_emulator.domain.errors import Conflict
from scheduler_emulator.domain.job_rules import RetrySpec, check_job, check_job_count
from scheduler_emulator.domain.merge import merge_patch
from scheduler_emulator.domain.plans import Limits
from scheduler_emulator.schemas.job import JobDefinitionIn, JobProperties, strip_secrets, use_spec_occurrence_key
from scheduler_emulator.schemas.job_collection import stored_limits
from scheduler_emulator.store import repository as repo
from scheduler_emulator.store.models import JobCollectionRow, JobRow

router = APIRouter()

COLLECTION = (
    "/subscriptions/{subscription_id}/resourceGroups/{resource_group}"
    "/providers/Microsoft.Scheduler/jobCollections/{collection_name}"
)
JOB = COLLECTION + "/jobs/{job_name}"
MAX_DEFINITION_BYTES = 16 * 1024
JOB_STATES = ("Enabled", "Disabled", "Completed", "Faulted")
_ACTIONS = (("properties.action", ("action",)), ("properties.action.errorAction", ("action", "errorAction")))


def collection_or_404(session: Session, subscription_id: str, resource_group: str, name: str) -> JobCollectionRow:
    collection = repo.find_collection(session, subscription_id, resource_group, name)
    if collection is None:
        raise errors.resource_not_found("job collection", name)
    return collection


def job_or_404(session: Session, collection: JobCollectionRow, name: str) -> JobRow:
    job = repo.find_job(session, collection, name)
    if job is None:
        raise errors.resource_not_found("job", f"{collection.name}/{name}")
    return job


def _actions(properties: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(ARM path, action object) for the main action and its error action, as stored."""
    found = []
    for path, keys in _ACTIONS:
        node: Any = properties
        for key in keys:
            node = node.get(key) if isinstance(node, dict) else None
        if isinstance(node, dict):
            found.append((path, node))
    return found


def _member(node: Any, *keys: str) -> Any:
    """``node[k1][k2]...`` or None where a level is missing or not an object (the body is not validated yet)."""
    for key in keys:
        node = node.get(key) if isinstance(node, dict) else None
    return node


def keep_omitted_secrets(new: dict[str, Any], old: dict[str, Any]) -> dict[str, Any]:
    """Write-only secrets the client did not repeat are kept from the stored definition, so a GET-modify-PUT
    round trip does not lose them — but only while they go where they went before (SPEC §11): same
    authentication type and same target origin (scheme, host, port) for HTTP, same namespace for Service
    Bus. A secret omitted for a new target → 400 naming its field (it is never sent somewhere new)."""
    result = copy.deepcopy(new)
    old_actions = dict(_actions(old))
    for path, action in _actions(result):
        previous = old_actions.get(path)
        if previous is None:
            continue
        new_request, old_request = _member(action, "request"), _member(previous, "request")
        new_auth, old_auth = _member(new_request, "authentication"), _member(old_request, "authentication")
        if (
            isinstance(new_auth, dict)
            and isinstance(old_auth, dict)
            and str(new_auth.get("type", "")).lower() == str(old_auth.get("type", "")).lower()
        ):
            same_target = _origin(_member(new_request, "uri")) == _origin(_member(old_request, "uri"))
            for secret in ("password", "pfx", "secret"):
                if secret not in new_auth and secret in old_auth:
                    if not same_target:
                        raise _secret_needed(f"{path}.request.authentication.{secret}", "request.uri's origin")
                    new_auth[secret] = old_auth[secret]
        for payload in ("serviceBusQueueMessage", "serviceBusTopicMessage"):
            new_message, old_message = _member(action, payload), _member(previous, payload)
            new_sb, old_sb = _member(new_message, "authentication"), _member(old_message, "authentication")
            if isinstance(new_sb, dict) and isinstance(old_sb, dict) and "sasKey" not in new_sb and "sasKey" in old_sb:
                new_namespace, old_namespace = _member(new_message, "namespace"), _member(old_message, "namespace")
                if str(new_namespace or "").lower() != str(old_namespace or "").lower():
                    raise _secret_needed(f"{path}.{payload}.authentication.sasKey", "namespace")
                new_sb["sasKey"] = old_sb["sasKey"]
    return result


def _origin(uri: object) -> tuple[str, str, int | None] | None:
    """(scheme, host, port) of a URI, the default port filled in; None when it is not a URI."""
    if not isinstance(uri, str):
        return None
    try:
        parts = urlsplit(uri)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    return scheme, (parts.hostname or "").lower(), port or {"http": 80, "https": 443}.get(scheme)


def _secret_needed(field: str, what_changed: str) -> errors.ArmError:
    return errors.invalid_field(
        f"properties.{field.removeprefix('properties.')}",
        f"must be given again: the {what_changed} changed, and a stored secret is only kept for the target it "
        "was given for",
    )


def check_definition(properties: JobProperties, limits: Limits, origin: datetime) -> None:
    """Every plan, quota and time rule (400 or 409)."""
    retries = []
    auth_paths = []
    for path, action in (
        ("properties.action", properties.action),
        ("properties.action.errorAction", properties.action.error_action),
    ):
        if action is None:
            continue
        policy = action.retry_policy
        if policy is not None:
            retries.append(
                RetrySpec(f"{path}.retryPolicy", policy.retry_type, policy.retry_count, policy.retry_interval)
            )
        if action.authentication is not None and action.authentication.type != "NotSpecified":
            auth_paths.append(f"{path}.request.authentication")
    check_job(properties.timing(), origin, retries, auth_paths, limits)


def _add_certificate_details(raw: dict[str, Any], properties: JobProperties) -> None:
    """For ClientCertificate authentication, record what the pfx says (thumbprint, subject, expiry)."""
    for (path, action), parsed in zip(_actions(raw), (properties.action, properties.action.error_action), strict=False):
        auth = parsed.authentication if parsed is not None else None
        if auth is None or auth.type != "ClientCertificate" or auth.pfx is None:
            continue
        info = read_pfx(auth.pfx, auth.password, f"{path}.request.authentication")
        stored = action["request"]["authentication"]
        stored["certificateThumbprint"] = info.thumbprint
        stored["certificateSubjectName"] = info.subject_name
        stored["certificateExpirationDate"] = isoformat_z(info.expiration)


def first_run(properties: JobProperties, origin: datetime) -> datetime | None:
    """When the series defined at ``origin`` first runs (None: never)."""
    return next(iter(rec.occurrences(properties.timing(), origin)), None)


def _write(
    session: Session,
    collection: JobCollectionRow,
    name: str,
    raw: dict[str, Any],
    existing: JobRow | None,
    moment: datetime,
    new_series: bool,
    floor: timedelta,
) -> JobRow:
    """Validate ``raw`` (the job's properties) against every rule and store it."""
    if existing is None:
        errors.check_name_length("job", name)
    raw = merge_patch({}, raw)  # explicit nulls mean "omitted": never stored, never echoed
    raw.pop("status", None)
    if len(json.dumps(raw, separators=(",", ":"))) > MAX_DEFINITION_BYTES:
        raise errors.request_too_large(
            "job definition", MAX_DEFINITION_BYTES, len(json.dumps(raw, separators=(",", ":")))
        )
    properties = validated(JobDefinitionIn, {"properties": raw}).properties
    use_spec_occurrence_key(raw)  # after validation, whose messages name the key the client sent
    limits = collection_limits_of(collection, floor)
    if existing is None:
        check_job_count(repo.count_jobs(session, collection), limits)
    origin = moment if new_series or existing is None else existing.series_origin
    check_definition(properties, limits, moment)
    _add_certificate_details(raw, properties)
    state = properties.state or "Enabled"
    job = existing or JobRow(
        collection_id=collection.id,
        name=name,
        name_key=name.lower(),
        created_at=moment,
        execution_count=0,
        failure_count=0,
        faulted_count=0,
    )
    if existing is not None and existing.state == "Disabled" and state == "Enabled":
        origin = moment  # enabling recomputes from now
    job.definition = raw
    job.version = (existing.version + 1) if existing is not None else 1
    job.state = state
    job.series_origin = origin
    job.next_execution_time = first_run(properties, origin) if state == "Enabled" else None
    job.updated_at = moment
    if existing is None:
        session.add(job)
    session.flush()
    return job


def collection_limits_of(collection: JobCollectionRow, floor: timedelta) -> Limits:
    """The collection's plan tightened by its quota."""
    return stored_limits(collection.sku, collection.properties, floor)


def _refuse_final(job: JobRow) -> None:
    if job.state in repo.FINAL_STATES:
        raise Conflict(f"The job '{job.name}' is {job.state}; a {job.state} job cannot be changed, only deleted.")


@router.put(JOB)
async def create_or_replace_job(
    request: Request, subscription_id: str, resource_group: str, collection_name: str, job_name: str
) -> Response:
    body = await json_object(request)
    raw = body.get("properties")
    if not isinstance(raw, dict):
        raise errors.invalid_field("properties", "is required and must be a JSON object")
    moment, floor = now(request), retry_floor(request)
    dialect = client_dialect(request)
    read_sent_durations(raw, dialect)

    def work(session: Session) -> tuple[int, dict[str, Any]]:
        collection = collection_or_404(session, subscription_id, resource_group, collection_name)
        existing = repo.find_job(session, collection, job_name)
        definition = raw
        if existing is not None:
            _refuse_final(existing)
            definition = keep_omitted_secrets(raw, existing.definition)
        job = _write(session, collection, job_name, definition, existing, moment, True, floor)
        return (200 if existing else 201), job_to_wire(collection, job, dialect.one_job)

    status, wire = await in_session(request, work, wake=True)
    return JSONResponse(wire, status_code=status)


@router.patch(JOB)
async def patch_job(
    request: Request, subscription_id: str, resource_group: str, collection_name: str, job_name: str
) -> Response:
    body = await json_object(request)
    patch = body.get("properties", {})
    if patch is not None and not isinstance(patch, dict):
        raise errors.invalid_field("properties", "must be a JSON object")
    moment, floor = now(request), retry_floor(request)
    dialect = client_dialect(request)
    read_sent_durations(patch or {}, dialect)

    def work(session: Session) -> dict[str, Any]:
        collection = collection_or_404(session, subscription_id, resource_group, collection_name)
        job = job_or_404(session, collection, job_name)
        _refuse_final(job)
        # Secrets the patch does not mention are kept only for an unchanged target (keep_omitted_secrets).
        merged = keep_omitted_secrets(merge_patch(strip_secrets(job.definition), patch or {}), job.definition)
        timing_changed = any(merged.get(k) != job.definition.get(k) for k in ("startTime", "recurrence"))
        job = _write(session, collection, job.name, merged, job, moment, timing_changed, floor)
        return job_to_wire(collection, job, dialect.one_job)

    return JSONResponse(await in_session(request, work, wake=True))


@router.get(JOB)
async def get_job(
    request: Request, subscription_id: str, resource_group: str, collection_name: str, job_name: str
) -> Response:
    style = client_dialect(request).one_job

    def work(session: Session) -> dict[str, Any]:
        collection = collection_or_404(session, subscription_id, resource_group, collection_name)
        return job_to_wire(collection, job_or_404(session, collection, job_name), style)

    return JSONResponse(await in_session(request, work))


@router.delete(JOB)
async def delete_job(
    request: Request, subscription_id: str, resource_group: str, collection_name: str, job_name: str
) -> Response:
    def work(session: Session) -> None:
        collection = collection_or_404(session, subscription_id, resource_group, collection_name)
        repo.delete_job(session, job_or_404(session, collection, job_name))

    await in_session(request, work)
    return Response(status_code=200)


@router.post(JOB + "/run")
async def run_job(
    request: Request, subscription_id: str, resource_group: str, collection_name: str, job_name: str
) -> Response:
    moment = now(request)

    def work(session: Session) -> None:
        collection = collection_or_404(session, subscription_id, resource_group, collection_name)
        job = job_or_404(session, collection, job_name)
        repo.request_run(session, job, moment)

    await in_session(request, work, wake=True)
    return Response(status_code=200)


@router.get(COLLECTION + "/jobs")
async def list_jobs(request: Request, subscription_id: str, resource_group: str, collection_name: str) -> Response:
    page = page_of(request)
    state = equality_filter(request, "state", JOB_STATES)
    style = client_dialect(request).job_list

    def work(session: Session) -> dict[str, Any]:
        collection = collection_or_404(session, subscription_id, resource_group, collection_name)
        rows = repo.list_jobs(session, collection, state, page.skip, page.top + 1)
        items = [job_to_wire(collection, job, style) for job in rows[: page.top]]
        return list_body(request, items, page, has_more=len(rows) > page.top)

    return JSONResponse(await in_session(request, work))
