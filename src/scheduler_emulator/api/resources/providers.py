"""Resource providers: ``/subscriptions/{s}/providers[/{namespace}[/register|/unregister]]``
(docs/reference/front-door.md#providers)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from scheduler_emulator.api.context import in_session
from scheduler_emulator.service import providers
from scheduler_emulator.service.providers import ProviderState

router = APIRouter()

PROVIDERS = "/subscriptions/{subscription_id}/providers"
PROVIDER = PROVIDERS + "/{namespace}"


def provider_to_wire(subscription_id: str, state: ProviderState) -> dict[str, Any]:
    provider = state.provider
    return {
        "id": f"/subscriptions/{subscription_id}/providers/{provider.namespace}",
        "namespace": provider.namespace,
        "registrationState": state.registration_state,
        "registrationPolicy": "RegistrationRequired",
        "resourceTypes": [
            {
                "resourceType": resource_type,
                "locations": list(state.locations),
                "apiVersions": list(versions),
                "defaultApiVersion": versions[0],
                "capabilities": "None",
            }
            for resource_type, versions in provider.resource_types
        ],
    }


@router.get(PROVIDERS)
async def list_providers(request: Request, subscription_id: str) -> Response:
    states = await in_session(request, lambda session: providers.list_all(session, subscription_id))
    return JSONResponse({"value": [provider_to_wire(subscription_id, state) for state in states]})


@router.get(PROVIDER)
async def get_provider(request: Request, subscription_id: str, namespace: str) -> Response:
    state = await in_session(request, lambda session: providers.get(session, subscription_id, namespace))
    return JSONResponse(provider_to_wire(subscription_id, state))


@router.post(PROVIDER + "/register")
async def register_provider(request: Request, subscription_id: str, namespace: str) -> Response:
    state = await in_session(
        request, lambda session: providers.register(session, subscription_id, namespace, registered=True)
    )
    return JSONResponse(provider_to_wire(subscription_id, state))


@router.post(PROVIDER + "/unregister")
async def unregister_provider(request: Request, subscription_id: str, namespace: str) -> Response:
    state = await in_session(
        request, lambda session: providers.register(session, subscription_id, namespace, registered=False)
    )
    return JSONResponse(provider_to_wire(subscription_id, state))
