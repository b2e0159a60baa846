"""Role assignments as Microsoft.Authorization stores them (docs/reference/authorization.md): the one way an
assignment is read from a request's or a template's properties and created, for the REST API (api/roles.py) and for
template deployments (service/deployment_run.py). Whether the caller may write the assignment is checked by the
surface before it calls here."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from scheduler_emulator.domain.authorization import Assignment, is_assignable_scope, role_by_id, subscription_of
from scheduler_emulator.store import repository
from scheduler_emulator.store.models import RoleAssignmentRow

_GUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
PRINCIPAL_TYPES = ("User", "Group", "ServicePrincipal", "ForeignGroup", "Device")


class AssignmentRefused(Exception):
    """An assignment Microsoft.Authorization refuses; ``status``/``code``/``target`` as ARM answers them. Nothing
    was stored."""

    def __init__(self, status: int, code: str, message: str, target: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.target = target


@dataclass(frozen=True, kw_only=True)
class Grant:
    """A new assignment's request: the role (a built-in role's GUID), who gets it, where."""

    name: str
    scope: str
    role_definition_id: str
    principal_id: str
    principal_type: str


def check_name(name: str) -> None:
    """An assignment's name is a GUID (400 InvalidRoleAssignmentId otherwise)."""
    if not _GUID.match(name):
        raise AssignmentRefused(
            400,
            "InvalidRoleAssignmentId",
            f"The role assignment ID '{name[:100]}' is not valid. The role assignment ID must be a GUID.",
        )


def read_grant(name: str, scope: str, body: Any) -> Grant:
    """The grant ``{properties: {roleDefinitionId, principalId, principalType?}}`` asks for at ``scope``;
    AssignmentRefused naming the field otherwise."""
    check_name(name)
    if not is_assignable_scope(scope):
        raise AssignmentRefused(
            400,
            "InvalidScope",
            f"The scope '{scope[:200]}' cannot hold role assignments here: a subscription, a resource group or a job "
            "collection can.",
            "scope",
        )
    properties = body.get("properties") if isinstance(body, dict) else None
    if not isinstance(properties, dict):
        raise AssignmentRefused(400, "BadRequest", "The role assignment needs 'properties'.", "properties")
    definition_id, principal_id = properties.get("roleDefinitionId"), properties.get("principalId")
    if not isinstance(definition_id, str) or not definition_id:
        raise AssignmentRefused(
            400, "BadRequest", "'properties.roleDefinitionId' is required.", "properties.roleDefinitionId"
        )
    if not isinstance(principal_id, str) or not principal_id or len(principal_id) > 100:
        raise AssignmentRefused(400, "BadRequest", "'properties.principalId' is required.", "properties.principalId")
    principal_type = properties.get("principalType") or "ServicePrincipal"
    if principal_type not in PRINCIPAL_TYPES:
        raise AssignmentRefused(
            400,
            "BadRequest",
            f"The principalType '{str(principal_type)[:40]}' is not valid: one of {', '.join(PRINCIPAL_TYPES)}.",
            "properties.principalType",
        )
    role = role_by_id(definition_id)
    if role is None:
        shown = definition_id.rstrip("/").rsplit("/", 1)[-1][:100]
        raise AssignmentRefused(
            400,
            "RoleDefinitionDoesNotExist",
            f"The specified role definition with ID '{shown}' does not exist.",
            "properties.roleDefinitionId",
        )
    return Grant(
        name=name.lower(),
        scope=scope,
        role_definition_id=role.id,
        principal_id=principal_id,
        principal_type=principal_type,
    )


def _exists() -> AssignmentRefused:
    return AssignmentRefused(409, "RoleAssignmentExists", "The role assignment already exists.")


def create(
    session: Session,
    grant: Grant,
    *,
    configured: Iterable[Assignment],
    created_by: str | None,
    moment: datetime,
) -> tuple[RoleAssignmentRow, bool]:
    """Store ``grant`` (or find it again: the same name, role, principal and scope is the same assignment); the
    row and whether it was created. 409 RoleAssignmentExists when ``configured`` (the configuration's implicit
    assignments) or another stored assignment already gives the principal that role there, 409
    RoleAssignmentUpdateNotPermitted when the name is another assignment's."""
    scope_key, principal_key = grant.scope.lower(), grant.principal_id.lower()
    if any(
        a.principal_id.lower() == principal_key
        and a.role_definition_id == grant.role_definition_id
        and a.scope.lower() == scope_key
        for a in configured
    ):
        raise _exists()
    existing = repository.find_role_assignment(session, grant.name)
    if existing is not None:
        same = (
            existing.scope_key == scope_key
            and existing.role_definition_id == grant.role_definition_id
            and existing.principal_key == principal_key
        )
        if not same:
            raise AssignmentRefused(
                409,
                "RoleAssignmentUpdateNotPermitted",
                "Tenant ID, application ID, principal ID, and scope are not allowed to be updated.",
            )
        return existing, False
    for other in repository.role_assignments_at_scope(session, grant.scope):
        if other.principal_key == principal_key and other.role_definition_id == grant.role_definition_id:
            raise _exists()
    row = RoleAssignmentRow(
        name=grant.name,
        scope=grant.scope,
        subscription_key=(subscription_of(grant.scope) or "").lower(),
        role_definition_id=grant.role_definition_id,
        principal_id=grant.principal_id,
        principal_type=grant.principal_type,
        created_by=created_by,
        created_at=moment,
        updated_at=moment,
    )
    repository.put_role_assignment(session, row)
    return row, True
