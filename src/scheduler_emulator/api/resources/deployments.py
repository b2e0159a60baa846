"""Template deployments at resource-group scope (docs/reference/front-door.md#deployments):
``…/resourcegroups/{rg}/providers/Microsoft.Resources/deployments/{name}[/cancel|/validate|/exportTemplate|
/operationStatuses/{id}]`` and the operations at ``/subscriptions/{s}/resourcegroups/{rg}/deployments/{name}/
operations``. A PUT runs the preflight, answers 201 with ``Azure-AsyncOperation`` and ``Retry-After``, and runs the
deployment in the background (service.deployment_run)."""

from __future__ import annotations

import asyncio
import uuid
from datetime import datetime
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from sqlalchemy.orm import Session

from scheduler_emulator.api import errors
from scheduler_emulator.api.authorization import Authorizer
from scheduler_emulator.api.context import in_session, now, parse_json_object, read_body, retry_floor, wake_dispatcher
from scheduler_emulator.api.permissions import readable, refusal_of
from scheduler_emulator.api.resources.groups import in_group_session
from scheduler_emulator.api.resources.links import with_linked_content
from scheduler_emulator.domain.clock import isoformat_z
from scheduler_emulator.service import deployment_run, deployments
from scheduler_emulator.service.deployments import DeploymentRef, DeploymentRefused, Policy
from scheduler_emulator.store import resources as store
from scheduler_emulator.store.models import DeploymentOperationRow, DeploymentRow
from scheduler_emulator.templates.jsonc import UnclosedComment, to_strict_json
from scheduler_emulator.templates.template import TemplateDeployment

router = APIRouter()

DEPLOYMENTS = (
    "/subscriptions/{subscription_id}/resourceGroups/{resource_group}/providers/Microsoft.Resources/deployments"
)
DEPLOYMENT = DEPLOYMENTS + "/{deployment_name}"
OPERATIONS = "/subscriptions/{subscription_id}/resourceGroups/{resource_group}/deployments/{deployment_name}/operations"
DEPLOYMENT_TYPE = "Microsoft.Resources/deployments"
DEPLOYMENT_READ = DEPLOYMENT_TYPE + "/read"
RETRY_AFTER = "1"  # seconds: the SDKs' pollers otherwise wait 30 s between polls


def _ref(subscription_id: str, resource_group: str, deployment_name: str) -> DeploymentRef:
    return DeploymentRef(subscription_id=subscription_id, resource_group=resource_group, name=deployment_name)


def _policy(request: Request) -> Policy:
    arm = request.app.state.settings.arm
    return Policy(foreign=arm.foreign_resources, site_hosts=arm.site_hosts)


async def _lenient_body(request: Request) -> dict[str, Any]:
    """The body as az sends it: JSON with comments and an unquoted ``template`` key (these endpoints only),
    its template and parameters links fetched."""
    raw = await read_body(request)
    try:
        text = raw.decode("utf-8")
        return await with_linked_content(request, parse_json_object(to_strict_json(text).encode("utf-8")))
    except UnicodeDecodeError:
        raise errors.invalid_request_content("the body is not UTF-8") from None
    except UnclosedComment as exc:
        raise errors.invalid_request_content(str(exc)) from None


def resource_writes(planned: TemplateDeployment) -> list[tuple[str, str]]:
    """The (write action, resource id) of each resource the template deploys: its caller needs every one
    (docs/reference/authorization.md#template-deployments)."""
    return [(f"{instance.type}/write", instance.id) for instance in planned.resources]


def redeployment_writes(
    session: Session, ref: DeploymentRef, target: str, policy: Policy, moment: datetime
) -> list[tuple[str, str]]:
    """What the deployment ``onErrorDeployment`` names would write if this one fails: that deployment itself and
    each resource of its template. Its caller needs them all, as for its own template
    (docs/reference/authorization.md#template-deployments). A template that can no longer be redeployed writes
    nothing: its run ends in OnErrorDeploymentFailed."""
    target_ref = _ref(ref.subscription_id, ref.resource_group, target)
    try:
        planned, _mode = deployments.redeployment(session, target_ref, policy, moment)
    except DeploymentRefused:
        return []
    deployment_id = (
        f"/subscriptions/{ref.subscription_id}/resourceGroups/{ref.resource_group}/providers/{DEPLOYMENT_TYPE}/{target}"
    )
    return [(f"{DEPLOYMENT_TYPE}/write", deployment_id), *resource_writes(planned)]


def _refused(exc: DeploymentRefused) -> errors.ArmError:
    return errors.ArmError(400, exc.code, exc.message, exc.target)


def _duration(row: DeploymentRow) -> str:
    seconds = max(0.0, (row.updated_at - row.started_at).total_seconds())
    return f"PT{seconds:.3f}S"


def deployment_to_wire(row: DeploymentRow) -> dict[str, Any]:
    resources = row.plan.get("resources", [])
    namespaces: dict[str, set[str]] = {}
    for resource in resources:
        namespace, _, rest = resource["type"].partition("/")
        namespaces.setdefault(namespace, set()).add(rest)
    properties: dict[str, Any] = {
        "templateHash": row.template_hash,
        "parameters": row.parameters,
        "mode": row.mode,
        "provisioningState": row.state,
        "timestamp": isoformat_z(row.updated_at),
        "duration": _duration(row),
        "correlationId": row.correlation_id,
        "providers": [
            {"namespace": ns, "resourceTypes": [{"resourceType": t, "locations": []} for t in sorted(types)]}
            for ns, types in namespaces.items()
        ],
        "dependencies": [
            {
                "id": resource["id"],
                "resourceType": resource["type"],
                "resourceName": resource["name"],
                "dependsOn": [{"id": d} for d in resource["dependsOn"]],
            }
            for resource in resources
            if resource["dependsOn"]
        ],
    }
    if row.outputs is not None:
        properties["outputs"] = row.outputs
    if row.output_resources is not None:
        properties["outputResources"] = row.output_resources["value"]
    if row.error is not None:
        properties["error"] = row.error
    if row.on_error is not None:
        properties["onErrorDeployment"] = row.on_error
    return {
        "id": f"/subscriptions/{row.subscription_id}/resourceGroups/{row.resource_group}/providers/"
        f"{DEPLOYMENT_TYPE}/{row.name}",
        "name": row.name,
        "type": DEPLOYMENT_TYPE,
        "properties": properties,
    }


def operation_to_wire(row: DeploymentRow, operation: DeploymentOperationRow) -> dict[str, Any]:
    properties: dict[str, Any] = {
        "provisioningOperation": "Create",
        "provisioningState": operation.state,
        "timestamp": isoformat_z(operation.timestamp),
        "duration": f"PT{operation.duration_ms / 1000:.3f}S",
        "trackingId": operation.operation_id.lower(),
        "statusCode": operation.status_code,
        "targetResource": {
            "id": operation.target_id,
            "resourceType": operation.resource_type,
            "resourceName": operation.resource_name,
        },
    }
    if operation.status_message is not None:
        properties["statusMessage"] = operation.status_message
    return {
        "id": f"/subscriptions/{row.subscription_id}/resourceGroups/{row.resource_group}/providers/"
        f"{DEPLOYMENT_TYPE}/{row.name}/operations/{operation.operation_id}",
        "operationId": operation.operation_id,
        "properties": properties,
    }


def _status_url(request: Request, row: DeploymentRow) -> str:
    base = str(request.base_url).rstrip("/")
    version = request.query_params.get("api-version", "")
    return (
        f"{base}/subscriptions/{row.subscription_id}/resourcegroups/{row.resource_group}/providers/"
        f"{DEPLOYMENT_TYPE}/{row.name}/operationStatuses/{row.operation_id}?api-version={version}"
    )


@router.put(DEPLOYMENT)
async def create_or_update_deployment(
    request: Request, subscription_id: str, resource_group: str, deployment_name: str
) -> Response:
    body = await _lenient_body(request)
    ref = _ref(subscription_id, resource_group, deployment_name)
    policy = _policy(request)
    moment = now(request)
    correlation = request.headers.get("x-ms-correlation-request-id") or str(uuid.uuid4())

    refuse = await refusal_of(request)

    def work(session: Session) -> tuple[DeploymentRow, bool, Any]:
        try:
            planned, mode = deployments.preflight(session, ref, body, policy=policy, moment=moment)
            on_error = deployments.on_error_target(session, ref, body)
        except DeploymentRefused as exc:
            raise _refused(exc) from None
        refuse(resource_writes(planned))  # before anything is recorded, as ARM's preflight
        if on_error is not None:
            refuse(redeployment_writes(session, ref, on_error["deploymentName"], policy, moment))
        row, created = deployments.begin(
            session, ref, planned, mode=mode, correlation_id=correlation[:64], moment=moment, on_error=on_error
        )
        return row, created, planned

    row, created, planned = await in_group_session(request, work)
    authorizer: Authorizer = request.app.state.authorizer
    context = deployment_run.RunContext(
        database=request.app.state.database,
        now=lambda: now(request),
        wake=lambda: wake_dispatcher(request),
        floor=retry_floor(request),
        policy=policy,
        configured_assignments=authorizer.directory.implicit,
        deployed_by=(await authorizer.subject(request)).object_id,
    )
    runs: set[asyncio.Task[None]] = request.app.state.deployment_runs
    task = asyncio.create_task(deployment_run.run(context, ref, planned, row.operation_id))
    runs.add(task)
    task.add_done_callback(runs.discard)
    headers = {"Azure-AsyncOperation": _status_url(request, row), "Retry-After": RETRY_AFTER}
    return JSONResponse(deployment_to_wire(row), status_code=201 if created else 200, headers=headers)


@router.get(DEPLOYMENT)
async def get_deployment(request: Request, subscription_id: str, resource_group: str, deployment_name: str) -> Response:
    ref = _ref(subscription_id, resource_group, deployment_name)
    row = await _deployment(request, ref)
    return JSONResponse(deployment_to_wire(row))


async def _deployment(request: Request, ref: DeploymentRef) -> DeploymentRow:
    try:
        return await in_session(request, lambda session: deployments.get(session, ref))
    except errors.ArmError as exc:
        if exc.status == 404:
            raise errors.ArmError(404, "DeploymentNotFound", f"Deployment '{ref.name}' could not be found.") from None
        raise


@router.head(DEPLOYMENT)
async def deployment_exists(
    request: Request, subscription_id: str, resource_group: str, deployment_name: str
) -> Response:
    ref = _ref(subscription_id, resource_group, deployment_name)
    found = await in_session(
        request, lambda session: store.find_deployment(session, ref.subscription_id, ref.resource_group, ref.name)
    )
    return Response(status_code=204 if found is not None else 404)


@router.get(DEPLOYMENTS + "/")
@router.get(DEPLOYMENTS)
async def list_deployments(request: Request, subscription_id: str, resource_group: str) -> Response:
    rows = await in_session(
        request, lambda session: deployments.list_in_group(session, subscription_id, resource_group)
    )
    shown = readable(request)  # what the caller may read (docs/reference/authorization.md#lists)
    listed = [deployment_to_wire(row) for row in rows]
    return JSONResponse({"value": [item for item in listed if shown.may(DEPLOYMENT_READ, item["id"])]})


@router.delete(DEPLOYMENT)
async def delete_deployment(
    request: Request, subscription_id: str, resource_group: str, deployment_name: str
) -> Response:
    ref = _ref(subscription_id, resource_group, deployment_name)
    operation_id = uuid.uuid4().hex
    moment = now(request)

    def work(session: Session) -> None:
        deployments.delete(session, ref)
        store.record_arm_operation(session, operation_id, subscription_id, status="Succeeded", now=moment)

    await _deployment(request, ref)
    await in_session(request, work)
    location = str(
        request.url_for("group_operation_result", subscription_id=subscription_id, operation_id=operation_id)
    )
    version = request.query_params.get("api-version", "")
    return Response(status_code=202, headers={"Location": f"{location}?api-version={version}", "Retry-After": "1"})


@router.post(DEPLOYMENT + "/cancel")
async def cancel_deployment(
    request: Request, subscription_id: str, resource_group: str, deployment_name: str
) -> Response:
    ref = _ref(subscription_id, resource_group, deployment_name)
    moment = now(request)
    await _deployment(request, ref)
    try:
        await in_session(request, lambda session: deployments.cancel(session, ref, moment))
    except errors.ArmError as exc:
        if exc.status == 409:
            raise errors.ArmError(409, "DeploymentCannotBeCancelled", exc.message) from None
        raise
    return Response(status_code=204)


@router.post(DEPLOYMENT + "/validate")
async def validate_deployment(
    request: Request, subscription_id: str, resource_group: str, deployment_name: str
) -> Response:
    body = await _lenient_body(request)
    ref = _ref(subscription_id, resource_group, deployment_name)
    policy = _policy(request)
    moment: datetime = now(request)

    refuse = await refusal_of(request)

    def work(session: Session) -> dict[str, Any]:
        try:
            validated = deployments.validate(session, ref, body, policy=policy, moment=moment)
        except DeploymentRefused as exc:
            raise _refused(exc) from None
        refuse((f"{r['type']}/write", r["id"]) for r in validated["resources"])
        return validated

    result = await in_group_session(request, work)
    return JSONResponse(
        {
            "id": f"/subscriptions/{subscription_id}/resourceGroups/{resource_group}/providers/"
            f"{DEPLOYMENT_TYPE}/{deployment_name}",
            "name": deployment_name,
            "type": DEPLOYMENT_TYPE,
            "properties": {
                "provisioningState": "Succeeded",
                "mode": result["mode"],
                "parameters": result["parameters"],
                "validatedResources": [{"id": r["id"]} for r in result["resources"]],
                "timestamp": isoformat_z(moment),
                "duration": "PT0S",
                "correlationId": request.headers.get("x-ms-correlation-request-id", str(uuid.uuid4())),
            },
        }
    )


@router.post(DEPLOYMENT + "/exportTemplate")
async def export_template(
    request: Request, subscription_id: str, resource_group: str, deployment_name: str
) -> Response:
    ref = _ref(subscription_id, resource_group, deployment_name)
    row = await _deployment(request, ref)
    return JSONResponse({"template": row.template})


@router.get(DEPLOYMENT + "/operationStatuses/{operation_id}")
async def deployment_status(
    request: Request, subscription_id: str, resource_group: str, deployment_name: str, operation_id: str
) -> Response:
    row = await in_session(request, lambda session: deployments.by_operation(session, operation_id))
    if row is None or row.name_key != deployment_name.lower() or row.subscription_key != subscription_id.lower():
        raise errors.resource_not_found("operation", operation_id)
    body: dict[str, Any] = {"status": "Running" if row.state == "Accepted" else row.state}
    if row.error is not None:
        body["error"] = row.error
    headers = {"Retry-After": RETRY_AFTER} if row.state in deployments.ACTIVE_STATES else {}
    return JSONResponse(body, headers=headers)


async def _operations(request: Request, ref: DeploymentRef) -> tuple[DeploymentRow, list[DeploymentOperationRow]]:
    def work(session: Session) -> tuple[DeploymentRow, list[DeploymentOperationRow]]:
        return deployments.get(session, ref), deployments.operations(session, ref)

    await _deployment(request, ref)
    return await in_session(request, work)


@router.get(OPERATIONS)
@router.get(DEPLOYMENT + "/operations")
async def list_operations(
    request: Request, subscription_id: str, resource_group: str, deployment_name: str
) -> Response:
    row, operations = await _operations(request, _ref(subscription_id, resource_group, deployment_name))
    return JSONResponse({"value": [operation_to_wire(row, operation) for operation in operations]})


@router.get(OPERATIONS + "/{operation_id}")
@router.get(DEPLOYMENT + "/operations/{operation_id}")
async def get_operation(
    request: Request, subscription_id: str, resource_group: str, deployment_name: str, operation_id: str
) -> Response:
    row, operations = await _operations(request, _ref(subscription_id, resource_group, deployment_name))
    for operation in operations:
        if operation.operation_id.lower() == operation_id.lower():
            return JSONResponse(operation_to_wire(row, operation))
    raise errors.resource_not_found("deployment operation", operation_id)
