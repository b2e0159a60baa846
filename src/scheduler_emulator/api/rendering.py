"""The one place that turns stored rows into their ARM wire JSON."""

from __future__ import annotations

import copy
from datetime import datetime
from typing import Any, Protocol

from scheduler_emulator.api.client_dialects import Style, rendered_duration
from scheduler_emulator.domain.clock import isoformat_z
from scheduler_emulator.schemas import job_shape as shape
from scheduler_emulator.schemas.job import service_spelling, strip_secrets
from scheduler_emulator.store.models import JobHistoryRow
from scheduler_emulator.store.write_scope import NamedCollection

COLLECTION_TYPE = "Microsoft.Scheduler/jobCollections"
JOB_TYPE = "Microsoft.Scheduler/jobCollections/jobs"
HISTORY_TYPE = "Microsoft.Scheduler/jobCollections/jobs/history"


class CollectionFacts(NamedCollection, Protocol):
    """What a collection's answer is made of (where it lives, store.write_scope.NamedCollection, and the rest): a
    stored row (store.models.JobCollectionRow) or a read of one statement (store.repository.CollectionRead) alike."""

    @property
    def location(self) -> str: ...
    @property
    def tags(self) -> dict[str, Any] | None: ...
    @property
    def properties(self) -> dict[str, Any]: ...
    @property
    def sku(self) -> str: ...
    @property
    def state(self) -> str: ...


class JobFacts(Protocol):
    """What a job's answer is made of: a stored row (store.models.JobRow) or a read of one statement
    (store.repository.JobRead) alike."""

    @property
    def name(self) -> str: ...
    @property
    def definition(self) -> dict[str, Any]: ...
    @property
    def state(self) -> str: ...
    @property
    def execution_count(self) -> int: ...
    @property
    def failure_count(self) -> int: ...
    @property
    def faulted_count(self) -> int: ...
    @property
    def last_execution_time(self) -> datetime | None: ...
    @property
    def next_execution_time(self) -> datetime | None: ...


def collection_id(collection: CollectionFacts) -> str:
    return (
        f"/subscriptions/{collection.subscription_id}/resourceGroups/{collection.resource_group}"
        f"/providers/Microsoft.Scheduler/jobCollections/{collection.name}"
    )


def job_id(collection: CollectionFacts, job: JobFacts) -> str:
    return f"{collection_id(collection)}/jobs/{job.name}"


def collection_to_wire(collection: CollectionFacts) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": collection_id(collection),
        "type": COLLECTION_TYPE,
        "name": collection.name,
        "location": collection.location,
    }
    if collection.tags:
        body["tags"] = collection.tags
    properties = copy.deepcopy(collection.properties)
    properties["state"] = _echo(properties.get("state"), collection.state)
    recurrence = (properties.get("quota") or {}).get("maxRecurrence")
    if isinstance(recurrence, dict) and isinstance(recurrence.get("frequency"), str):
        # as the service wrote it (docs/reference/arm-api.md#enumerations)
        recurrence["frequency"] = recurrence["frequency"].lower()
    if "sku" not in properties or not isinstance(properties["sku"], dict) or "name" not in properties["sku"]:
        properties["sku"] = {**(properties.get("sku") or {}), "name": collection.sku}
    body["properties"] = properties
    return body


def job_to_wire(collection: CollectionFacts, job: JobFacts, durations: Style = Style.ECHO) -> dict[str, Any]:
    """A job as ARM shows it, its durations written in ``durations`` (api.client_dialects), its enumerations
    in the service's spelling (docs/reference/arm-api.md#enumerations)."""
    properties = _answered_definition(job.definition, durations)
    properties["state"] = service_spelling(job.state)
    status: dict[str, Any] = {
        "executionCount": job.execution_count,
        "failureCount": job.failure_count,
        "faultedCount": job.faulted_count,
    }
    if job.last_execution_time is not None:
        status["lastExecutionTime"] = isoformat_z(job.last_execution_time)
    if job.next_execution_time is not None and job.state == "Enabled" and collection.state == "Enabled":
        status["nextExecutionTime"] = isoformat_z(job.next_execution_time)
    properties["status"] = status
    return {
        "id": job_id(collection, job),
        "type": JOB_TYPE,
        "name": f"{collection.name}/{job.name}",
        "properties": properties,
    }


def _answered_definition(definition: dict[str, Any], durations: Style) -> dict[str, Any]:
    """A new dict: the stored canonical definition (schemas.job.JobProperties.canonical) as the service answered
    it, secrets left out (schemas.job_shape), whatever the client sent."""
    properties = strip_secrets(definition)  # a copy, this answer's own
    for holder, key in shape.duration_fields(properties):
        holder[key] = rendered_duration(holder[key], durations)
    recurrence = properties.get("recurrence")
    if isinstance(recurrence, dict):
        recurrence["frequency"] = service_spelling(recurrence.get("frequency"))
        recurrence.setdefault("interval", 1)  # the service answered the default it applied (recorded)
        schedule = recurrence.get("schedule") or {}
        days = schedule.get("weekDays")
        # a list, or the one value as sent (schemas.common.SentAsScalar)
        if isinstance(days, list):
            schedule["weekDays"] = [service_spelling(day) for day in days]
        elif days is not None:
            schedule["weekDays"] = service_spelling(days)
        entries = schedule.get("monthlyOccurrences")
        for entry in entries if isinstance(entries, list) else () if entries is None else (entries,):
            entry["day"] = service_spelling(entry["day"])
            if "occurrence" in entry:
                # both keys, same value: the service's ``occurrence`` (recorded) and the REST spec's
                # ``Occurrence``, which every SDK reads case-sensitively
                entry["Occurrence"] = entry["occurrence"]
    for _, action in shape.actions_in(properties):
        policy = action.get("retryPolicy")
        if policy is not None and "retryType" in policy:
            policy["retryType"] = service_spelling(policy["retryType"])
        authentication = shape.member(action, "request", "authentication")
        if isinstance(authentication, dict) and "certificateExpirationDate" in authentication:
            # both names, same value: the service's (recorded) and the REST spec's, which the SDKs read
            authentication["certificateExpiration"] = authentication["certificateExpirationDate"]
        for payload in ("serviceBusQueueMessage", "serviceBusTopicMessage"):
            message = action.get(payload)
            if message is None:
                continue
            if "transportType" in message:
                message["transportType"] = service_spelling(message["transportType"])
            if "type" in message.get("authentication", {}):
                message["authentication"]["type"] = service_spelling(message["authentication"]["type"])
    return properties


def history_to_wire(collection: CollectionFacts, job: JobFacts, entry: JobHistoryRow) -> dict[str, Any]:
    properties: dict[str, Any] = {"startTime": isoformat_z(entry.start_time)}
    if entry.end_time is not None:
        properties["endTime"] = isoformat_z(entry.end_time)
    if entry.expected_execution_time is not None:
        properties["expectedExecutionTime"] = isoformat_z(entry.expected_execution_time)
    properties.update(
        actionName=entry.action_name,
        status=entry.status,
        message=entry.message,
        retryCount=entry.retry_count,
        repeatCount=entry.repeat_count,
    )
    return {
        "id": f"{job_id(collection, job)}/history/{entry.history_id}",
        "type": HISTORY_TYPE,
        "name": f"{collection.name}/{job.name}/{entry.history_id}",
        "properties": properties,
    }


def _echo(sent: object, canonical: str) -> str:
    """The client's own spelling of a state while it still names the current state, else the canonical one."""
    if isinstance(sent, str) and sent.lower() == canonical.lower():
        return sent
    return canonical
