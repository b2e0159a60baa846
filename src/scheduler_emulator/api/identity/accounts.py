"""What the Azure CLI calls around logging in, answered as ARM does (docs/reference/token-service.md#the-azure-cli): the
cloud's endpoints document (``az cloud register --endpoint-resource-manager``), the caller's subscriptions and tenants,
and a subscription's locations.

Who the caller is comes from its bearer token when the token service issued it (whatever the auth mode): a
principal lists its configured subscription in the tenant it signed in to (and, where roles are in force, those it
holds a role in). Any other caller (no token, or
one from elsewhere) sees the all-zero subscription and tenant. Subscriptions exist implicitly
(docs/reference/arm-api.md#paths-and-names), so ``GET /subscriptions/{s}`` answers for any well-formed id."""

from __future__ import annotations

import re
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse, Response

from scheduler_emulator.api import errors
from scheduler_emulator.api.authorization import Authorizer
from scheduler_emulator.api.identity.endpoints import base_url, service
from scheduler_emulator.api.identity.principals import DEFAULT_SUBSCRIPTION, DEFAULT_TENANT
from scheduler_emulator.api.identity.tokens import MANAGEMENT_AUDIENCES
from scheduler_emulator.domain.authorization import subscription_of
from scheduler_emulator.domain.regions import known_display_names

# The front door's api-version rule (docs/reference/front-door.md#api-version-and-paths): any date, optionally -preview;
# clients pin many.
_API_VERSION = re.compile(r"^\d{4}-\d{2}-\d{2}(-preview)?$")
_SUBSCRIPTION = re.compile(r"^[A-Za-z0-9_(][A-Za-z0-9_.()-]{0,99}$")
EMULATOR_DOMAIN = "scheduler-emulator.local"


def _check_api_version(request: Request) -> None:
    version = request.query_params.get("api-version")
    if not version:
        raise errors.missing_api_version()
    if not _API_VERSION.match(version):
        shown = version[:40].encode("unicode_escape").decode("ascii")
        raise errors.ArmError(
            400,
            "InvalidApiVersionParameter",
            f"The api-version '{shown}' is invalid. Use a date such as '2022-12-01' (optionally with '-preview').",
        )


def _caller(request: Request) -> tuple[str, str, str]:
    """(subscription id, tenant id, display name) of the caller (see the module's docstring)."""
    caller = service(request).caller_of(request.headers.get("authorization"))
    if caller is None or caller.principal is None:
        return DEFAULT_SUBSCRIPTION, DEFAULT_TENANT, "Scheduler emulator"
    return caller.principal.subscription, caller.tenant, caller.principal.display_name


def _subscription(subscription_id: str, tenant: str, display_name: str) -> dict[str, Any]:
    return {
        "id": f"/subscriptions/{subscription_id}",
        "authorizationSource": "RoleBased",
        "managedByTenants": [],
        "tags": {},
        "subscriptionId": subscription_id,
        "tenantId": tenant,
        "displayName": display_name,
        "state": "Enabled",
        "subscriptionPolicies": {
            "locationPlacementId": "Public_2014-09-01",
            "quotaId": "PayAsYouGo_2014-09-01",
            "spendingLimit": "Off",
        },
    }


async def list_subscriptions(request: Request) -> Response:
    """``GET /subscriptions``: the caller's own subscription (az login needs at least one), then, where roles are
    in force, each other subscription of its tenant where it holds a role at any scope, as ARM lists them
    (docs/reference/authorization.md#who-starts-with-what): so a principal granted a resource group signs in with
    ``az login`` and reaches it."""
    _check_api_version(request)
    subscription_id, tenant, name = _caller(request)
    value = [_subscription(subscription_id, tenant, name)]
    seen = {subscription_id.lower()}
    authorizer: Authorizer = request.app.state.authorizer
    if authorizer.enforcing:
        for assignment in (await authorizer.grants(request)).assignments:
            granted = subscription_of(assignment.scope)
            if granted is None or granted.lower() in seen:
                continue
            if authorizer.directory.tenant_of(granted) not in (None, tenant.lower()):
                continue  # another tenant's: its token could not reach it
            seen.add(granted.lower())
            value.append(_subscription(granted, tenant, "Scheduler emulator"))
    return JSONResponse({"value": value, "count": {"type": "Total", "value": len(value)}})


async def get_subscription(request: Request, subscription_id: str) -> Response:
    """``GET /subscriptions/{s}``: any well-formed id exists (implicitly), in the caller's tenant."""
    _check_api_version(request)
    if not _SUBSCRIPTION.match(subscription_id) or subscription_id.endswith("."):
        shown = subscription_id[:100].encode("unicode_escape").decode("ascii")
        raise errors.ArmError(
            400, "InvalidSubscriptionId", f"The provided subscription identifier '{shown}' is malformed or invalid."
        )
    own, tenant, name = _caller(request)
    shown_name = name if own.lower() == subscription_id.lower() else "Scheduler emulator"
    return JSONResponse(_subscription(subscription_id, tenant, shown_name))


async def list_tenants(request: Request) -> Response:
    """``GET /tenants``: the tenant the caller signed in to."""
    _check_api_version(request)
    _, tenant, _ = _caller(request)
    document = {
        "id": f"/tenants/{tenant}",
        "tenantId": tenant,
        "tenantCategory": "Home",
        "countryCode": "US",
        "displayName": "Scheduler emulator",
        "domains": [EMULATOR_DOMAIN],
        "defaultDomain": EMULATOR_DOMAIN,
        "tenantType": "AAD",
    }
    return JSONResponse({"value": [document], "count": {"type": "Total", "value": 1}})


async def list_locations(request: Request, subscription_id: str) -> Response:
    """``GET /subscriptions/{s}/locations``: the Azure regions the emulator knows (any may hold a collection)."""
    _check_api_version(request)
    value = [
        {
            "id": f"/subscriptions/{subscription_id}/locations/{name}",
            "name": name,
            "type": "Region",
            "displayName": display,
            "regionalDisplayName": display,
            "metadata": {"regionType": "Physical", "regionCategory": "Other"},
        }
        for display in known_display_names()
        for name in [display.replace(" ", "").lower()]  # westus, as ARM names a region
    ]
    return JSONResponse({"value": value})


async def metadata_endpoints(request: Request) -> Response:
    """``GET /metadata/endpoints``: this cloud's endpoints as ARM publishes Azure's, pointing at this server:
    sign-in (the token service) and Resource Manager on the origin the client reached; Microsoft Graph's
    resource id as Azure's, since Graph is not emulated."""
    _check_api_version(request)
    base = base_url(request)
    return JSONResponse(
        {
            "name": "SchedulerEmulator",
            "portal": f"{base}/_emulator/ui/",
            "authentication": {
                "loginEndpoint": f"{base}/",
                "audiences": list(MANAGEMENT_AUDIENCES),
                "tenant": "common",
                "identityProvider": "AAD",
            },
            "resourceManager": f"{base}/",
            # Azure's value: az builds its Graph client from it (az role assignment list does, even with
            # --fill-principal-name false, which then calls nothing); the token service issues no Graph token
            # (docs/reference/authorization.md#the-azure-cli)
            "microsoftGraphResourceId": "https://graph.microsoft.com/",
            "suffixes": {},
        }
    )
