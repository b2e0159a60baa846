"""Authorization as ARM applies it (docs/reference/authorization.md): the caller of a request, the tenant its
subscription belongs to, the roles it holds where, and ARM's refusals.

In force with ``--auth issued`` and ``--auth-jwks`` only. With no auth flag, and with one shared ``--auth-token``,
every caller is ``Caller.UNRESTRICTED``: it may do everything (all or nothing). One ``Authorizer`` per app
(``app.state.authorizer``); authentication (api/access.py) puts the caller on ``request.state.caller``."""

from __future__ import annotations

import re
import uuid

from starlette.requests import Request

from scheduler_emulator.api import errors
from scheduler_emulator.api.context import in_read_session
from scheduler_emulator.api.identity.principals import Principals, split_entries
from scheduler_emulator.config import ConfigError
from scheduler_emulator.config_groups import IdentitySettings, SecuritySettings
from scheduler_emulator.domain.authorization import (
    OWNER_ID,
    Assignment,
    Caller,
    Directory,
    Grants,
    normalise_scope,
)
from scheduler_emulator.store import repository
from scheduler_emulator.store.models import RoleAssignmentRow

# Where the ids of implicit assignments live: the same principal, role and scope always give the same id.
_IMPLICIT_NAMESPACE = uuid.UUID("3b0d6c1e-54a7-4f0e-9d5b-8a4f2c7e1d90")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
ENFORCING_MODES = frozenset({"issued", "jwt"})


def implicit_assignment(principal_id: str, role_definition_id: str, scope: str) -> Assignment:
    name = str(uuid.uuid5(_IMPLICIT_NAMESPACE, f"{principal_id.lower()}|{role_definition_id}|{scope.lower()}"))
    return Assignment(
        id=name, scope=scope, role_definition_id=role_definition_id, principal_id=principal_id, implicit=True
    )


def build_directory(principals: Principals, subscriptions: str | None) -> Directory:
    """The tenants of the subscriptions and the implicit assignments the configuration gives: each principal is
    Owner of its subscription (the all-zero one when it names none), plus its file ``roles`` and the file's
    ``assignments``; ``--subscription SUBSCRIPTION:TENANT`` entries declare more. ConfigError when a subscription
    is declared in two tenants."""
    tenants: dict[str, str | None] = {}
    where_declared: dict[str, str] = {}

    def declare(subscription: str, tenant: str | None, where: str) -> None:
        key, value = subscription.lower(), tenant.lower() if tenant else None
        known = tenants.get(key)
        if key in tenants and known is not None and value is not None and known != value:
            raise ConfigError(
                f"{where}: subscription '{subscription}' is already declared in tenant '{known}' "
                f"({where_declared[key]}); a subscription belongs to one tenant"
            )
        if known is None:
            tenants[key] = value
            where_declared[key] = where

    for number, entry in enumerate(split_entries(subscriptions), start=1):
        subscription, sep, tenant = entry.partition(":")
        where = f"--subscription entry {number}"
        if not sep or not _NAME.match(subscription) or not _NAME.match(tenant):
            raise ConfigError(f"{where} must be SUBSCRIPTION:TENANT (letters, digits, '.', '_' or '-')")
        declare(subscription, tenant, where)
    implicit: list[Assignment] = []
    for principal in principals:
        # the all-zero subscription of principals naming none is shared by them, in whatever tenant each signs in
        declare(
            principal.subscription,
            principal.tenant if principal.subscription_given else None,
            f"principal '{principal.client_id}'",
        )
        implicit.append(implicit_assignment(principal.object_id, OWNER_ID, f"/subscriptions/{principal.subscription}"))
        implicit += [implicit_assignment(r.principal_id, r.role_definition_id, r.scope) for r in principal.roles]
    implicit += [implicit_assignment(r.principal_id, r.role_definition_id, r.scope) for r in principals.assignments]
    return Directory(tenants=tenants, implicit=tuple(implicit))


def assignment_of(row: RoleAssignmentRow) -> Assignment:
    return Assignment(
        id=row.name,
        scope=row.scope,
        role_definition_id=row.role_definition_id,
        principal_id=row.principal_id,
        principal_type=row.principal_type,
    )


class Authorizer:
    """Decides, per request, who the caller is, whether its token may reach a subscription, and what it holds."""

    def __init__(self, security: SecuritySettings, identity: IdentitySettings, principals: Principals) -> None:
        self.enforcing = security.mode in ENFORCING_MODES
        self.mode = security.mode
        self.directory = build_directory(principals, identity.subscriptions)

    async def subject(self, request: Request) -> Caller:
        """The caller of ``request`` (authentication set it); unrestricted when authorization is not in force."""
        if not self.enforcing:
            return Caller.UNRESTRICTED
        caller = getattr(request.state, "caller", None)
        return caller if isinstance(caller, Caller) else Caller.UNRESTRICTED

    async def gate(self, request: Request, subscription_id: str) -> errors.ArmError | None:
        """None when the caller's token may reach ``subscription_id``; else 404 SubscriptionNotFound (nobody
        declared it) or 401 InvalidAuthenticationTokenTenant (it belongs to another tenant)."""
        caller = await self.subject(request)
        if caller.unrestricted:
            return None
        if not self.directory.declares(subscription_id):
            return subscription_not_found(subscription_id)
        tenant = self.directory.tenant_of(subscription_id)
        if tenant is not None and (caller.tenant_id or "").lower() != tenant:
            return wrong_tenant(caller, tenant)
        return None

    async def grants(self, request: Request) -> Grants:
        """The caller's assignments, implicit and stored, read once per request."""
        cached = getattr(request.state, "grants", None)
        if isinstance(cached, Grants):
            return cached
        caller = await self.subject(request)
        if caller.unrestricted:
            grants = Grants(unrestricted=True)
        elif not caller.object_id:
            grants = Grants()
        else:
            object_id = caller.object_id
            stored = await in_read_session(
                request, lambda session: repository.role_assignments_of_principal(session, object_id)
            )
            grants = Grants(
                assignments=self.directory.implicit_for(object_id) + tuple(assignment_of(row) for row in stored)
            )
        request.state.grants = grants
        return grants

    def refusal(self, caller: Caller, action: str, scope: str) -> errors.ArmError:
        """403 AuthorizationFailed in ARM's words."""
        return authorization_failed(caller, action, normalise_scope(scope))


def subscription_not_found(subscription_id: str) -> errors.ArmError:
    shown = subscription_id[:100].encode("unicode_escape").decode("ascii")
    return errors.ArmError(404, "SubscriptionNotFound", f"The subscription '{shown}' could not be found.")


def wrong_tenant(caller: Caller, tenant: str) -> errors.ArmError:
    """401 InvalidAuthenticationTokenTenant as ARM words it, the subscription's tenant in the token's issuer's form."""
    issuer = caller.issuer or f"https://sts.windows.net/{caller.tenant_id}/"
    expected = issuer.replace(f"/{caller.tenant_id}/", f"/{tenant}/", 1) if caller.tenant_id else issuer
    authority = expected.removesuffix("/").removesuffix("/v2.0")
    return errors.ArmError(
        401,
        "InvalidAuthenticationTokenTenant",
        f"The access token is from the wrong issuer '{issuer}'. It must match the tenant '{expected}' associated "
        f"with this subscription. Please use the authority (URL) '{authority}' to get the token. Note, if the "
        "subscription is transferred to another tenant there is no impact to the services, but information about "
        "new tenant could take time to propagate (up to an hour). If you just transferred your subscription and "
        "see this error message, please try back later.",
        headers={"WWW-Authenticate": "Bearer"},
    )


def authorization_failed(caller: Caller, action: str, scope: str) -> errors.ArmError:
    return errors.ArmError(
        403,
        "AuthorizationFailed",
        f"The client '{caller.client_id or caller.object_id}' with object id '{caller.object_id}' does not have "
        f"authorization to perform action '{action}' over scope '{scope}' or the scope is invalid. If access was "
        "recently granted, please refresh your credentials.",
    )
