"""Who may call which route (docs/reference/authorization.md#what-each-route-needs): the one table that maps every
route of the app — method and path template — to the ARM action it performs and the scope it acts on, and the
pipeline's step that enforces it (api/pipeline.py, step 10).

The step finds the route a request will reach the way the routers do (the routes' own compiled path regexes, in the
app's order), then applies its rule: gate the subscription (tenant, declared; ``Authorizer.gate``), then the caller's
grants must permit the action at the scope, else 403 ``AuthorizationFailed``. Lists answer what the caller may read at
or below their scope (``readable``). Only ``--auth issued`` and ``--auth-jwks`` have roles; the app leaves the step out
otherwise, so an unrestricted caller costs nothing (app.py).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from enum import Enum

from fastapi import APIRouter, Request
from starlette.routing import BaseRoute, Route
from starlette.types import Scope

from scheduler_emulator.api import errors, roles
from scheduler_emulator.api.authorization import Authorizer
from scheduler_emulator.api.classic.routes import ClassicRoute
from scheduler_emulator.api.identity import paths as identity_paths
from scheduler_emulator.api.identity.routes import HANDLERS
from scheduler_emulator.domain.authorization import ROOT_SCOPE, Caller, Grants, action_permitted, scope_covers

SCHEDULER = "Microsoft.Scheduler/jobCollections"
JOBS = SCHEDULER + "/jobs"
GROUPS = "Microsoft.Resources/subscriptions/resourceGroups"
DEPLOYMENTS = "Microsoft.Resources/deployments"
# The emulator's own extensions, named as actions of the provider it emulates
# (docs/reference/authorization.md#the-emulators-own-routes): Owner's and Contributor's ``*`` and Reader's ``*/read``
# match them like any other action.
EMULATOR = "Microsoft.Scheduler/emulator"


class Kind(Enum):
    """How a route is guarded."""

    CHECK = "the action at the route's scope"
    LIST = "a list: what the caller may read at or below the scope (403 when nothing)"
    MEMBER = "any role at, above or below the subscription"
    ROOT = "the action at the root scope '/' (emulator-wide)"
    EVERYWHERE = "a list over every subscription, filtered to what the caller may read"
    AUTHENTICATED = "any authenticated caller (no data of any subscription)"
    OPEN = "no token needed (docs/reference/security.md#inbound-authentication)"
    BY_ENDPOINT = "checked by the endpoint (Microsoft.Authorization)"
    CLASSIC = "classic: management certificate"


# Scope builders: the resource id the action is on, from the route's path parameters.
def subscription_scope(params: dict[str, str]) -> str:
    return f"/subscriptions/{params['subscription_id']}"


def group_scope(params: dict[str, str]) -> str:
    return f"{subscription_scope(params)}/resourceGroups/{params['resource_group']}"


def collection_scope(params: dict[str, str]) -> str:
    name = params.get("collection_name") or params["name"]  # the dashboard's paths call it {name}
    return f"{group_scope(params)}/providers/{SCHEDULER}/{name}"


def job_scope(params: dict[str, str]) -> str:
    return f"{collection_scope(params)}/jobs/{params.get('job_name') or params['job']}"


def deployment_scope(params: dict[str, str]) -> str:
    return f"{group_scope(params)}/providers/{DEPLOYMENTS}/{params['deployment_name']}"


def inert_scope(params: dict[str, str]) -> str:
    return f"{group_scope(params)}/providers/{params['namespace']}/{params['resource_path'].strip('/')}"


def _root_scope(_params: dict[str, str]) -> str:
    return ROOT_SCOPE


ScopeOf = Callable[[dict[str, str]], str]
ActionOf = Callable[[dict[str, str]], str]


def inert_read(params: dict[str, str]) -> str:
    """``{namespace}/{type}[/{child type}…]/read`` for another provider's resource (its path alternates types and
    names)."""
    types = params["resource_path"].strip("/").split("/")[0::2]
    return "/".join([params["namespace"], *types, "read"])


def provider_action(verb: str) -> ActionOf:
    """A provider's own registration action, ``{namespace}/register/action``, as ARM names it."""
    return lambda params: f"{params['namespace']}/{verb}/action"


@dataclass(frozen=True, slots=True, kw_only=True)
class Rule:
    """A route's guard: its kind, the ARM action (a string, or built from the path) and its scope."""

    kind: Kind
    action: str | ActionOf | None = None
    scope: ScopeOf | None = None

    def action_for(self, params: dict[str, str]) -> str:
        assert self.action is not None
        return self.action if isinstance(self.action, str) else self.action(params)


def check(action: str | ActionOf, scope: ScopeOf) -> Rule:
    return Rule(kind=Kind.CHECK, action=action, scope=scope)


def listing(action: str, scope: ScopeOf) -> Rule:
    return Rule(kind=Kind.LIST, action=action, scope=scope)


def emulator_wide(action: str) -> Rule:
    return Rule(kind=Kind.ROOT, action=action, scope=_root_scope)


def member(action: str) -> Rule:
    """Any role that applies in the subscription; ``action`` names the request in a refusal."""
    return Rule(kind=Kind.MEMBER, action=action, scope=subscription_scope)


AUTHENTICATED = Rule(kind=Kind.AUTHENTICATED)
OPEN = Rule(kind=Kind.OPEN)
BY_ENDPOINT = Rule(kind=Kind.BY_ENDPOINT)
CLASSIC = Rule(kind=Kind.CLASSIC)
ANY_METHOD = "*"

_SUB = "/subscriptions/{subscription_id}"
_GROUP = _SUB + "/resourceGroups/{resource_group}"
_COLLECTIONS = _GROUP + "/providers/Microsoft.Scheduler/jobCollections"
_COLLECTION = _COLLECTIONS + "/{collection_name}"
_JOB = _COLLECTION + "/jobs/{job_name}"
_DEPLOYMENTS = _GROUP + "/providers/Microsoft.Resources/deployments"
_DEPLOYMENT = _DEPLOYMENTS + "/{deployment_name}"
_OPERATIONS = _GROUP + "/deployments/{deployment_name}/operations"
_DASHBOARD_COLLECTION = "/_emulator/dashboard/subscriptions/{subscription_id}/resourceGroups/{resource_group}" + (
    "/jobCollections/{name}"
)

# (method, the route's path template) → its rule. ``tests/api/test_permissions_table.py`` walks the app's routes and
# fails on a route missing here, and on an entry no route has.
TABLE: dict[tuple[str, str], Rule] = {
    # Microsoft.Scheduler (api/job_collections.py, api/jobs.py, api/history.py)
    ("PUT", _COLLECTION): check(SCHEDULER + "/write", collection_scope),
    ("PATCH", _COLLECTION): check(SCHEDULER + "/write", collection_scope),
    ("GET", _COLLECTION): check(SCHEDULER + "/read", collection_scope),
    ("DELETE", _COLLECTION): check(SCHEDULER + "/delete", collection_scope),
    ("POST", _COLLECTION + "/enable"): check(SCHEDULER + "/enable/action", collection_scope),
    ("POST", _COLLECTION + "/disable"): check(SCHEDULER + "/disable/action", collection_scope),
    ("GET", _SUB + "/providers/Microsoft.Scheduler/jobCollections"): listing(SCHEDULER + "/read", subscription_scope),
    ("GET", _COLLECTIONS): listing(SCHEDULER + "/read", group_scope),
    ("PUT", _JOB): check(JOBS + "/write", job_scope),
    ("PATCH", _JOB): check(JOBS + "/write", job_scope),
    ("GET", _JOB): check(JOBS + "/read", job_scope),
    ("DELETE", _JOB): check(JOBS + "/delete", job_scope),
    ("POST", _JOB + "/run"): check(JOBS + "/run/action", job_scope),
    ("GET", _COLLECTION + "/jobs"): check(JOBS + "/read", collection_scope),
    ("GET", _JOB + "/history"): check(JOBS + "/read", job_scope),  # a job's history is read with the job
    # Microsoft.Resources (api/resources/)
    ("PUT", _GROUP): check(GROUPS + "/write", group_scope),
    ("PATCH", _GROUP): check(GROUPS + "/write", group_scope),
    ("GET", _GROUP): check(GROUPS + "/read", group_scope),
    ("HEAD", _GROUP): check(GROUPS + "/read", group_scope),
    ("DELETE", _GROUP): check(GROUPS + "/delete", group_scope),
    ("GET", _SUB + "/operationresults/{operation_id}"): member(
        "Microsoft.Resources/subscriptions/operationresults/read"
    ),
    ("GET", _SUB + "/resourceGroups"): listing(GROUPS + "/read", subscription_scope),
    ("GET", _GROUP + "/resources"): listing(GROUPS + "/resources/read", group_scope),
    ("GET", _SUB + "/resources"): listing("Microsoft.Resources/subscriptions/resources/read", subscription_scope),
    ("GET", _SUB + "/providers"): member("Microsoft.Resources/subscriptions/providers/read"),
    ("GET", _SUB + "/providers/{namespace}"): member("Microsoft.Resources/subscriptions/providers/read"),
    ("POST", _SUB + "/providers/{namespace}/register"): check(provider_action("register"), subscription_scope),
    ("POST", _SUB + "/providers/{namespace}/unregister"): check(provider_action("unregister"), subscription_scope),
    ("PUT", _DEPLOYMENT): check(DEPLOYMENTS + "/write", deployment_scope),  # and each resource: deployment_checks
    ("GET", _DEPLOYMENT): check(DEPLOYMENTS + "/read", deployment_scope),
    ("HEAD", _DEPLOYMENT): check(DEPLOYMENTS + "/read", deployment_scope),
    ("GET", _DEPLOYMENTS): listing(DEPLOYMENTS + "/read", group_scope),
    ("GET", _DEPLOYMENTS + "/"): listing(DEPLOYMENTS + "/read", group_scope),
    ("DELETE", _DEPLOYMENT): check(DEPLOYMENTS + "/delete", deployment_scope),
    ("POST", _DEPLOYMENT + "/cancel"): check(DEPLOYMENTS + "/cancel/action", deployment_scope),
    ("POST", _DEPLOYMENT + "/validate"): check(DEPLOYMENTS + "/validate/action", deployment_scope),
    ("POST", _DEPLOYMENT + "/exportTemplate"): check(DEPLOYMENTS + "/exportTemplate/action", deployment_scope),
    ("GET", _DEPLOYMENT + "/operationStatuses/{operation_id}"): check(
        DEPLOYMENTS + "/operationstatuses/read", deployment_scope
    ),
    ("GET", _DEPLOYMENT + "/operations"): check(DEPLOYMENTS + "/operations/read", deployment_scope),
    ("GET", _OPERATIONS): check(DEPLOYMENTS + "/operations/read", deployment_scope),
    ("GET", _DEPLOYMENT + "/operations/{operation_id}"): check(DEPLOYMENTS + "/operations/read", deployment_scope),
    ("GET", _OPERATIONS + "/{operation_id}"): check(DEPLOYMENTS + "/operations/read", deployment_scope),
    ("GET", _GROUP + "/providers/{namespace:arm_foreign_namespace}/{resource_path:path}"): check(
        inert_read, inert_scope
    ),
    # The token service and the account endpoints (api/identity/paths.py): what az calls around signing in.
    ("GET", "/{tenant}/v2.0/.well-known/openid-configuration"): OPEN,
    ("GET", "/{tenant}/.well-known/openid-configuration"): OPEN,
    ("GET", "/{tenant}/discovery/v2.0/keys"): OPEN,
    ("GET", "/{tenant}/discovery/keys"): OPEN,
    ("POST", "/{tenant}/oauth2/v2.0/token"): OPEN,
    ("POST", "/{tenant}/oauth2/token"): OPEN,
    ("GET", "/metadata/endpoints"): OPEN,
    ("GET", "/subscriptions"): AUTHENTICATED,  # the endpoint lists the caller's own
    ("GET", "/tenants"): AUTHENTICATED,  # the endpoint lists the caller's own
    ("GET", "/subscriptions/{subscriptionId}"): member("Microsoft.Resources/subscriptions/read"),
    ("GET", "/subscriptions/{subscriptionId}/locations"): member("Microsoft.Resources/subscriptions/locations/read"),
    # The classic (2014) surface: one route (api/classic/routes.py).
    (ANY_METHOD, ClassicRoute.path): CLASSIC,
    # The emulator's extensions (api/emulator.py, api/clock.py) and FastAPI's own pages of the API's description.
    ("GET", "/_emulator/health"): OPEN,
    ("POST", "/_emulator/recurrence/preview"): AUTHENTICATED,  # pure computation over the body
    ("GET", "/_emulator/clock"): AUTHENTICATED,
    ("POST", "/_emulator/clock"): emulator_wide(EMULATOR + "/clock/write"),
    ("POST", "/_emulator/reset"): emulator_wide(EMULATOR + "/reset/action"),
    ("GET", "/metrics"): emulator_wide(EMULATOR + "/metrics/read"),
    ("GET", "/_emulator/openapi.json"): AUTHENTICATED,
    ("HEAD", "/_emulator/openapi.json"): AUTHENTICATED,
    ("GET", "/_emulator/docs"): AUTHENTICATED,
    ("HEAD", "/_emulator/docs"): AUTHENTICATED,
    ("GET", "/docs/oauth2-redirect"): AUTHENTICATED,
    ("HEAD", "/docs/oauth2-redirect"): AUTHENTICATED,
    # The dashboard (api/dashboard.py, api/overview.py, api/root.py): its page holds no data; its API reads.
    ("GET", "/"): OPEN,
    ("HEAD", "/"): OPEN,
    ("GET", "/_emulator/ui"): OPEN,
    ("GET", "/_emulator/ui/"): OPEN,
    ("GET", "/_emulator/ui/{name}"): OPEN,
    ("GET", "/_emulator/dashboard/collections"): Rule(kind=Kind.EVERYWHERE, action=SCHEDULER + "/read"),
    ("GET", "/_emulator/dashboard/jobs"): Rule(kind=Kind.EVERYWHERE, action=JOBS + "/read"),
    ("GET", _DASHBOARD_COLLECTION + "/jobs"): check(JOBS + "/read", collection_scope),
    ("GET", _DASHBOARD_COLLECTION + "/jobs/{job}"): check(JOBS + "/read", job_scope),
    ("GET", _DASHBOARD_COLLECTION + "/jobs/{job}/export"): check(JOBS + "/read", job_scope),
    ("POST", "/_emulator/dashboard/describe"): AUTHENTICATED,  # pure computation over the body
    ("GET", "/_emulator/dashboard/overview"): emulator_wide(EMULATOR + "/overview/read"),  # every subscription's
    # Microsoft.Authorization (api/roles.py): each endpoint gates the subscription and checks
    # Microsoft.Authorization/roleAssignments/{read|write|delete} at its scope itself; the role definitions are
    # readable by any caller that may reach the scope's subscription (the root's by any authenticated caller); at the
    # root "/", assignments need the action at "/" (docs/reference/authorization.md#the-root-scope).
    **{
        (method, f"{scope}/{roles.PROVIDER}/{path}"): BY_ENDPOINT
        for scope in ("", *roles.SCOPES)
        for method, path in (
            ("GET", "roleDefinitions"),
            ("GET", "roleDefinitions/{role_id}"),
            ("GET", "roleAssignments"),
            ("GET", "roleAssignments/{name}"),
            ("PUT", "roleAssignments/{name}"),
            ("DELETE", "roleAssignments/{name}"),
        )
    },
}


def route_entries(route: BaseRoute) -> list[tuple[str, str]]:
    """The (method, path template) keys of TABLE a route of the app needs (one per method it answers)."""
    if isinstance(route, ClassicRoute):
        return [(ANY_METHOD, ClassicRoute.path)]
    path = getattr(route, "path", None)
    methods = getattr(route, "methods", None)
    if path is None or not methods:
        raise ValueError(f"{route!r} has no path and methods: it cannot be looked up in the permissions table")
    return [(method, path) for method in sorted(methods)]


def identity_entries() -> list[tuple[str, str]]:
    """The keys of the token service's and account endpoints' shapes (one route serves them all)."""
    return [(method, shape.path) for shape in identity_paths.SHAPES for method in HANDLERS[shape.name]]


@dataclass(frozen=True, slots=True)
class _Matcher:
    regex: re.Pattern[str]
    rule: Rule


@dataclass(slots=True)
class RouteRules:
    """TABLE looked up by request: the routes given, by method, in the app's order, each with its rule (a route
    with no entry is refused here, at start)."""

    by_method: dict[str, list[_Matcher]] = field(default_factory=dict)

    @classmethod
    def of(cls, routers: Sequence[APIRouter], app_routes: Iterable[BaseRoute]) -> RouteRules:
        """``routers``: the app's routers in the order it includes them; ``app_routes``: the app's own routes
        (FastAPI's description pages: the plain ``Route`` among them)."""
        rules = cls()
        routes: list[BaseRoute] = [r for r in app_routes if type(r) is Route]
        routes += [route for router in routers for route in router.routes]
        missing = [key for route in routes for key in route_entries(route) if key not in TABLE]
        missing += [key for key in identity_entries() if key not in TABLE]
        if missing:
            raise ValueError(f"routes without an entry in api/permissions.py's TABLE: {missing}")
        for route in routes:
            regex: re.Pattern[str] = route.path_regex  # type: ignore[attr-defined]  # Route and APIRoute have one
            for method, path in route_entries(route):
                rules.by_method.setdefault(method, []).append(_Matcher(regex, TABLE[(method, path)]))
        return rules

    def find(self, method: str, path: str) -> tuple[Rule, dict[str, str]] | None:
        """The rule of the route this request reaches and its path parameters; None when no route of the table
        answers it (routing then answers 404 or 405, or the classic surface takes it)."""
        for matcher in self.by_method.get(method, ()):
            found = matcher.regex.match(path)
            if found is not None:
                return matcher.rule, found.groupdict()
        shape = identity_paths.find(path)
        if shape is not None:
            rule = TABLE.get((method, shape[0].path))
            if rule is not None:  # its one argument is the tenant or the subscription its path names
                key = "subscription_id" if "{subscriptionId}" in shape[0].path else "tenant"
                return rule, dict(zip([key], shape[1], strict=False))
        return None


@dataclass(frozen=True, slots=True)
class Readable:
    """What a list may show its caller: ``may(action, scope)``. Set on ``request.state.readable`` by the step for
    the routes of kind LIST and EVERYWHERE; absent (everything) when the caller is unrestricted."""

    grants: Grants | None  # None: everything

    @property
    def everything(self) -> bool:
        return self.grants is None

    def may(self, action: str, scope: str) -> bool:
        return self.grants is None or self.grants.permits(action, scope)


EVERYTHING = Readable(None)


def readable(request: Request) -> Readable:
    """What the list endpoint answering ``request`` may show (api/permissions.py's step decided it)."""
    found: Readable = getattr(request.state, "readable", EVERYTHING)
    return found


def reads_below(grants: Grants, action: str, scope: str) -> bool:
    """Whether one of the caller's assignments at ``scope`` or under it grants ``action`` (there is something
    there a list may show)."""
    for assignment in grants.assignments:
        role = assignment.role
        if role is not None and scope_covers(scope, assignment.scope) and action_permitted(role, action):
            return True
    return False


def has_role_in(grants: Grants, scope: str) -> bool:
    """Whether one of the caller's assignments applies at ``scope``, above it or under it."""
    return any(scope_covers(a.scope, scope) or scope_covers(scope, a.scope) for a in grants.assignments)


class PermissionCheck:
    """The pipeline's authorization step (api/pipeline.py, step 10)."""

    def __init__(self, rules: RouteRules, authorizer: Authorizer) -> None:
        self.rules = rules
        self.authorizer = authorizer

    async def check(self, scope: Scope) -> errors.ArmError | None:
        """None when the request may proceed (a list's ``Readable`` set on its state), else the error to answer."""
        found = self.rules.find(scope["method"], scope["path"])
        if found is None:
            return None
        rule, params = found
        if rule.kind in (Kind.OPEN, Kind.AUTHENTICATED, Kind.BY_ENDPOINT, Kind.CLASSIC):
            return None
        request = Request(scope)
        caller = await self.authorizer.subject(request)
        if caller.unrestricted:
            return None
        if rule.kind is Kind.EVERYWHERE:
            request.state.readable = Readable(await self.authorizer.grants(request))
            return None
        assert rule.scope is not None
        where = rule.scope(params)
        if rule.kind is not Kind.ROOT:
            gated = await self.authorizer.gate(request, params["subscription_id"])
            if gated is not None:
                return gated
        grants = await self.authorizer.grants(request)
        action = rule.action_for(params)
        if rule.kind is Kind.MEMBER:
            return None if has_role_in(grants, where) else self.authorizer.refusal(caller, action, where)
        if rule.kind is Kind.LIST:
            if grants.permits(action, where):
                return None
            if reads_below(grants, action, where):
                request.state.readable = Readable(grants)
                return None
        elif grants.permits(action, where):
            return None
        return self.authorizer.refusal(caller, action, where)


async def permitted(request: Request, checks: dict[str, tuple[str, str]]) -> dict[str, bool]:
    """For each name, whether the caller may perform its (action, scope): what the dashboard offers
    (docs/reference/authorization.md#the-dashboard). All True for an unrestricted caller."""
    authorizer: Authorizer = request.app.state.authorizer
    caller: Caller = await authorizer.subject(request)
    if caller.unrestricted:
        return dict.fromkeys(checks, True)
    grants = await authorizer.grants(request)
    return {name: grants.permits(action, where) for name, (action, where) in checks.items()}


Refusal = Callable[[Iterable[tuple[str, str]]], None]


async def refusal_of(request: Request) -> Refusal:
    """A pure check to run inside the request's transaction: it raises the 403 for the first (action, scope) the
    caller may not perform (a template deployment's resources, docs/reference/authorization.md#template-deployments),
    before anything is written; it does nothing for an unrestricted caller."""
    authorizer: Authorizer = request.app.state.authorizer
    caller: Caller = await authorizer.subject(request)
    if caller.unrestricted:
        return _permit_all
    grants = await authorizer.grants(request)

    def refuse(checks: Iterable[tuple[str, str]]) -> None:
        for action, where in checks:
            if not grants.permits(action, where):
                raise authorizer.refusal(caller, action, where)

    return refuse


def _permit_all(_checks: Iterable[tuple[str, str]]) -> None:
    return None


__all__ = [
    "EVERYTHING",
    "TABLE",
    "Kind",
    "PermissionCheck",
    "Readable",
    "RouteRules",
    "Rule",
    "identity_entries",
    "readable",
    "permitted",
    "refusal_of",
    "route_entries",
]
