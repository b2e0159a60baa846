"""A deployment's run, resource by resource in dependency order, each in its own transaction through the
service layer (collections, jobs) or, for other providers' resources kept inert, the generic store. A
resource that fails ends the run Failed (``DeploymentFailed``, the resource's error in ``details``) and keeps
what was deployed before it (no rollback, as ARM); Complete mode then removes what the template does not
name; outputs are evaluated last. ``cancel`` is honoured between resources."""

from __future__ import annotations

import asyncio
import logging
import re
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from pydantic import ValidationError
from sqlalchemy.orm import Session

from scheduler_emulator.domain.authorization import Assignment, normalise_scope
from scheduler_emulator.domain.errors import Conflict, FieldError, InvalidName, NotFound, TooLarge
from scheduler_emulator.domain.inert_resources import computed_properties, generated_keys
from scheduler_emulator.schemas.common import first_field_error
from scheduler_emulator.schemas.job import JobDefinitionIn, strip_secrets
from scheduler_emulator.schemas.job_collection import JobCollectionIn
from scheduler_emulator.schemas.member_names import canonical_names
from scheduler_emulator.service import collections, deployments, jobs, role_assignments
from scheduler_emulator.service.deployments import (
    COLLECTION_TYPE,
    JOB_TYPE,
    ROLE_ASSIGNMENT_TYPE,
    DeploymentRef,
    Policy,
)
from scheduler_emulator.service.refs import CollectionRef
from scheduler_emulator.service.role_assignments import AssignmentRefused
from scheduler_emulator.store import repository as repo
from scheduler_emulator.store import resources as store
from scheduler_emulator.store.database import Database
from scheduler_emulator.store.models import DeploymentOperationRow, DeploymentRow, GenericResourceRow
from scheduler_emulator.store.write_scope import WriteScope, write_scope
from scheduler_emulator.templates.errors import TemplateError
from scheduler_emulator.templates.template import ResourceInstance, TemplateDeployment

log = logging.getLogger("scheduler_emulator.deployments")
_ID = re.compile(r"^/subscriptions/([^/]+)/resourceGroups/([^/]+)/providers/([^/]+)/(.+)$", re.IGNORECASE)


@dataclass(frozen=True, kw_only=True)
class RunContext:
    """What a run needs from the process: the store, the clock, the dispatcher's wake-up, the operator's rules."""

    database: Database
    now: Callable[[], datetime]
    wake: Callable[[], None]
    floor: timedelta
    policy: Policy
    # for role assignments: the configuration's own (a template cannot make them twice) and who deploys
    configured_assignments: tuple[Assignment, ...] = ()
    deployed_by: str | None = None


@dataclass(frozen=True)
class Failure:
    """A resource's failure as ARM reports it in the deployment's details."""

    status: int
    code: str
    message: str

    def error(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message}


def _failure_of(exc: Exception) -> Failure:
    if isinstance(exc, ValidationError):
        exc = first_field_error(exc)
    if isinstance(exc, FieldError):
        return Failure(400, "BadRequest", f"The value of '{exc.path}' is invalid: {exc.problem}")
    if isinstance(exc, Conflict):
        return Failure(409, "Conflict", str(exc))
    if isinstance(exc, NotFound):
        return Failure(404, "ResourceNotFound", str(exc))
    if isinstance(exc, InvalidName):
        return Failure(400, "InvalidResourceName", str(exc))
    if isinstance(exc, TooLarge):
        return Failure(400, "LimitExceeded", str(exc))
    if isinstance(exc, TemplateError):
        return Failure(404 if exc.code == "ResourceNotFound" else 400, exc.code, exc.message)
    if isinstance(exc, AssignmentRefused):
        return Failure(exc.status, exc.code, exc.message)
    raise exc


_EXPECTED = (FieldError, Conflict, NotFound, InvalidName, TooLarge, TemplateError, ValidationError, AssignmentRefused)


def _split_id(resource_id: str) -> tuple[str, str, str, str] | None:
    """(subscription, group, type, name) of a resource id."""
    match = _ID.match(resource_id.rstrip("/"))
    if match is None:
        return None
    parts = match.group(4).split("/")
    if len(parts) % 2:
        return None
    types, names = parts[0::2], parts[1::2]
    return match.group(1), match.group(2), "/".join([match.group(3), *types]), "/".join(names)


class StoreLookup:
    """reference() and list*() answered from the store, inside one session."""

    def __init__(self, session: Session, policy: Policy) -> None:
        self.session = session
        self.policy = policy

    def reference(self, resource_id: str, api_version: str | None, full: bool) -> Any:
        parts = _split_id(resource_id)
        if parts is None:
            raise TemplateError(f"'{resource_id[:200]}' is not a resource id.")
        subscription, group, kind, name = parts
        if kind.lower() == COLLECTION_TYPE:
            collection = repo.find_collection(self.session, subscription, group, name)
            if collection is not None:
                properties = {**collection.properties, "state": collection.state}
                properties.setdefault("sku", {"name": collection.sku})
                resource = {"location": collection.location, "tags": collection.tags}
                return self._answer(
                    resource_id, kind=kind, name=name, properties=properties, resource=resource, full=full
                )
        elif kind.lower() == JOB_TYPE:
            collection_name, job_name = name.split("/", 1)
            connection = self.session.connection()
            found = repo.read_collection_with_job(connection, subscription, group, collection_name, job_name)
            if found is not None and found[1] is not None:
                properties = {**strip_secrets(found[1].definition), "state": found[1].state}
                return self._answer(resource_id, kind=kind, name=name, properties=properties, resource={}, full=full)
        else:
            generic = store.find_generic(self.session, subscription, group, kind, name)
            if generic is not None:
                return self._answer(
                    resource_id,
                    kind=generic.type,
                    name=generic.name,
                    properties=_properties(generic, self.policy),
                    resource=generic.body,
                    full=full,
                )
        raise TemplateError(
            f"The Resource '{kind}/{name}' under resource group '{group}' was not found.", code="ResourceNotFound"
        )

    @staticmethod
    def _answer(
        resource_id: str, *, kind: str, name: str, properties: dict[str, Any], resource: dict[str, Any], full: bool
    ) -> Any:
        if not full:
            return properties
        whole = {k: v for k, v in resource.items() if k != "properties" and v is not None}
        return {**whole, "id": resource_id, "name": name, "type": kind, "properties": properties}

    def list_action(self, action: str, resource_id: str, api_version: str | None) -> Any:
        parts = _split_id(resource_id)
        if parts is None:
            raise TemplateError(f"'{resource_id[:200]}' is not a resource id.")
        subscription, group, kind, name = parts
        names = name.split("/")
        types = kind.split("/")
        # the resource or an inert ancestor (a namespace's authorization rule exists with the namespace)
        for depth in range(len(names), 0, -1):
            ancestor_type = "/".join(types[: depth + 1])
            if store.find_generic(self.session, subscription, group, ancestor_type, "/".join(names[:depth])):
                return generated_keys(resource_id)
        raise TemplateError(
            f"The Resource '{kind}/{name}' under resource group '{group}' was not found, or has no '{action}'.",
            code="ResourceNotFound",
        )


def _properties(generic: GenericResourceRow, policy: Policy) -> dict[str, Any]:
    sent = generic.body.get("properties")
    return {
        **computed_properties(generic.type, generic.name, policy.site_hosts),
        **(sent if isinstance(sent, dict) else {}),
    }


async def run(context: RunContext, ref: DeploymentRef, deployment: TemplateDeployment, operation_id: str) -> None:
    """Run the deployment whose current run is ``operation_id`` to its end (Succeeded, Failed or Canceled)."""
    deployment.fresh_budget()
    try:
        await asyncio.to_thread(_set_state, context, operation_id, "Running", None)
        for instance in deployment.resources:
            if await asyncio.to_thread(_canceled, context, operation_id):
                await asyncio.to_thread(_set_state, context, operation_id, "Canceled", None)
                return
            failure = await asyncio.to_thread(_deploy_one, context, operation_id, deployment, instance)
            if failure is not None:
                error = {
                    "code": "DeploymentFailed",
                    "message": "At least one resource deployment operation failed. Please list deployment "
                    "operations for details.",
                    "details": [failure.error()],
                }
                await asyncio.to_thread(_set_state, context, operation_id, "Failed", error)
                await _redeploy_on_error(context, ref, operation_id)
                return
        await asyncio.to_thread(_finish, context, ref, operation_id, deployment)
    except asyncio.CancelledError:
        # The emulator is stopping: record it (a blocking write, the loop is going away), then let the task end.
        _set_state(
            context,
            operation_id,
            "Failed",
            {
                "code": "DeploymentInterrupted",
                "message": "The emulator stopped while this deployment ran; deploy it again.",
            },
        )
        raise
    except Exception:
        log.exception("deployment %s/%s stopped on an unexpected error", ref.resource_group, ref.name)
        error = {"code": "InternalServerError", "message": "The deployment stopped on an internal error; see the log."}
        await asyncio.to_thread(_set_state, context, operation_id, "Failed", error)


async def _redeploy_on_error(context: RunContext, ref: DeploymentRef, operation_id: str) -> None:
    """onErrorDeployment: run the deployment it names again (as itself), and note how that went."""
    prepared = await asyncio.to_thread(_prepare_redeployment, context, ref, operation_id)
    if prepared is None:
        return
    target, planned, target_operation = prepared
    await run(context, target, planned, target_operation)
    await asyncio.to_thread(_note_redeployed, context, operation_id, target_operation)


def _note_redeployed(context: RunContext, operation_id: str, target_operation: str) -> None:
    with context.database.session() as session:
        redeployed = store.deployment_by_operation(session, target_operation)
        row = _current(session, operation_id)
        if row is not None and row.on_error is not None:
            row.on_error = {**row.on_error, "provisioningState": redeployed.state if redeployed else "Failed"}


def _prepare_redeployment(
    context: RunContext, ref: DeploymentRef, operation_id: str
) -> tuple[DeploymentRef, TemplateDeployment, str] | None:
    with context.database.session() as session:
        row = _current(session, operation_id)
        if row is None or row.on_error is None:
            return None
        target = DeploymentRef(
            subscription_id=ref.subscription_id, resource_group=ref.resource_group, name=row.on_error["deploymentName"]
        )
        moment = context.now()
        try:
            planned, mode = deployments.redeployment(session, target, context.policy, moment)
            redeployed, _ = deployments.begin(
                session, target, planned, mode=mode, correlation_id=row.correlation_id, moment=moment
            )
        except (deployments.DeploymentRefused, Conflict, NotFound) as exc:
            row.on_error = {
                **row.on_error,
                "provisioningState": "Failed",
                "error": {"code": "OnErrorDeploymentFailed", "message": getattr(exc, "message", str(exc))},
            }
            return None
        row.on_error = {**row.on_error, "provisioningState": "Running"}
        return target, planned, redeployed.operation_id


def _current(session: Session, operation_id: str) -> DeploymentRow | None:
    return store.deployment_by_operation(session, operation_id)


def _set_state(context: RunContext, operation_id: str, state: str, error: dict[str, Any] | None) -> None:
    with context.database.session() as session:
        row = _current(session, operation_id)
        if row is not None:
            row.state = state
            row.error = error
            row.updated_at = context.now()


def _canceled(context: RunContext, operation_id: str) -> bool:
    with context.database.session() as session:
        row = _current(session, operation_id)
        return row is None or row.cancel_requested


def _deploy_one(
    context: RunContext, operation_id: str, deployment: TemplateDeployment, instance: ResourceInstance
) -> Failure | None:
    """Deploy one resource in its own transaction, then record its operation; its failure, if any."""
    began = time.perf_counter()
    failure: Failure | None = None
    created = False
    try:
        with context.database.session() as session:
            deployment.lookup = StoreLookup(session, context.policy)
            body = deployment.body_of(instance)
            scope = write_scope(context.database, session)
            created = _write(scope, context, instance, body)
            if instance.type.lower() == JOB_TYPE:  # other processes' dispatchers (this one's: context.wake below)
                scope.announce_change()
    except _EXPECTED as exc:
        failure = _failure_of(exc)
    if failure is None and instance.type.lower() == JOB_TYPE:
        context.wake()
    with context.database.session() as session:
        row = _current(session, operation_id)
        if row is None:
            return failure
        store.add_operation(
            session,
            DeploymentOperationRow(
                deployment_id=row.id,
                operation_id=uuid.uuid4().hex[:16].upper(),
                resource_type=instance.type,
                resource_name=instance.name,
                target_id=instance.id,
                state="Failed" if failure else "Succeeded",
                status_code=failure.code if failure else ("Created" if created else "OK"),
                status_message={"error": failure.error(), "status": failure.status} if failure else None,
                timestamp=context.now(),
                duration_ms=int((time.perf_counter() - began) * 1000),
            ),
        )
    return failure


def _write(scope: WriteScope, context: RunContext, instance: ResourceInstance, body: dict[str, Any]) -> bool:
    """Create or update the resource through the service layer, in ``scope``'s transaction; whether it was
    created."""
    session = scope.session
    parts = _split_id(instance.id)
    assert parts is not None  # built by the template from its own parts
    subscription, group, _, _ = parts
    moment = context.now()
    kind = instance.type.lower()
    if kind == COLLECTION_TYPE:
        ref = CollectionRef(subscription_id=subscription, resource_group=group, name=instance.name)
        scope.hold(f"subscription:{subscription.lower()}")  # then the collection's, as the API takes them
        scope.lock(ref)
        _, created = collections.put(
            session, ref, canonical_names(body, JobCollectionIn), moment=moment, floor=context.floor
        )
        return created
    if kind == JOB_TYPE:
        collection_name, job_name = instance.name.split("/", 1)
        ref = CollectionRef(subscription_id=subscription, resource_group=group, name=collection_name)
        properties = canonical_names(body, JobDefinitionIn).get("properties")
        if not isinstance(properties, dict):
            raise FieldError("properties", "is required and must be a JSON object")
        scope.lock(ref)
        _, _, created = jobs.put(session, ref, job_name, properties, moment=moment, floor=context.floor)
        scope.announce_change()
        return created
    if kind == ROLE_ASSIGNMENT_TYPE:
        grant = role_assignments.read_grant(instance.name, normalise_scope(instance.scope_id), body)
        scope.hold(f"subscription:{subscription.lower()}")  # as the REST API's PUT (api/roles.py) holds it
        _, created = role_assignments.create(
            session,
            grant,
            configured=context.configured_assignments,
            created_by=context.deployed_by,
            moment=moment,
        )
        return created
    return _write_generic(session, instance, subscription=subscription, group=group, body=body, moment=moment)


def _write_generic(
    session: Session,
    instance: ResourceInstance,
    *,
    subscription: str,
    group: str,
    body: dict[str, Any],
    moment: datetime,
) -> bool:
    row = store.find_generic(session, subscription, group, instance.type, instance.name)
    created = row is None
    if row is None:
        row = GenericResourceRow(
            subscription_id=subscription,
            subscription_key=subscription.lower(),
            resource_group=group,
            resource_group_key=group.lower(),
            type=instance.type,
            type_key=instance.type.lower(),
            name=instance.name,
            name_key=instance.name.lower(),
            keys=generated_keys(instance.id),
            created_at=moment,
        )
        session.add(row)
    location = body.get("location")
    row.location = location if isinstance(location, str) else None
    tags = body.get("tags")
    row.tags = tags if isinstance(tags, dict) else None
    row.body = body
    session.flush()
    return created


def _finish(context: RunContext, ref: DeploymentRef, operation_id: str, deployment: TemplateDeployment) -> None:
    """Complete mode's removals, then the outputs; the run ends Succeeded (or Failed on its outputs)."""
    named = {r.id.lower() for r in deployment.resources}
    with context.database.session() as session:
        row = _current(session, operation_id)
        if row is None:
            return
        if row.mode == "Complete":
            _remove_unnamed(session, ref, named)
        deployment.lookup = StoreLookup(session, context.policy)
        try:
            row.outputs = deployment.outputs()
        except _EXPECTED as exc:
            failure = _failure_of(exc)
            row.state = "Failed"
            row.error = {
                "code": "DeploymentOutputEvaluationFailed",
                "message": f"Unable to evaluate the template outputs: {failure.message}",
                "details": [failure.error()],
            }
            row.updated_at = context.now()
            return
        row.output_resources = {"value": [{"id": r.id} for r in deployment.resources]}
        row.state = "Succeeded"
        row.updated_at = context.now()


def _remove_unnamed(session: Session, ref: DeploymentRef, named: set[str]) -> None:
    """Complete mode: the group's collections, jobs and inert resources the template does not name."""
    for collection in store.collections_in_group(session, ref.subscription_id, ref.resource_group):
        collection_id = (
            f"/subscriptions/{collection.subscription_id}/resourceGroups/{collection.resource_group}"
            f"/providers/Microsoft.Scheduler/jobCollections/{collection.name}"
        ).lower()
        if collection_id not in named:
            repo.delete_collection(session, collection)
            continue
        for job in repo.jobs_of(session, collection):
            if f"{collection_id}/jobs/{job.name.lower()}" not in named:
                repo.delete_job(session, job)
    for generic in store.generic_in_group(session, ref.subscription_id, ref.resource_group):
        parts = generic.type.split("/")
        names = generic.name.split("/")
        tail = "/".join(f"{t}/{n}" for t, n in zip(parts[1:], names, strict=False))
        generic_id = (
            f"/subscriptions/{generic.subscription_id}/resourceGroups/{generic.resource_group}"
            f"/providers/{parts[0]}/{tail}"
        ).lower()
        if generic_id not in named:
            session.delete(generic)
