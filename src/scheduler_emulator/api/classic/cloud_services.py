"""Classic subscription-level operations and cloud services (docs/reference/classic-api.md#cloud-services)."""

from __future__ import annotations

import base64
import hashlib

from fastapi import Request
from fastapi.responses import Response
from sqlalchemy.orm import Session

from scheduler_emulator.api.classic import wire
from scheduler_emulator.api.classic.wire import Xml, element
from scheduler_emulator.api.context import in_read_session, in_session, now, read_body
from scheduler_emulator.domain import plans
from scheduler_emulator.domain.regions import display_location
from scheduler_emulator.service import cloud_services
from scheduler_emulator.store import classic as store
from scheduler_emulator.store.models import JobCollectionRow

_PLAN_NAMES = {plans.FREE: "Free", "Standard": "Standard", "P10Premium": "Premium", "P20Premium": "Premium"}
_SUCCEEDED = element("Error", Xml(element("HttpCode", 200) + element("Message", "OK"))) + element("Result", "Succeeded")
_STATES = {"Enabled": "Started", "Disabled": "Stopped", "Suspended": "Paused"}


def operation_id(request: Request) -> str:
    """The id clients poll: the response's own ``x-ms-request-id`` (set by the pipeline)."""
    return str(request.state.request_id)


def accepted(session: Session, request: Request, subscription: str) -> None:
    """Record the finished operation a 202 answers with (docs/reference/classic-api.md#asynchronous-operations: they
    complete at once)."""
    store.record_operation(session, operation_id(request), subscription, http_status=200, now=now(request))


async def register(request: Request, subscription: str) -> Response:
    """PUT /{s}/services?service=scheduler.JobCollections&action=register|unregister → 200 (idempotent)."""
    action = request.query_params.get("action", "").lower()
    if action not in ("register", "unregister"):
        raise wire.bad_request("The query parameter 'action' must be 'register' or 'unregister'.")
    return Response(status_code=200)


async def provider_properties(request: Request, subscription: str) -> Response:
    regions = ",".join(sorted({display_location(name) for name in ("westus", "eastus", "northeurope", "westeurope")}))
    properties = [("plans", "Free,Standard,Premium"), ("regions", regions)]
    inner = "".join(
        element("ResourceProviderProperty", Xml(element("Key", key), element("Value", value)))
        for key, value in properties
    )
    return wire.xml_response("ResourceProviderProperties", inner)


async def entitle(request: Request, subscription: str) -> Response:
    """POST /{s}/EntitleResource → 202; accepted and ignored (the body must still be XML)."""
    wire.parse_xml(await read_body(request), "EntitleResource")
    await in_session(request, lambda session: accepted(session, request, subscription))
    return Response(status_code=202)


async def operation(request: Request, subscription: str, operation: str) -> Response:
    def work(session: Session) -> int | None:
        row = store.find_operation(session, subscription, operation)
        return None if row is None else row.http_status

    status = await in_read_session(request, work)
    if status is None:
        raise wire.not_found(f"The operation '{operation[:64]}' could not be found.")
    inner = element("ID", operation) + element("Status", "Succeeded") + element("HttpStatusCode", status)
    return wire.xml_response("Operation", inner)


async def create(request: Request, subscription: str, name: str) -> Response:
    body = wire.parse_xml(await read_body(request), "CloudService")
    label = body.text("Label", "CloudService.Label", cloud_services.MAX_LABEL)
    description = body.text("Description", "CloudService.Description", cloud_services.MAX_DESCRIPTION)
    region = body.text("GeoRegion", "CloudService.GeoRegion", 100)
    email = body.text("Email", "CloudService.Email", 256)
    for path, value in (("Label", label), ("GeoRegion", region)):
        if not value:
            raise wire.bad_request(f"The value of 'CloudService.{path}' is required.")
    moment = now(request)

    def work(session: Session) -> None:
        cloud_services.create(
            session,
            subscription,
            name,
            label=label or "",
            description=description or "",
            geo_region=display_location(region or ""),
            email=email,
            moment=moment,
        )
        accepted(session, request, subscription)

    await in_session(request, work)
    return Response(status_code=202)


async def get(request: Request, subscription: str, name: str) -> Response:
    service = await in_read_session(request, lambda session: cloud_services.get(session, subscription, name))
    return wire.xml_response("CloudService", _cloud_service_xml(service, detail=True))


async def list_all(request: Request, subscription: str) -> Response:
    services = await in_read_session(request, lambda session: cloud_services.list_all(session, subscription))
    inner = "".join(element("CloudService", Xml(_cloud_service_xml(service, detail=False))) for service in services)
    return wire.xml_response("CloudServices", inner)


async def delete(request: Request, subscription: str, name: str) -> Response:
    def work(session: Session) -> None:
        cloud_services.delete(session, subscription, name)
        accepted(session, request, subscription)

    await in_session(request, work)
    return Response(status_code=202)


def _cloud_service_xml(service: cloud_services.CloudService, detail: bool) -> str:
    region = element("GeoRegion", service.geo_region)
    # npm's get reads GeoLocation, its list and Python read GeoRegion (docs/reference/classic-api.md#cloud-services)
    if detail:
        region += element("GeoLocation", service.geo_region)
    resources = "".join(element("Resource", Xml(resource_xml(c))) for c in service.collections)
    return (
        element("Name", service.name)
        + element("Label", service.label)
        + element("Description", service.description)
        + region
        + element("Resources", Xml(resources))
    )


def etag_of(collection: JobCollectionRow) -> str:
    """Opaque; changes on every update of the collection."""
    seed = f"{collection.id}:{collection.updated_at.isoformat()}:{collection.label}:{collection.sku}"
    return hashlib.sha1(seed.encode(), usedforsecurity=False).hexdigest()[:32]


def plan_of(collection: JobCollectionRow) -> str:
    return _PLAN_NAMES.get(collection.sku, collection.sku)


def resource_xml(collection: JobCollectionRow) -> str:
    """A job collection as a classic ``<Resource>``'s children (docs/reference/classic-api.md#job-collections)."""
    plan = plan_of(collection)
    label = collection.label if collection.label is not None else base64.b64encode(collection.name.encode()).decode()
    return (
        element("CloudServiceSettings", Xml(element("GeoRegion", collection.location)))
        + element("ETag", etag_of(collection))
        + element("IntrinsicSettings", Xml(element("Plan", plan) + _quota_xml(collection)))
        + element("Label", label)
        + element("Name", collection.name)
        # as the service answered a GET (recorded, 2015): an Error element even on success, which npm reads
        + element("OperationStatus", Xml(_SUCCEEDED))
        + element("Plan", plan)
        + element("PromotionCode")
        + element("ResourceProviderNamespace", "scheduler")
        + element("SchemaVersion", "1.1")  # recorded
        + element("State", _STATES.get(collection.state, collection.state))
        + Xml('<SubState i:nil="true"/>').text  # recorded
        + element("Type", "jobcollections")
    )


def _quota_xml(collection: JobCollectionRow) -> str:
    quota = collection.properties.get("quota")
    if not isinstance(quota, dict):
        return ""
    inner = ""
    for key, name in (("maxJobCount", "MaxJobCount"), ("maxJobOccurrence", "MaxJobOccurrence")):
        if quota.get(key) is not None:
            inner += element(name, quota[key])
    recurrence = quota.get("maxRecurrence")
    if isinstance(recurrence, dict):
        inner += element(
            "MaxRecurrence",
            Xml(element("Frequency", recurrence.get("frequency")) + element("Interval", recurrence.get("interval"))),
        )
    return element("Quota", Xml(inner))
