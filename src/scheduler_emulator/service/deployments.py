"""Template deployments at resource-group scope (docs/reference/front-door.md#deployments): the preflight (template,
parameters, functions, resource types: refused before anything is created), the deployment's record, cancel, delete, and
what the dashboard and the API list. The run itself, resource by resource, is service.deployment_run."""

from __future__ import annotations

import contextlib
import hashlib
import json
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from scheduler_emulator.domain.authorization import normalise_scope
from scheduler_emulator.domain.errors import Conflict, NotFound
from scheduler_emulator.service import resource_groups, role_assignments
from scheduler_emulator.store import resources as store
from scheduler_emulator.store.models import DeploymentOperationRow, DeploymentRow
from scheduler_emulator.templates.errors import NeedsDeployment, TemplateError
from scheduler_emulator.templates.evaluation import Environment
from scheduler_emulator.templates.template import ResourceInstance, TemplateDeployment, resource_id

COLLECTION_TYPE = "microsoft.scheduler/jobcollections"
JOB_TYPE = "microsoft.scheduler/jobcollections/jobs"
ROLE_ASSIGNMENT_TYPE = "microsoft.authorization/roleassignments"
HOSTED_TYPES = (COLLECTION_TYPE, JOB_TYPE, ROLE_ASSIGNMENT_TYPE)
EXTENSION_TYPES = (ROLE_ASSIGNMENT_TYPE,)  # may name what they extend with ``scope``
ACTIVE_STATES = ("Accepted", "Running")
MODES = {"incremental": "Incremental", "complete": "Complete"}
DEFAULT_TENANT = "00000000-0000-0000-0000-000000000000"


class DeploymentRefused(Exception):
    """A deployment refused at preflight: nothing was created. ``code``/``target`` as ARM answers them."""

    def __init__(self, code: str, message: str, target: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.target = target


@dataclass(frozen=True, kw_only=True)
class DeploymentRef:
    subscription_id: str
    resource_group: str
    name: str


@dataclass(frozen=True, kw_only=True)
class Policy:
    """The operator's choices that shape a deployment: ``foreign``: refuse | inert."""

    foreign: str
    site_hosts: dict[str, str]


class PreflightLookup:
    """reference() and list*() before deploying: answered when the resource runs (ARM defers them too)."""

    def reference(self, resource_id: str, api_version: str | None, full: bool) -> Any:
        raise NeedsDeployment(resource_id)

    def list_action(self, action: str, resource_id: str, api_version: str | None) -> Any:
        raise NeedsDeployment(resource_id)


def read_request(body: dict[str, Any]) -> tuple[dict[str, Any], Any, str]:
    """(template, parameters, mode) from a deployment body; DeploymentRefused naming the field otherwise."""
    properties = body.get("properties")
    if not isinstance(properties, dict):
        raise DeploymentRefused("InvalidRequestContent", "The deployment needs 'properties'.", "properties")
    mode = properties.get("mode")
    if not isinstance(mode, str) or mode.lower() not in MODES:
        raise DeploymentRefused(
            "InvalidDeploymentMode", "properties.mode must be Incremental or Complete.", "properties.mode"
        )
    template = properties.get("template")
    if not isinstance(template, dict):
        raise DeploymentRefused("InvalidTemplate", "properties.template must be a JSON object.", "properties.template")
    return template, properties.get("parameters"), MODES[mode.lower()]


def environment(
    session: Session, ref: DeploymentRef, template: dict[str, Any], *, mode: str, moment: datetime
) -> Environment:
    """What subscription(), resourceGroup(), deployment() answer; 404 ResourceGroupNotFound (as ARM) when the
    group does not exist."""
    group = resource_groups.find(session, ref.subscription_id, ref.resource_group)
    if group is None:
        raise NotFound("resource group", ref.resource_group)
    group_object: dict[str, Any] = {
        "id": f"/subscriptions/{ref.subscription_id}/resourceGroups/{group.name}",
        "name": group.name,
        "type": "Microsoft.Resources/resourceGroups",
        "location": group.location,
        "properties": {"provisioningState": "Succeeded"},
    }
    if group.tags:
        group_object["tags"] = group.tags
    return Environment(
        subscription_id=ref.subscription_id,
        tenant_id=DEFAULT_TENANT,
        resource_group=group_object,
        deployment={
            "name": ref.name,
            "properties": {
                "template": template,
                "templateHash": template_hash(template),
                "mode": mode,
                "provisioningState": "Accepted",
            },
        },
        now=moment,
    )


def template_hash(template: dict[str, Any]) -> str:
    return str(int(hashlib.sha256(json.dumps(template, sort_keys=True).encode()).hexdigest()[:15], 16))


def on_error_target(session: Session, ref: DeploymentRef, body: dict[str, Any]) -> dict[str, Any] | None:
    """``onErrorDeployment`` resolved: ``{type, deploymentName}`` of the Succeeded deployment to redeploy if
    this one fails (LastSuccessful: the group's latest); DeploymentRefused when there is none."""
    properties = body.get("properties") or {}
    raw = properties.get("onErrorDeployment") if isinstance(properties, dict) else None
    if raw is None:
        return None
    target = "properties.onErrorDeployment"
    kind = raw.get("type", "LastSuccessful") if isinstance(raw, dict) else None
    if not isinstance(kind, str) or kind.lower() not in ("lastsuccessful", "specificdeployment"):
        raise DeploymentRefused(
            "InvalidOnErrorDeployment",
            "onErrorDeployment.type is LastSuccessful or SpecificDeployment.",
            f"{target}.type",
        )
    succeeded = [
        row
        for row in store.deployments_of(session, ref.subscription_id, ref.resource_group)
        if row.state == "Succeeded" and row.name_key != ref.name.lower()
    ]
    if kind.lower() == "specificdeployment":
        name = raw.get("deploymentName")
        chosen = [row for row in succeeded if isinstance(name, str) and row.name_key == name.lower()]
        kind = "SpecificDeployment"
    else:
        chosen = sorted(succeeded, key=lambda row: row.updated_at)[-1:]
        kind = "LastSuccessful"
    if not chosen:
        raise DeploymentRefused(
            "InvalidOnErrorDeployment",
            "onErrorDeployment names no succeeded deployment of this resource group to redeploy.",
            target,
        )
    return {"type": kind, "deploymentName": chosen[0].name}


def redeployment(
    session: Session, ref: DeploymentRef, policy: Policy, moment: datetime
) -> tuple[TemplateDeployment, str]:
    """A stored deployment prepared to run again from its template and parameters (onErrorDeployment).
    Secure parameter values are never stored: a template that needs one without a default cannot be redeployed
    (DeploymentRefused)."""
    row = get(session, ref)
    parameters = {name: {"value": shown["value"]} for name, shown in row.parameters.items() if "value" in shown}
    body = {"properties": {"mode": row.mode, "template": row.template, "parameters": parameters}}
    return preflight(session, ref, body, policy=policy, moment=moment)


def preflight(
    session: Session, ref: DeploymentRef, body: dict[str, Any], *, policy: Policy, moment: datetime
) -> tuple[TemplateDeployment, str]:
    """The deployment ready to run, and its mode; DeploymentRefused (or NotFound for the group) for anything
    ARM refuses before deploying: template syntax, unknown functions, parameters, resource types."""
    template, parameters, mode = read_request(body)
    env = environment(session, ref, template, mode=mode, moment=moment)
    try:
        deployment = TemplateDeployment(template, parameters, env, PreflightLookup())
        for instance in deployment.resources:
            with contextlib.suppress(NeedsDeployment):  # evaluated when the resource deploys
                body = deployment.body_of(instance)
                if instance.type.lower() == ROLE_ASSIGNMENT_TYPE:
                    grant_of(instance, body)
        deployment.output_types_check()
    except TemplateError as exc:
        raise DeploymentRefused(exc.code, exc.message, exc.target) from None
    except NeedsDeployment:
        raise DeploymentRefused(
            "InvalidTemplate",
            "The template functions 'reference' and 'list*' can only be used in resource properties and outputs.",
            "properties.template",
        ) from None
    _check_types(deployment, policy)
    return deployment, mode


def grant_of(instance: ResourceInstance, body: dict[str, Any]) -> role_assignments.Grant:
    """The role assignment a template's ``Microsoft.Authorization/roleAssignments`` resource asks for, on the
    resource group or on what its ``scope`` names; DeploymentRefused naming the resource's member otherwise."""
    try:
        return role_assignments.read_grant(instance.name, normalise_scope(instance.scope_id), body)
    except role_assignments.AssignmentRefused as exc:
        raise DeploymentRefused(exc.code, exc.message, f"{instance.path}.{exc.target or 'name'}") from None


def _check_types(deployment: TemplateDeployment, policy: Policy) -> None:
    """Every resource's type is one the emulator hosts (or, with inert, keeps)."""
    unsupported: list[str] = []
    foreign: list[str] = []
    for instance in deployment.resources:
        kind = instance.type.lower()
        placed = ("resourcegroup", "subscriptionid") + (() if kind in EXTENSION_TYPES else ("scope",))
        elsewhere = sorted(k for k in instance.definition if k.lower() in placed)
        if elsewhere:
            raise DeploymentRefused(
                "InvalidTemplate",
                f"The resource '{instance.name}' sets {', '.join(elsewhere)}: deploying to another scope is not "
                "supported by this emulator (every resource goes to the deployment's resource group).",
                f"{instance.path}.{elsewhere[0]}",
            )
        if kind in HOSTED_TYPES:
            continue
        if kind.startswith("microsoft.scheduler/") or kind == "microsoft.resources/deployments":
            unsupported.append(instance.type)
        elif policy.foreign != "inert":
            foreign.append(instance.type)
    if unsupported:
        raise DeploymentRefused(
            "InvalidTemplate",
            f"The template contains resource types this emulator cannot deploy: {', '.join(sorted(set(unsupported)))}"
            " (nested deployments are not supported).",
            "properties.template.resources",
        )
    if foreign:
        raise DeploymentRefused(
            "NoRegisteredProviderFound",
            "The template contains resource types this emulator does not host: "
            f"{', '.join(sorted(set(foreign), key=str.lower))}. Start the emulator with "
            "--arm-foreign-resources inert to keep them as inert resources.",
            "properties.template.resources",
        )


def begin(
    session: Session,
    ref: DeploymentRef,
    deployment: TemplateDeployment,
    *,
    mode: str,
    correlation_id: str,
    moment: datetime,
    on_error: dict[str, Any] | None = None,
) -> tuple[DeploymentRow, bool]:
    """Record the deployment as Accepted (a new run of an existing one replaces its outcome and operations);
    returns it and whether it was created. Conflict while a run of the same name is active."""
    row = store.find_deployment(session, ref.subscription_id, ref.resource_group, ref.name)
    created = row is None
    if row is not None and row.state in ACTIVE_STATES:
        raise Conflict(f"The deployment '{row.name}' is still active; cancel it or wait for it to finish.")
    template = deployment.template
    plan = {
        "resources": [
            {"id": r.id, "type": r.type, "name": r.name, "dependsOn": list(r.depends_on)} for r in deployment.resources
        ]
    }
    if row is None:
        row = DeploymentRow(
            subscription_id=ref.subscription_id,
            subscription_key=ref.subscription_id.lower(),
            resource_group=deployment.environment.resource_group["name"],
            resource_group_key=ref.resource_group.lower(),
            name=ref.name,
            name_key=ref.name.lower(),
        )
        session.add(row)
    else:
        store.clear_operations(session, row)
    row.state = "Accepted"
    row.mode = mode
    row.operation_id = uuid.uuid4().hex
    row.correlation_id = correlation_id
    row.template = template
    row.template_hash = template_hash(template)
    row.parameters = deployment.display_parameters()
    row.plan = plan
    row.outputs = None
    row.output_resources = None
    row.error = None
    row.on_error = on_error
    row.cancel_requested = False
    row.started_at = moment
    row.updated_at = moment
    session.flush()
    return row, created


def validate(
    session: Session, ref: DeploymentRef, body: dict[str, Any], *, policy: Policy, moment: datetime
) -> dict[str, Any]:
    """POST …/validate: the preflight alone; the validated resources' ids and types."""
    deployment, mode = preflight(session, ref, body, policy=policy, moment=moment)
    return {
        "mode": mode,
        "parameters": deployment.display_parameters(),
        "resources": [
            {"id": r.id, "type": r.type, "name": r.name, "apiVersion": r.api_version} for r in deployment.resources
        ],
    }


def get(session: Session, ref: DeploymentRef) -> DeploymentRow:
    row = store.find_deployment(session, ref.subscription_id, ref.resource_group, ref.name)
    if row is None:
        raise NotFound("deployment", ref.name)
    return row


def list_in_group(session: Session, subscription_id: str, resource_group: str) -> list[DeploymentRow]:
    """The group's deployments, oldest first (for the API and the dashboard)."""
    return store.deployments_of(session, subscription_id, resource_group)


def recent(session: Session, limit: int = 100) -> list[DeploymentRow]:
    """The latest deployments of every subscription, newest first (for the dashboard)."""
    return store.all_deployments(session, limit)


def operations(session: Session, ref: DeploymentRef) -> list[DeploymentOperationRow]:
    """The deployment's operations, in the order they ran (for the API and the dashboard)."""
    return store.operations_of(session, get(session, ref))


def cancel(session: Session, ref: DeploymentRef, moment: datetime) -> None:
    """Ask an active run to stop before its next resource; Conflict when it is not active."""
    row = get(session, ref)
    if row.state not in ACTIVE_STATES:
        raise Conflict(f"The deployment '{row.name}' is {row.state}: only an active deployment can be canceled.")
    row.cancel_requested = True
    row.updated_at = moment


def delete(session: Session, ref: DeploymentRef) -> None:
    """Remove the deployment's record (its resources stay, as in ARM); Conflict while it runs."""
    row = get(session, ref)
    if row.state in ACTIVE_STATES:
        raise Conflict(f"The deployment '{row.name}' is still active; cancel it first.")
    store.delete_deployment(session, row)


def by_operation(session: Session, operation_id: str) -> DeploymentRow | None:
    return store.deployment_by_operation(session, operation_id)


def export_template(session: Session, ref: DeploymentRef) -> dict[str, Any]:
    return get(session, ref).template


def instance_id(ref: DeploymentRef, resource_type: str, name: str) -> str:
    return resource_id(ref.subscription_id, ref.resource_group, resource_type, name)
