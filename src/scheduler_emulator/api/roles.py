"""Microsoft.Authorization as ARM serves it (docs/reference/authorization.md#the-endpoints): the built-in role
definitions and role assignments at ``{scope}/providers/Microsoft.Authorization/…``, scope a subscription, a
resource group, a job collection or the root ``/``. These routes check their own
permissions: ``Microsoft.Authorization/roleAssignments/{read|write|delete}`` at the scope."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from sqlalchemy.orm import Session

from scheduler_emulator.api import errors
from scheduler_emulator.api.authorization import Authorizer, assignment_of
from scheduler_emulator.api.context import in_read_session, in_session, json_object
from scheduler_emulator.domain.authorization import (
    BUILT_IN_ROLES,
    DELETE_ASSIGNMENTS,
    READ_ASSIGNMENTS,
    WRITE_ASSIGNMENTS,
    Assignment,
    RoleDefinition,
    normalise_scope,
    role_by_id,
    role_by_name,
    scope_covers,
    subscription_of,
)
from scheduler_emulator.service import role_assignments
from scheduler_emulator.service.role_assignments import AssignmentRefused
from scheduler_emulator.store import repository
from scheduler_emulator.store.models import RoleAssignmentRow

router = APIRouter()

PROVIDER = "providers/Microsoft.Authorization"
SCOPES = (
    "/subscriptions/{subscription_id}",
    "/subscriptions/{subscription_id}/resourceGroups/{resource_group}",
    "/subscriptions/{subscription_id}/resourceGroups/{resource_group}/providers/Microsoft.Scheduler/"
    "jobCollections/{job_collection}",
)
_ROLE_NAME_FILTER = re.compile(r"^\s*roleName\s+eq\s+'([^']*)'\s*$", re.IGNORECASE)
_PRINCIPAL_FILTER = re.compile(r"principalId\s+eq\s+'([^']*)'", re.IGNORECASE)
_ASSIGNED_TO_FILTER = re.compile(r"assignedTo\('([^']*)'\)", re.IGNORECASE)
_AT_SCOPE_FILTER = re.compile(r"atScope\(\)", re.IGNORECASE)
_BUILT_IN_TIME = "2015-02-02T21:55:09.8806423Z"  # when Azure's first built-in roles were created


def _authorizer(request: Request) -> Authorizer:
    authorizer: Authorizer = request.app.state.authorizer
    return authorizer


def _scope(request: Request) -> str:
    """The scope the path names (before ``/providers/Microsoft.Authorization``)."""
    path = request.url.path
    at = path.lower().rfind("/providers/microsoft.authorization/")
    return normalise_scope(path[:at])


async def _check(request: Request, action: str, scope: str) -> None:
    """The subscription gate, then ``action`` at ``scope``; raises ARM's refusal."""
    authorizer = _authorizer(request)
    subscription = subscription_of(scope)
    if subscription is not None and (refused := await authorizer.gate(request, subscription)) is not None:
        raise refused
    grants = await authorizer.grants(request)
    if not grants.permits(action, scope):
        raise authorizer.refusal(await authorizer.subject(request), action, scope)


# --- role definitions ------------------------------------------------------------------------------------------


def definition_to_wire(role: RoleDefinition, scope: str) -> dict[str, Any]:
    """A built-in role as ARM lists it at ``scope``: its id under the scope's subscription (below it too, so that it
    equals the ``roleDefinitionId`` of assignments, which az compares), or at the root."""
    subscription = subscription_of(scope)
    prefix = f"/subscriptions/{subscription}" if subscription else ""
    return {
        "id": f"{prefix}/providers/Microsoft.Authorization/roleDefinitions/{role.id}",
        "name": role.id,
        "type": "Microsoft.Authorization/roleDefinitions",
        "properties": {
            "roleName": role.name,
            "type": role.role_type,
            "description": role.description,
            "assignableScopes": list(role.assignable_scopes),
            "permissions": [
                {
                    "actions": list(role.actions),
                    "notActions": list(role.not_actions),
                    "dataActions": list(role.data_actions),
                    "notDataActions": list(role.not_data_actions),
                }
            ],
            "createdOn": _BUILT_IN_TIME,
            "updatedOn": _BUILT_IN_TIME,
            "createdBy": None,
            "updatedBy": None,
        },
    }


async def list_definitions(request: Request) -> Response:
    """``GET {scope}/providers/Microsoft.Authorization/roleDefinitions[?$filter=roleName eq '…']``: open to any
    caller that may reach the scope's subscription (the built-in roles are public)."""
    scope = _scope(request)
    await _gate_only(request, scope)
    roles: tuple[RoleDefinition, ...] = BUILT_IN_ROLES
    raw = request.query_params.get("$filter")
    if raw:
        match = _ROLE_NAME_FILTER.match(raw)
        if match is None and "type eq" not in raw.lower():
            raise errors.bad_request(f"The $filter '{raw[:200]}' is not supported: use roleName eq '…'.", "$filter")
        if match is not None:
            found = role_by_name(match.group(1))
            roles = (found,) if found is not None else ()
    return JSONResponse({"value": [definition_to_wire(role, scope) for role in roles]})


async def get_definition(request: Request, role_id: str) -> Response:
    scope = _scope(request)
    await _gate_only(request, scope)
    role = role_by_id(role_id)
    if role is None:
        raise errors.ArmError(
            404,
            "RoleDefinitionDoesNotExist",
            f"The specified role definition with ID '{role_id[:100]}' does not exist.",
        )
    return JSONResponse(definition_to_wire(role, scope))


async def _gate_only(request: Request, scope: str) -> None:
    subscription = subscription_of(scope)
    if subscription is not None and (refused := await _authorizer(request).gate(request, subscription)) is not None:
        raise refused


# --- role assignments ------------------------------------------------------------------------------------------


def _when(value: datetime | None) -> str | None:
    return None if value is None else value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f0Z")


def assignment_to_wire(assignment: Assignment, row: RoleAssignmentRow | None = None) -> dict[str, Any]:
    subscription = subscription_of(assignment.scope)
    definitions = f"/subscriptions/{subscription}" if subscription else ""
    prefix = "" if assignment.scope == "/" else assignment.scope
    return {
        "id": f"{prefix}/providers/Microsoft.Authorization/roleAssignments/{assignment.id}",
        "name": assignment.id,
        "type": "Microsoft.Authorization/roleAssignments",
        "properties": {
            "roleDefinitionId": f"{definitions}/providers/Microsoft.Authorization/roleDefinitions/"
            f"{assignment.role_definition_id}",
            "principalId": assignment.principal_id,
            "principalType": assignment.principal_type,
            "scope": assignment.scope,
            "condition": None,
            "conditionVersion": None,
            "createdOn": _when(row.created_at) if row else None,
            "updatedOn": _when(row.updated_at) if row else None,
            "createdBy": row.created_by if row else None,
            "updatedBy": row.created_by if row else None,
            "delegatedManagedIdentityResourceId": None,
            "description": "From the emulator's configuration (cannot be deleted)." if assignment.implicit else None,
        },
    }


def _not_found(name: str) -> errors.ArmError:
    return errors.ArmError(404, "RoleAssignmentNotFound", f"The role assignment '{name[:100]}' is not found.")


def refused(exc: AssignmentRefused) -> errors.ArmError:
    return errors.ArmError(exc.status, exc.code, exc.message, exc.target)


async def put_assignment(request: Request, name: str) -> Response:
    """``PUT {scope}/providers/Microsoft.Authorization/roleAssignments/{guid}`` with ``{properties:
    {roleDefinitionId, principalId, principalType?}}`` → 201."""
    scope = _scope(request)
    await _check(request, WRITE_ASSIGNMENTS, scope)
    try:
        role_assignments.check_name(name)
        grant = role_assignments.read_grant(name, scope, await json_object(request))
    except AssignmentRefused as exc:
        raise refused(exc) from None
    authorizer = _authorizer(request)
    caller = await authorizer.subject(request)
    moment = datetime.now(UTC)

    def work(session: Session) -> tuple[RoleAssignmentRow, bool]:
        try:
            return role_assignments.create(
                session, grant, configured=authorizer.directory.implicit, created_by=caller.object_id, moment=moment
            )
        except AssignmentRefused as exc:
            raise refused(exc) from None

    row, _created = await in_session(request, work)  # ARM answers 201 to the same PUT again too
    return JSONResponse(assignment_to_wire(assignment_of(row), row), status_code=201)


async def get_assignment(request: Request, name: str) -> Response:
    scope = _scope(request)
    await _check(request, READ_ASSIGNMENTS, scope)
    found = await _find(request, name, scope)
    return JSONResponse(assignment_to_wire(*found))


async def _find(request: Request, name: str, scope: str) -> tuple[Assignment, RoleAssignmentRow | None]:
    for assignment in _authorizer(request).directory.implicit:
        if assignment.id == name.lower() and assignment.scope.lower() == scope.lower():
            return assignment, None
    row = await in_read_session(request, lambda session: repository.find_role_assignment(session, name))
    if row is None or row.scope_key != scope.lower():
        raise _not_found(name)
    return assignment_of(row), row


async def delete_assignment(request: Request, name: str) -> Response:
    """``DELETE …/roleAssignments/{guid}`` → 200 with the assignment, 204 when there is none."""
    scope = _scope(request)
    await _check(request, DELETE_ASSIGNMENTS, scope)
    for assignment in _authorizer(request).directory.implicit:
        if assignment.id == name.lower():
            raise errors.ArmError(
                400,
                "RoleAssignmentNotDeletable",
                f"The role assignment '{name}' comes from the emulator's configuration and cannot be deleted; "
                "change the configuration instead.",
            )

    def work(session: Session) -> dict[str, Any] | None:
        row = repository.find_role_assignment(session, name)
        if row is None or row.scope_key != scope.lower():
            return None
        wire = assignment_to_wire(assignment_of(row), row)
        repository.delete_role_assignment(session, row)
        return wire

    wire = await in_session(request, work)
    return Response(status_code=204) if wire is None else JSONResponse(wire)


async def list_assignments(request: Request) -> Response:
    """``GET {scope}/providers/Microsoft.Authorization/roleAssignments`` with ``$filter`` ``atScope()``
    (assignments at the scope and above it), ``principalId eq '…'`` / ``assignedTo('…')`` (the principal's);
    without ``atScope()`` those below the scope too. Only what the caller may read is listed."""
    scope = _scope(request)
    authorizer = _authorizer(request)
    subscription = subscription_of(scope)
    if subscription is not None and (refused := await authorizer.gate(request, subscription)) is not None:
        raise refused
    raw = request.query_params.get("$filter") or ""
    at_scope = _AT_SCOPE_FILTER.search(raw) is not None
    principal = _PRINCIPAL_FILTER.search(raw) or _ASSIGNED_TO_FILTER.search(raw)
    if raw and not (at_scope or principal):
        raise errors.bad_request(
            f"The $filter '{raw[:200]}' is not supported: use atScope(), principalId eq '…' or assignedTo('…').",
            "$filter",
        )
    rows = await in_read_session(
        request,
        lambda session: repository.role_assignments_in_subscription(session, subscription)
        if subscription is not None
        else repository.all_role_assignments(session),  # the root: every assignment is at or below it
    )
    candidates: list[tuple[Assignment, RoleAssignmentRow | None]] = [
        *((a, None) for a in authorizer.directory.implicit),
        *((assignment_of(row), row) for row in rows),
    ]
    grants = await authorizer.grants(request)
    value = []
    for assignment, row in candidates:
        above = scope_covers(assignment.scope, scope)
        below = scope_covers(scope, assignment.scope)
        if not (above or (below and not at_scope)):
            continue
        if principal is not None and assignment.principal_id.lower() != principal.group(1).lower():
            continue
        if not grants.permits(READ_ASSIGNMENTS, scope if above else assignment.scope):
            continue
        value.append(assignment_to_wire(assignment, row))
    return JSONResponse({"value": value})


# --- routes ----------------------------------------------------------------------------------------------------


def _routes() -> None:
    # The root "/" too, as ARM serves it: writing there needs roleAssignments/write at "/", which in Azure only
    # elevated access gives and here only the configuration (docs/reference/authorization.md#the-root-scope).
    for scope in ("", *SCOPES):
        base = f"{scope}/{PROVIDER}"
        router.add_api_route(f"{base}/roleDefinitions", list_definitions, methods=["GET"])
        router.add_api_route(f"{base}/roleDefinitions/{{role_id}}", get_definition, methods=["GET"])
        router.add_api_route(f"{base}/roleAssignments", list_assignments, methods=["GET"])
        router.add_api_route(f"{base}/roleAssignments/{{name}}", get_assignment, methods=["GET"])
        router.add_api_route(f"{base}/roleAssignments/{{name}}", put_assignment, methods=["PUT"])
        router.add_api_route(f"{base}/roleAssignments/{{name}}", delete_assignment, methods=["DELETE"])


_routes()
