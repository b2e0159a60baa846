"""Resource groups: ``/subscriptions/{s}/resourceGroups[/{rg}[/resources]]``, the subscription's resource list
``/subscriptions/{s}/resources`` and the deletion's ``operationresults``
(docs/reference/front-door.md#resource-groups)."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from sqlalchemy.orm import Session
from starlette.convertors import Convertor, register_url_convertor

from scheduler_emulator.api import errors
from scheduler_emulator.api.context import in_session, json_object, now
from scheduler_emulator.api.permissions import GROUPS as GROUPS_ACTIONS
from scheduler_emulator.api.permissions import readable
from scheduler_emulator.service import resource_groups
from scheduler_emulator.service.resource_groups import GroupResource, ResourceGroup
from scheduler_emulator.store import resources as store

router = APIRouter()
T = TypeVar("T")

GROUPS = "/subscriptions/{subscription_id}/resourceGroups"
GROUP = GROUPS + "/{resource_group}"
GROUP_TYPE = "Microsoft.Resources/resourceGroups"
GROUPS_READ = GROUPS_ACTIONS + "/read"
_FILTER_TERM = re.compile(r"^\s*(\w+)\s+eq\s+'([^']*)'\s*$", re.IGNORECASE)


def group_to_wire(group: ResourceGroup) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": f"/subscriptions/{group.subscription_id}/resourceGroups/{group.name}",
        "name": group.name,
        "type": GROUP_TYPE,
        "location": group.location,
        "properties": {"provisioningState": "Succeeded"},
    }
    if group.tags:
        body["tags"] = group.tags
    return body


def resource_to_wire(resource: GroupResource) -> dict[str, Any]:
    body: dict[str, Any] = {"id": resource.id, "name": resource.name, "type": resource.type}
    if resource.location is not None:
        body["location"] = resource.location
    if resource.tags:
        body["tags"] = resource.tags
    return body


@router.put(GROUP)
async def create_or_update_group(request: Request, subscription_id: str, resource_group: str) -> Response:
    body = await json_object(request)
    moment = now(request)

    def work(session: Session) -> tuple[ResourceGroup, bool]:
        return resource_groups.put(session, subscription_id, resource_group, body, moment=moment)

    group, created = await in_session(request, work)
    return JSONResponse(group_to_wire(group), status_code=201 if created else 200)


@router.patch(GROUP)
async def update_group(request: Request, subscription_id: str, resource_group: str) -> Response:
    body = await json_object(request)
    moment = now(request)
    group = await in_group_session(
        request, lambda session: resource_groups.patch(session, subscription_id, resource_group, body, moment=moment)
    )
    return JSONResponse(group_to_wire(group))


@router.get(GROUP)
async def get_group(request: Request, subscription_id: str, resource_group: str) -> Response:
    group = await in_session(request, lambda session: _get(session, subscription_id, resource_group))
    return JSONResponse(group_to_wire(group))


@router.head(GROUP)
async def group_exists(request: Request, subscription_id: str, resource_group: str) -> Response:
    found = await in_session(request, lambda session: resource_groups.exists(session, subscription_id, resource_group))
    return Response(status_code=204 if found else 404)


@router.delete(GROUP)
async def delete_group(request: Request, subscription_id: str, resource_group: str) -> Response:
    """202 with a Location to poll; the deletion itself is done before answering, so the first poll ends it."""
    operation_id = uuid.uuid4().hex
    moment = now(request)

    def work(session: Session) -> None:
        _get(session, subscription_id, resource_group)
        resource_groups.delete(session, subscription_id, resource_group)
        store.record_arm_operation(session, operation_id, subscription_id, status="Succeeded", now=moment)

    await in_session(request, work, wake=True)
    location = str(
        request.url_for("group_operation_result", subscription_id=subscription_id, operation_id=operation_id)
    )
    version = request.query_params.get("api-version", "")
    return Response(status_code=202, headers={"Location": f"{location}?api-version={version}", "Retry-After": "1"})


@router.get("/subscriptions/{subscription_id}/operationresults/{operation_id}", name="group_operation_result")
async def group_operation_result(request: Request, subscription_id: str, operation_id: str) -> Response:
    """A group deletion's outcome: 202 while it runs, then 200."""
    operation = await in_session(request, lambda session: store.arm_operation(session, operation_id))
    if operation is None or operation.subscription_key != subscription_id.lower():
        raise errors.resource_not_found("operation", operation_id)
    return Response(status_code=200 if operation.status == "Succeeded" else 202)


@router.get(GROUPS)
async def list_groups(request: Request, subscription_id: str) -> Response:
    groups = await in_session(request, lambda session: resource_groups.list_all(session, subscription_id))
    shown = readable(request)  # what the caller may read (docs/reference/authorization.md#lists)
    listed = [group_to_wire(group) for group in groups]
    return JSONResponse({"value": [group for group in listed if shown.may(GROUPS_READ, group["id"])]})


@router.get(GROUP + "/resources")
async def list_group_resources(request: Request, subscription_id: str, resource_group: str) -> Response:
    def work(session: Session) -> list[GroupResource]:
        _get(session, subscription_id, resource_group)
        return resource_groups.resources_in(session, subscription_id, resource_group)

    found = await in_session(request, work)
    found = _filtered(found, request.query_params.get("$filter"), allow_group=False)
    return JSONResponse({"value": [resource_to_wire(resource) for resource in _readable(request, found)]})


@router.get("/subscriptions/{subscription_id}/resources")
async def list_subscription_resources(request: Request, subscription_id: str) -> Response:
    """What ``az resource list -g rg`` calls: ``$filter=resourceGroup eq 'rg'`` (and resourceType, name)."""
    raw_filter = request.query_params.get("$filter")
    terms = _filter_terms(raw_filter, allow_group=True)
    group = terms.pop("resourcegroup", None)
    found = await in_session(request, lambda session: resource_groups.resources_in(session, subscription_id, group))
    return JSONResponse({"value": [resource_to_wire(r) for r in _readable(request, _apply(found, terms))]})


def _readable(request: Request, found: list[GroupResource]) -> list[GroupResource]:
    """The resources the caller may read, each by its own type's read action (docs/reference/authorization.md#lists)."""
    shown = readable(request)
    return found if shown.everything else [r for r in found if shown.may(f"{r.type}/read", r.id)]


async def in_group_session(request: Request, work: Callable[[Session], T], wake: bool = False) -> T:
    """in_session, answering ResourceGroupNotFound (as ARM) rather than ResourceNotFound for a missing group."""
    try:
        return await in_session(request, work, wake=wake)
    except errors.ArmError as exc:
        if exc.code == "ResourceNotFound" and f"{resource_groups.GROUP_KIND} '" in exc.message:
            raise errors.resource_group_not_found(request.path_params["resource_group"]) from None
        raise


def _get(session: Session, subscription_id: str, resource_group: str) -> ResourceGroup:
    group = resource_groups.find(session, subscription_id, resource_group)
    if group is None:
        raise errors.resource_group_not_found(resource_group)
    return group


def _filter_terms(raw: str | None, *, allow_group: bool) -> dict[str, str]:
    """``field eq 'value' [and …]`` as {field (lower case): value}; 400 for anything else."""
    if raw is None or not raw.strip():
        return {}
    fields = ("resourceGroup", "resourceType", "name") if allow_group else ("resourceType", "name")
    terms: dict[str, str] = {}
    for part in re.split(r"\s+and\s+", raw.strip(), flags=re.IGNORECASE):
        match = _FILTER_TERM.match(part)
        if not match or match[1].lower() not in {f.lower() for f in fields}:
            shown = raw[:100].encode("unicode_escape").decode("ascii")
            raise errors.invalid_field(
                "$filter", f"'{shown}' is not supported; use {' and '.join(f + ' eq ' + repr('…') for f in fields)}"
            )
        terms[match[1].lower()] = match[2]
    return terms


def _filtered(found: list[GroupResource], raw: str | None, *, allow_group: bool) -> list[GroupResource]:
    return _apply(found, _filter_terms(raw, allow_group=allow_group))


def _apply(found: list[GroupResource], terms: dict[str, str]) -> list[GroupResource]:
    if "resourcetype" in terms:
        found = [r for r in found if r.type.lower() == terms["resourcetype"].lower()]
    if "name" in terms:
        found = [r for r in found if r.name.lower() == terms["name"].lower()]
    return found


class ForeignNamespace(Convertor[str]):
    """A provider namespace other than the three this service hosts (canonical spelling: the pipeline rewrote
    them; Microsoft.Authorization is api/roles.py's), so the inert-resource route never answers for their paths
    (whose wrong methods must stay 405, and unknown paths 404)."""

    regex = r"(?!(?:Microsoft\.Scheduler|Microsoft\.Resources|Microsoft\.Authorization)(?:/|$))[^/]+"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor("arm_foreign_namespace", ForeignNamespace())
inert_router = APIRouter()


@inert_router.get(GROUP + "/providers/{namespace:arm_foreign_namespace}/{resource_path:path}")
async def get_inert_resource(
    request: Request, subscription_id: str, resource_group: str, namespace: str, resource_path: str
) -> Response:
    """Another provider's resource kept inert (``--arm-foreign-resources inert``), as ``az resource show`` reads it."""
    parts = resource_path.strip("/").split("/")
    if len(parts) % 2:
        raise errors.route_not_found(request.url.path)
    resource_type = "/".join([namespace, *parts[0::2]])
    name = "/".join(parts[1::2])

    def work(session: Session) -> dict[str, Any] | None:
        return resource_groups.inert_resource(session, subscription_id, resource_group, resource_type, name)

    found = await in_session(request, work)
    if found is None:
        raise errors.ArmError(
            404,
            "ResourceNotFound",
            f"The Resource '{resource_type}/{name}' under resource group '{resource_group}' was not found.",
        )
    return JSONResponse(found)
