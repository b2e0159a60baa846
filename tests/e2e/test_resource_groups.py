"""The Microsoft.Resources front door's resource groups, resource lists and providers
(docs/reference/front-door.md#resource-groups), driven with azure-mgmt-resource 24.0.0 against a started server on each
store, read back through azure-mgmt-scheduler."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from azure.core.credentials import AccessToken
from azure.core.exceptions import HttpResponseError, ResourceNotFoundError
from azure.mgmt.resource import ResourceManagementClient
from azure.mgmt.scheduler import SchedulerManagementClient
from azure.mgmt.scheduler.models import JobCollectionDefinition, JobCollectionProperties, Sku
from support.api_client import create_job
from support.names import Names
from support.sdk import resource_sdk, scheduler_sdk
from support.server import EmulatorPool, ServerProcess


class FakeCredential:
    def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:
        return AccessToken("fake", 4_102_444_800)


@pytest.fixture
def arm(server: ServerProcess, names: Names) -> Iterator[ResourceManagementClient]:
    with resource_sdk(server, FakeCredential(), names.subscription) as client:
        yield client
    gc.collect()


@pytest.fixture
def scheduler(server: ServerProcess, names: Names) -> Iterator[SchedulerManagementClient]:
    with scheduler_sdk(server, FakeCredential(), names.subscription) as client:
        yield client
    gc.collect()


def collection(location: str = "westus") -> JobCollectionDefinition:
    return JobCollectionDefinition(location=location, properties=JobCollectionProperties(sku=Sku(name="Standard")))


def test_group_lifecycle_through_the_sdk(arm: ResourceManagementClient, names: Names) -> None:
    rg = names.resource_group
    assert arm.resource_groups.check_existence(rg) is False
    created = arm.resource_groups.create_or_update(rg, {"location": "West US", "tags": {"team": "ops"}})
    assert (created.name, created.location, created.tags) == (rg, "westus", {"team": "ops"})
    assert created.type == "Microsoft.Resources/resourceGroups"
    assert created.properties.provisioning_state == "Succeeded"
    assert created.id == f"/subscriptions/{names.subscription}/resourceGroups/{rg}"
    assert arm.resource_groups.check_existence(rg) is True
    # PUT again: 200, tags replaced
    again = arm.resource_groups.create_or_update(rg, {"location": "westus", "tags": {"team": "dev"}})
    assert again.tags == {"team": "dev"}
    patched = arm.resource_groups.update(rg, {"tags": {"env": "test"}})
    assert patched.tags == {"env": "test"}
    assert arm.resource_groups.get(rg.upper()).name == rg  # names match case-insensitively, keep their casing
    assert [g.name for g in arm.resource_groups.list()] == [rg]
    with pytest.raises(HttpResponseError) as moved:
        arm.resource_groups.create_or_update(rg, {"location": "eastus"})
    assert moved.value.status_code == 400
    for missing_call in (
        lambda: arm.resource_groups.get("nowhere"),
        lambda: arm.resource_groups.update("nowhere", {"tags": {}}),
        lambda: arm.resource_groups.begin_delete("nowhere").result(),
    ):
        with pytest.raises(ResourceNotFoundError) as missing:
            missing_call()
        assert missing.value.error.code == "ResourceGroupNotFound"


def test_implicit_group_appears_and_delete_removes_everything(
    arm: ResourceManagementClient, scheduler: SchedulerManagementClient, names: Names, http: Any
) -> None:
    rg = names.resource_group
    scheduler.job_collections.create_or_update(rg, names.collection, collection())
    create_job(
        http,
        names,
        "job1",
        {"type": "Http", "request": {"uri": "http://127.0.0.1:9/x", "method": "GET"}},
        startTime=(datetime.now(UTC) + timedelta(days=30)).strftime("%Y-%m-%dT%H:%M:%SZ"),
    )
    # the group exists implicitly (docs/reference/arm-api.md#paths-and-names), located where its first collection is
    group = arm.resource_groups.get(rg)
    assert (group.name, group.location) == (rg, "westus")
    assert rg in [g.name for g in arm.resource_groups.list()]
    listed = {(r.type, r.name) for r in arm.resources.list_by_resource_group(rg)}
    assert listed == {
        ("Microsoft.Scheduler/jobCollections", names.collection),
        ("Microsoft.Scheduler/jobCollections/jobs", f"{names.collection}/job1"),
    }
    # what `az resource list -g` sends
    by_filter = arm.resources.list(filter=f"resourceGroup eq '{rg}'")
    assert {r.name for r in by_filter} == {names.collection, f"{names.collection}/job1"}

    arm.resource_groups.begin_delete(rg).result()
    assert arm.resource_groups.check_existence(rg) is False
    assert list(scheduler.job_collections.list_by_resource_group(rg)) == []
    assert list(arm.resources.list(filter=f"resourceGroup eq '{rg}'")) == []


def test_raw_paths_answer_arm_errors(http: Any, names: Names) -> None:
    base = f"/subscriptions/{names.subscription}/resourcegroups/{names.resource_group}"  # as the SDKs spell it
    assert http.put(base, params={"api-version": "2019-10-01"}, json={"location": "westus"}).status_code == 201
    assert http.head(base, params={"api-version": "2024-03-01-preview"}).status_code == 204
    bad = http.get(base, params={"api-version": "yesterday"})
    assert (bad.status_code, bad.json()["error"]["code"]) == (400, "InvalidApiVersionParameter")
    missing = http.get(base)
    assert (missing.status_code, missing.json()["error"]["code"]) == (400, "MissingApiVersionParameter")
    no_location = http.put(base + "x", params={"api-version": "2019-10-01"}, json={"tags": {}})
    assert no_location.status_code == 400 and no_location.json()["error"]["target"] == "location"
    assert http.head(base + "x", params={"api-version": "2019-10-01"}).status_code == 404
    odd = http.get(
        f"/subscriptions/{names.subscription}/resources",
        params={"api-version": "2021-04-01", "$filter": "location eq 'x'"},
    )
    assert (odd.status_code, odd.json()["error"]["target"]) == (400, "$filter")
    # the Scheduler's own paths keep their three versions
    scheduler_path = base + "/providers/Microsoft.Scheduler/jobCollections"
    assert http.get(scheduler_path, params={"api-version": "2021-04-01"}).status_code == 400


def test_providers_register_and_are_remembered(arm: ResourceManagementClient) -> None:
    provider = arm.providers.get("microsoft.scheduler")
    assert provider.namespace == "Microsoft.Scheduler"
    assert provider.registration_state == "NotRegistered"
    types = {t.resource_type: t for t in provider.resource_types}
    assert types["jobCollections/jobs"].api_versions == ["2016-03-01", "2016-01-01", "2014-08-01-preview"]
    assert "West US" in types["jobCollections"].locations
    assert arm.providers.register("Microsoft.Scheduler").registration_state == "Registered"
    assert arm.providers.get("Microsoft.Scheduler").registration_state == "Registered"
    assert "Microsoft.Scheduler" in [p.namespace for p in arm.providers.list()]
    assert arm.providers.unregister("Microsoft.Scheduler").registration_state == "Unregistered"
    with pytest.raises(ResourceNotFoundError):
        arm.providers.get("Microsoft.Nothing")


def test_strict_resource_groups(emulators: EmulatorPool, tmp_path: Any, names: Names) -> None:
    server = emulators.start(tmp_path, "--strict-resource-groups", "--no-dispatcher", in_memory=True)
    with server.client() as http:
        path = names.collection_path
        body = {"location": "westus", "properties": {"sku": {"name": "Standard"}}}
        refused = http.put(path, params={"api-version": "2016-03-01"}, json=body)
        assert (refused.status_code, refused.json()["error"]["code"]) == (404, "ResourceGroupNotFound")
        group = f"/subscriptions/{names.subscription}/resourceGroups/{names.resource_group}"
        assert http.put(group, params={"api-version": "2021-04-01"}, json={"location": "westus"}).status_code == 201
        assert http.put(path, params={"api-version": "2016-03-01"}, json=body).status_code == 201
