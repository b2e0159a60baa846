"""One Python generation of the official Scheduler client, driven by test_client_matrix.py as a subprocess in
that generation's own virtual environment (azure-mgmt-scheduler 1.1.2, 1.1.3, 2.0.0 on msrest; 7.0.0 on
azure-core). It reads a plan (JSON) on stdin, does what the plan says through the SDK, and prints JSON of
what the SDK deserialised, in a neutral form the test compares field by field:

- every model as a dict of its Python attribute names (None left out), the same names in every generation;
- durations as seconds (a float), date-times as POSIX seconds, enumerations as their value.

Jobs to write come in that same neutral form and are built into the SDK's own models, so each SDK
serialises them its own way (2.0.0: ``60.00:00:00`` for 2 days; 7.0.0: ``P2D``).

Phases: ``write`` (create the client's own collection, create its jobs in the shared one), ``read`` (get,
patch and run each job, list the shared collection page by page), ``history`` (each job's history, page
by page, and the job again)."""

from __future__ import annotations

import datetime
import enum
import json
import sys
from collections.abc import Callable
from typing import Any

from azure.mgmt.scheduler import SchedulerManagementClient, models

try:  # 1.x and 2.0.0: msrest
    from azure.mgmt.scheduler.version import VERSION
except ImportError:  # 7.0.0: azure-core
    from azure.mgmt.scheduler._version import VERSION

MSREST = not VERSION.startswith("7.")


def connect(plan: dict[str, Any]) -> Any:
    """A client for the emulator: any token, the emulator's self-signed certificate, no retries."""
    if MSREST:
        from msrest.authentication import BasicTokenAuthentication

        client = SchedulerManagementClient(
            BasicTokenAuthentication({"access_token": "emulator"}), plan["subscription"], base_url=plan["url"]
        )
        client.config.connection.verify = plan["cert"]
        client.config.retry_policy.retries = 0
        return client
    from azure.core.credentials import AccessToken

    class AnyCredential:
        def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:
            return AccessToken("emulator", 4_102_444_800)

    return SchedulerManagementClient(
        AnyCredential(), plan["subscription"], base_url=plan["url"], connection_verify=plan["cert"], retry_total=0
    )


# --- neutral form <-> the SDK's models ------------------------------------------------------------


def neutral(value: Any) -> Any:
    """What the SDK deserialised, in the neutral form (see the module docstring)."""
    if isinstance(value, datetime.timedelta):
        return value.total_seconds()
    if isinstance(value, datetime.datetime):
        return value.timestamp()
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, list):
        return [neutral(item) for item in value]
    if isinstance(value, dict):
        return {key: neutral(item) for key, item in value.items() if item is not None}
    if hasattr(value, "_attribute_map"):
        return {
            name: neutral(getattr(value, name))
            for name in value._attribute_map
            if getattr(value, name, None) is not None
        }
    return value  # str, int, bool, or anything unexpected (an isodate.Duration stays visible as such)


def build(type_name: str, data: Any) -> Any:
    """The SDK value of msrest type ``type_name`` for neutral ``data``."""
    if data is None:
        return None
    if type_name.startswith("[") and type_name.endswith("]"):
        return [build(type_name[1:-1], item) for item in data]
    if type_name.startswith("{") and type_name.endswith("}"):
        return {key: build(type_name[1:-1], item) for key, item in data.items()}
    if type_name == "duration":
        return datetime.timedelta(seconds=data)
    if type_name in ("iso-8601", "rfc-1123"):
        return datetime.datetime.fromisoformat(data.replace("Z", "+00:00"))
    model = getattr(models, type_name, None)
    if model is None or not hasattr(model, "_attribute_map"):
        return data  # str, int, bool and the enumerations (sent as their value)
    kwargs = {name: build(model._attribute_map[name]["type"], item) for name, item in data.items()}
    return model(**kwargs)


# --- the operations, in each generation's own signature --------------------------------------------


def put_job(client: Any, plan: dict[str, Any], name: str, properties: Any) -> Any:
    if MSREST:  # 1.1.0+ take the job's properties (the release notes' "simplified parameters")
        return client.jobs.create_or_update(plan["resource_group"], plan["shared"], name, properties=properties)
    return client.jobs.create_or_update(
        plan["resource_group"], plan["shared"], name, models.JobDefinition(properties=properties)
    )


def patch_job(client: Any, plan: dict[str, Any], name: str, properties: Any) -> Any:
    if MSREST:
        return client.jobs.patch(plan["resource_group"], plan["shared"], name, properties=properties)
    return client.jobs.patch(plan["resource_group"], plan["shared"], name, models.JobDefinition(properties=properties))


def pages(paged: Any) -> list[list[Any]]:
    """Every page of a list, as the SDK fetched them (following nextLink)."""
    if MSREST:
        result = []
        for _ in range(1000):
            try:
                result.append(list(paged.advance_page()))
            except StopIteration:
                return result
        raise AssertionError("more than 1000 pages")
    return [list(page) for page in paged.by_page()]


def write(client: Any, plan: dict[str, Any]) -> dict[str, Any]:
    rg = plan["resource_group"]
    definition = models.JobCollectionDefinition(
        location="westus", properties=models.JobCollectionProperties(sku=models.Sku(name="Standard"))
    )
    client.job_collections.create_or_update(rg, plan["collection"], definition)
    created = {
        name: attempt(put_job, client, plan, name, build("JobProperties", spec)) for name, spec in plan["jobs"].items()
    }
    return {"collection": attempt(client.job_collections.get, rg, plan["collection"]), "created": created}


def attempt(operation: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """The operation's neutral result, or ``{"error": ...}`` when the SDK raised (the matrix shows which)."""
    try:
        return neutral(operation(*args, **kwargs))
    except Exception as exc:  # noqa: BLE001 - every failure of the client is a finding
        return {"error": f"{type(exc).__name__}: {exc}"[:500]}


def read(client: Any, plan: dict[str, Any]) -> dict[str, Any]:
    rg, shared = plan["resource_group"], plan["shared"]
    got, patched, ran = {}, {}, {}
    for name in plan["jobs"]:
        got[name] = attempt(client.jobs.get, rg, shared, name)
        patched[name] = attempt(patch_job, client, plan, name, build("JobProperties", plan["patch"][name]))
        ran[name] = attempt(client.jobs.run, rg, shared, name)
    listed = attempt(lambda: pages(client.jobs.list(rg, shared, top=plan["top"])))
    return {"get": got, "patched": patched, "ran": ran, "list": listed}


def history(client: Any, plan: dict[str, Any]) -> dict[str, Any]:
    rg, shared = plan["resource_group"], plan["shared"]
    entries, got = {}, {}
    for name in plan["jobs"]:
        entries[name] = attempt(lambda job: pages(client.jobs.list_job_history(rg, shared, job, top=plan["top"])), name)
        got[name] = attempt(client.jobs.get, rg, shared, name)
    return {"history": entries, "get": got}


def main() -> None:
    plan = json.load(sys.stdin)
    client = connect(plan)
    result = {"write": write, "read": read, "history": history}[plan["phase"]](client, plan)
    json.dump({"version": VERSION, **result}, sys.stdout)


if __name__ == "__main__":
    main()
