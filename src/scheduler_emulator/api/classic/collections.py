"""Classic job collections (docs/reference/classic-api.md#job-collections): XML in and out, 202 + operations, If-Match
updates."""

from __future__ import annotations

from typing import Any

from fastapi import Request
from fastapi.responses import Response
from sqlalchemy.orm import Session

from scheduler_emulator.api.classic import wire
from scheduler_emulator.api.classic.cloud_services import accepted, etag_of, resource_xml
from scheduler_emulator.api.classic.wire import ClassicError, Node, element
from scheduler_emulator.api.context import in_read_session, in_session, now, read_body, retry_floor
from scheduler_emulator.domain import plans
from scheduler_emulator.service import cloud_services, collections
from scheduler_emulator.store.models import JobCollectionRow

MAX_LABEL = 100
_PLANS = {"free": plans.FREE, "standard": "Standard", "premium": "P10Premium"}


async def check_name(request: Request, subscription: str, cloud_service: str) -> Response:
    """GET (npm) answers ResourceNameAvailabilityResponse/IsAvailable, POST (Python) AvailabilityResponse/Result."""
    if request.query_params.get("op", "").lower() != "checknameavailability":
        raise wire.bad_request("The query parameter 'op' must be 'checknameavailability'.")
    name = request.query_params.get("resourceName", "")
    if not name:
        raise wire.bad_request("The query parameter 'resourceName' is required.")
    ref = cloud_services.collection_ref(subscription, cloud_service, name)
    taken = await in_read_session(request, lambda session: collections.find(session, ref) is not None)
    answer = "false" if taken else "true"
    if request.method == "POST":
        return wire.xml_response("AvailabilityResponse", element("Result", answer))
    return wire.xml_response("ResourceNameAvailabilityResponse", element("IsAvailable", answer))


async def put(request: Request, subscription: str, cloud_service: str, name: str) -> Response:
    """Create (no If-Match; 409 when it exists) or update (If-Match = current ETag or ``*``; 412 when stale)."""
    body = wire.parse_xml(await read_body(request), "Resource")
    plan, quota, label = _settings(body)
    if_match = request.headers.get("if-match")
    moment, floor = now(request), retry_floor(request)
    ref = cloud_services.collection_ref(subscription, cloud_service, name)

    def work(session: Session) -> None:
        region = cloud_services.region_of(session, subscription, cloud_service)
        existing = collections.find(session, ref)
        if existing is None:
            if if_match is not None:
                raise wire.not_found(f"The job collection '{name}' could not be found.")
            arm: dict[str, Any] = {"location": region, "properties": {"sku": {"name": plan or "Standard"}}}
            if quota is not None:
                arm["properties"]["quota"] = quota
        else:
            if if_match is None:
                raise ClassicError(409, "ConflictError", f"The job collection '{existing.name}' already exists.")
            if if_match.strip('"') not in ("*", etag_of(existing)):
                raise ClassicError(
                    412, "PreconditionFailed", "The ETag in If-Match is not the collection's current one."
                )
            properties = dict(existing.properties)
            if plan is not None:
                properties["sku"] = {"name": plan}
            if quota is not None:
                properties["quota"] = quota
            arm = {"location": existing.location, "tags": existing.tags, "properties": properties}
        collection, _ = collections.put(session, ref, arm, moment=moment, floor=floor)
        if label is not None:
            collection.label = label
        session.flush()
        accepted(session, request, subscription)

    await in_session(request, work, wake=True)
    return Response(status_code=202)


async def get(request: Request, subscription: str, cloud_service: str, name: str) -> Response:
    ref = cloud_services.collection_ref(subscription, cloud_service, name)
    collection: JobCollectionRow = await in_read_session(request, lambda session: collections.get(session, ref))
    return wire.xml_response("Resource", resource_xml(collection))


async def delete(request: Request, subscription: str, cloud_service: str, name: str) -> Response:
    ref = cloud_services.collection_ref(subscription, cloud_service, name)

    def work(session: Session) -> None:
        collections.delete(session, ref)
        accepted(session, request, subscription)

    await in_session(request, work)
    return Response(status_code=202)


def _settings(body: Node) -> tuple[str | None, dict[str, Any] | None, str | None]:
    """(ARM sku, ARM quota, label) from a ``<Resource>`` body; None for what it leaves out."""
    label_text = body.text("Label", "Resource.Label", 4 * MAX_LABEL)
    label = wire.decode_label(label_text, "Resource.Label", MAX_LABEL) if label_text else None
    settings = body.child("IntrinsicSettings")
    if settings is None:
        return None, None, label
    plan_text = settings.text("Plan", "Resource.IntrinsicSettings.Plan", 20)
    plan = None
    if plan_text:
        plan = _PLANS.get(plan_text.lower())
        if plan is None:
            raise wire.bad_request(
                f"The value of 'Resource.IntrinsicSettings.Plan' is invalid: '{plan_text}' is not one of "
                "Free, Standard, Premium."
            )
    quota_node = settings.child("Quota")
    if quota_node is None:
        return plan, None, label
    path = "Resource.IntrinsicSettings.Quota"
    quota: dict[str, Any] = {}
    for name, key in (("MaxJobCount", "maxJobCount"), ("MaxJobOccurrence", "maxJobOccurrence")):
        value = quota_node.integer(name, f"{path}.{name}")
        if value is not None:
            quota[key] = value
    recurrence = quota_node.child("MaxRecurrence")
    if recurrence is not None:
        frequency = recurrence.text("Frequency", f"{path}.MaxRecurrence.Frequency", 20)
        interval = recurrence.integer("Interval", f"{path}.MaxRecurrence.Interval")
        quota["maxRecurrence"] = {
            key: value for key, value in (("frequency", frequency), ("interval", interval)) if value is not None
        }
    return plan, quota, label
