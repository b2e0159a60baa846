"""Who may touch what, as ARM decides it (docs/reference/authorization.md): the caller a token names, Azure's built-in
role definitions, role assignments at a scope and inherited below it, and the check of one action at one scope.

Pure: no I/O. The API layer (api/authorization.py) builds a caller's ``Grants`` from the configuration and the store
and asks ``Grants.permits``."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import ClassVar

# Azure's built-in roles (learn.microsoft.com "Azure built-in roles"): the same ids in every cloud.
OWNER_ID = "8e3af657-a8ff-443c-a75c-2fe8c4bcb635"
CONTRIBUTOR_ID = "b24988ac-6180-42a0-ab88-20f7382dd24c"
READER_ID = "acdd72a7-3385-48ef-bd42-f606fba81ae7"
USER_ACCESS_ADMINISTRATOR_ID = "18d7d88d-d35e-4fb5-a5c3-7773c20a72d9"
SCHEDULER_JOB_COLLECTIONS_CONTRIBUTOR_ID = "188a0f2f-5c9e-469b-ae67-2aa5ce574b94"

ROOT_SCOPE = "/"
READ_ASSIGNMENTS = "Microsoft.Authorization/roleAssignments/read"
WRITE_ASSIGNMENTS = "Microsoft.Authorization/roleAssignments/write"
DELETE_ASSIGNMENTS = "Microsoft.Authorization/roleAssignments/delete"
READ_DEFINITIONS = "Microsoft.Authorization/roleDefinitions/read"


@dataclass(frozen=True)
class Caller:
    """Who sent a request: the token's tenant (``tid``), object id (``oid``) and client (``appid``/``azp``).
    ``unrestricted``: authorization is not in force (no auth flag, or one shared ``--auth-token``): it may do
    everything."""

    tenant_id: str | None
    object_id: str | None
    client_id: str | None
    unrestricted: bool = False
    issuer: str | None = None  # the token's ``iss`` (named by the wrong-tenant error)

    UNRESTRICTED: ClassVar[Caller]


Caller.UNRESTRICTED = Caller(tenant_id=None, object_id=None, client_id=None, unrestricted=True)
UNRESTRICTED = Caller.UNRESTRICTED
# A request on a path open without a token (health, the token service) while authorization is in force: it holds
# nothing.
ANONYMOUS = Caller(tenant_id=None, object_id=None, client_id=None)


@dataclass(frozen=True)
class RoleDefinition:
    """A role: what its holder may do (``actions`` less ``not_actions``) where it is assigned."""

    id: str  # the GUID (the definition's ARM ``name``)
    name: str  # roleName
    description: str
    actions: tuple[str, ...]
    not_actions: tuple[str, ...] = ()
    data_actions: tuple[str, ...] = ()
    not_data_actions: tuple[str, ...] = ()
    assignable_scopes: tuple[str, ...] = (ROOT_SCOPE,)
    role_type: str = "BuiltInRole"


BUILT_IN_ROLES: tuple[RoleDefinition, ...] = (
    RoleDefinition(
        id=OWNER_ID,
        name="Owner",
        description="Grants full access to manage all resources, including the ability to assign roles in Azure RBAC.",
        actions=("*",),
    ),
    RoleDefinition(
        id=CONTRIBUTOR_ID,
        name="Contributor",
        description=(
            "Grants full access to manage all resources, but does not allow you to assign roles in Azure RBAC, "
            "manage assignments in Azure Blueprints, or share image galleries."
        ),
        actions=("*",),
        not_actions=(
            "Microsoft.Authorization/*/Delete",
            "Microsoft.Authorization/*/Write",
            "Microsoft.Authorization/elevateAccess/Action",
            "Microsoft.Blueprint/blueprintAssignments/write",
            "Microsoft.Blueprint/blueprintAssignments/delete",
            "Microsoft.Compute/galleries/share/action",
            "Microsoft.Purview/consents/write",
            "Microsoft.Purview/consents/delete",
            "Microsoft.Resources/deploymentStacks/manageDenySetting/action",
        ),
    ),
    RoleDefinition(
        id=READER_ID,
        name="Reader",
        description="View all resources, but does not allow you to make any changes.",
        actions=("*/read",),
    ),
    RoleDefinition(
        id=USER_ACCESS_ADMINISTRATOR_ID,
        name="User Access Administrator",
        description="Lets you manage user access to Azure resources.",
        actions=("*/read", "Microsoft.Authorization/*", "Microsoft.Support/*"),
    ),
    RoleDefinition(
        id=SCHEDULER_JOB_COLLECTIONS_CONTRIBUTOR_ID,
        name="Scheduler Job Collections Contributor",
        description="Lets you manage Scheduler job collections, but not access to them.",
        actions=(
            "Microsoft.Authorization/*/read",
            "Microsoft.Insights/alertRules/*",
            "Microsoft.ResourceHealth/availabilityStatuses/read",
            "Microsoft.Resources/deployments/*",
            "Microsoft.Resources/subscriptions/resourceGroups/read",
            "Microsoft.Scheduler/jobcollections/*",
            "Microsoft.Support/*",
        ),
    ),
)
_BY_ID = {role.id: role for role in BUILT_IN_ROLES}
_BY_NAME = {role.name.lower(): role for role in BUILT_IN_ROLES}


def role_by_id(role_id: str) -> RoleDefinition | None:
    """The built-in role with this GUID, or named by a full definition id
    (``/subscriptions/{s}/providers/Microsoft.Authorization/roleDefinitions/{guid}``, ``/providers/…/{guid}``)."""
    return _BY_ID.get(role_id.rstrip("/").rsplit("/", 1)[-1].lower())


def role_by_name(name: str) -> RoleDefinition | None:
    """The built-in role of this roleName (case-insensitive)."""
    return _BY_NAME.get(name.strip().lower())


def _pattern(action: str) -> re.Pattern[str]:
    return re.compile("^" + ".*".join(re.escape(part) for part in action.split("*")) + "$", re.IGNORECASE)


def action_matches(pattern: str, action: str) -> bool:
    """Whether a role's action entry (``*``, ``*/read``, ``Microsoft.Scheduler/jobcollections/*``) covers
    ``action``, case-insensitively, ``*`` matching any characters (as Azure matches them)."""
    return _pattern(pattern).match(action) is not None


def action_permitted(role: RoleDefinition, action: str) -> bool:
    """Whether ``role`` allows ``action``: one of its actions matches and none of its notActions does."""
    return any(action_matches(p, action) for p in role.actions) and not any(
        action_matches(p, action) for p in role.not_actions
    )


# --- scopes -------------------------------------------------------------------------------------------------------

_SCOPE_SHAPES = (
    re.compile(r"^/subscriptions/[^/]+$", re.IGNORECASE),
    re.compile(r"^/subscriptions/[^/]+/resourceGroups/[^/]+$", re.IGNORECASE),
    re.compile(
        r"^/subscriptions/[^/]+/resourceGroups/[^/]+/providers/Microsoft\.Scheduler/jobCollections/[^/]+$",
        re.IGNORECASE,
    ),
)


def normalise_scope(scope: str) -> str:
    """A scope as assignments keep it: one leading ``/``, no trailing one, the fixed segments in ARM's spelling
    (``resourceGroups``, ``providers/Microsoft.Scheduler/jobCollections``); names as given. ``/`` is the root."""
    parts = [part for part in scope.strip().split("/") if part]
    if not parts:
        return ROOT_SCOPE
    fixed = {
        "subscriptions": "subscriptions",
        "resourcegroups": "resourceGroups",
        "providers": "providers",
        "microsoft.scheduler": "Microsoft.Scheduler",
        "jobcollections": "jobCollections",
        "jobs": "jobs",
    }
    out = []
    for index, part in enumerate(parts):
        out.append(fixed.get(part.lower(), part) if index % 2 == 0 or part.lower() == "microsoft.scheduler" else part)
    return "/" + "/".join(out)


def is_assignable_scope(scope: str) -> bool:
    """Whether assignments may be made at ``scope`` here: the root ``/`` (every subscription and the emulator-wide
    routes), a subscription, a resource group or a job collection."""
    return scope == ROOT_SCOPE or any(shape.match(scope) for shape in _SCOPE_SHAPES)


def scope_covers(assigned: str, target: str) -> bool:
    """Whether an assignment at ``assigned`` applies at ``target``: the same scope or one below it
    (case-insensitively, segment by segment)."""
    if assigned == ROOT_SCOPE:
        return True
    a = assigned.rstrip("/").lower()
    t = target.rstrip("/").lower()
    return t == a or t.startswith(a + "/")


def subscription_of(scope: str) -> str | None:
    """The subscription id a scope lies in (None for the root)."""
    parts = [part for part in scope.split("/") if part]
    return parts[1] if len(parts) >= 2 and parts[0].lower() == "subscriptions" else None


# --- assignments --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Assignment:
    """A role given to a principal at a scope. ``implicit``: derived from the configuration (a principal's own
    subscription, a ``--principals-file`` role), not stored, cannot be deleted."""

    id: str  # the assignment's name: a GUID
    scope: str  # normalise_scope'd
    role_definition_id: str  # the role's GUID
    principal_id: str
    principal_type: str = "ServicePrincipal"
    implicit: bool = False

    @property
    def role(self) -> RoleDefinition | None:
        return role_by_id(self.role_definition_id)


@dataclass(frozen=True)
class Grants:
    """What a caller holds: its assignments (implicit and stored). ``unrestricted``: authorization not in force."""

    assignments: tuple[Assignment, ...] = field(default=())
    unrestricted: bool = False

    def permits(self, action: str, scope: str) -> bool:
        """Whether an assignment at ``scope`` or above it gives a role allowing ``action``."""
        if self.unrestricted:
            return True
        for assignment in self.assignments:
            role = assignment.role
            if role is not None and scope_covers(assignment.scope, scope) and action_permitted(role, action):
                return True
        return False

    def holds_any_at(self, scope: str) -> bool:
        """Whether any assignment applies at ``scope`` (or above it)."""
        return self.unrestricted or any(scope_covers(a.scope, scope) for a in self.assignments)


@dataclass(frozen=True)
class Directory:
    """What the configuration says: the tenant each declared subscription belongs to (None: any tenant, for a
    subscription only principals without a tenant declared) and the assignments it implies (a principal's own
    subscription, the roles a principals file gives)."""

    tenants: dict[str, str | None] = field(default_factory=dict)  # subscription (lower case) → tenant (lower case)
    implicit: tuple[Assignment, ...] = ()

    def declares(self, subscription: str) -> bool:
        return subscription.lower() in self.tenants

    def tenant_of(self, subscription: str) -> str | None:
        return self.tenants.get(subscription.lower())

    def implicit_for(self, object_id: str) -> tuple[Assignment, ...]:
        key = object_id.lower()
        return tuple(a for a in self.implicit if a.principal_id.lower() == key)
