"""Template deployments at resource-group scope (docs/reference/front-door.md#deployments), driven with
azure-mgmt-resource 24.0.0 against a started server on each store (``--arm-foreign-resources inert``, the web app of the
quickstart mapped to a local target with ``--arm-site-host``), read back through azure-mgmt-scheduler; jobs fire at the
local target."""

from __future__ import annotations

import copy
import gc
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from azure.core.credentials import AccessToken
from azure.core.exceptions import HttpResponseError, ResourceNotFoundError
from azure.mgmt.resource import ResourceManagementClient
from azure.mgmt.scheduler import SchedulerManagementClient
from support.databases import fresh_database
from support.names import Names
from support.sdk import resource_sdk, scheduler_sdk
from support.server import EmulatorPool, ServerProcess
from support.target_server import TargetServer
from support.waiting import wait_until

DATA = Path(__file__).parent.parent / "templates" / "data"
QUICKSTART = json.loads((DATA / "scheduler-webapp.azuredeploy.json").read_text())
SOON = (datetime.now(UTC) + timedelta(days=20)).strftime("%Y-%m-%dT%H:%M:%SZ")


class FakeCredential:
    def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:
        return AccessToken("fake", 4_102_444_800)


@pytest.fixture(scope="module")
def target() -> Iterator[TargetServer]:
    server = TargetServer().start()
    yield server
    server.stop()


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def emulator(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, target: TargetServer
) -> Iterator[ServerProcess]:
    host = target.base_url.split("://", 1)[1]
    with fresh_database(request.param, tmp_path_factory) as url, EmulatorPool() as pool:
        yield pool.start(
            tmp_path_factory.mktemp("deployments"),
            "--arm-foreign-resources",
            "inert",
            "--arm-site-host",
            f"quickweb={host}",
            https=True,
            database_url=url,
            log_level="warning",
            poll_interval=0.2,
        )


@pytest.fixture
def names() -> Names:
    return Names()


@pytest.fixture
def arm(emulator: ServerProcess, names: Names) -> Iterator[ResourceManagementClient]:
    with resource_sdk(emulator, FakeCredential(), names.subscription) as client:
        client.resource_groups.create_or_update(names.resource_group, {"location": "westus"})
        yield client
    gc.collect()


@pytest.fixture
def scheduler(emulator: ServerProcess, names: Names) -> Iterator[SchedulerManagementClient]:
    with scheduler_sdk(emulator, FakeCredential(), names.subscription) as client:
        yield client
    gc.collect()


def deploy(
    arm: ResourceManagementClient,
    names: Names,
    template: dict[str, Any],
    parameters: dict[str, Any] | None = None,
    *,
    name: str = "dep1",
    mode: str = "Incremental",
) -> Any:
    body = {
        "properties": {
            "mode": mode,
            "template": template,
            "parameters": {k: {"value": v} for k, v in (parameters or {}).items()},
        }
    }
    return arm.deployments.begin_create_or_update(names.resource_group, name, body).result()


def collection(name: str, **extra: Any) -> dict[str, Any]:
    return {
        "type": "Microsoft.Scheduler/jobCollections",
        "apiVersion": "2016-03-01",
        "name": name,
        "location": "[resourceGroup().location]",
        "properties": {"sku": {"name": "Standard"}},
        **extra,
    }


def http_job(full_name: str, uri: str, **extra: Any) -> dict[str, Any]:
    return {
        "type": "Microsoft.Scheduler/jobCollections/jobs",
        "apiVersion": "2016-03-01",
        "name": full_name,
        "dependsOn": []
        if full_name.startswith("[")
        else [f"[resourceId('Microsoft.Scheduler/jobCollections', '{full_name.split('/')[0]}')]"],
        "properties": {
            "startTime": SOON,
            "action": {"type": "Http", "request": {"uri": uri, "method": "GET"}},
            "recurrence": {"frequency": "Day", "interval": 1},
            **extra,
        },
    }


def template(*resources: Any, **sections: Any) -> dict[str, Any]:
    return {
        "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
        "contentVersion": "1.0.0.0",
        "resources": list(resources),
        **sections,
    }


def test_the_public_quickstart_deploys_unchanged_and_its_job_fires(
    arm: ResourceManagementClient, scheduler: SchedulerManagementClient, names: Names, target: TargetServer
) -> None:
    result = deploy(
        arm,
        names,
        QUICKSTART,
        {"appSvcPlanName": "plan1", "webAppName": "quickweb", "jobCollectionName": "jc1", "jobName": "ping"},
    )
    assert result.properties.provisioning_state == "Succeeded"
    job = scheduler.jobs.get(names.resource_group, "jc1", "ping")
    assert job.properties.action.request.uri == f"{target.base_url}"  # reference(site).hostNames[0]
    # enumerations answered as the service wrote them (docs/reference/arm-api.md#enumerations)
    assert job.properties.recurrence.schedule.week_days == ["monday", "tuesday", "wednesday", "thursday", "friday"]
    resources = list(arm.resources.list_by_resource_group(names.resource_group))
    listed = {(r.type, r.name) for r in resources}
    listed_ids = {r.type: r.id for r in resources}
    assert ("Microsoft.Web/sites", "quickweb") in listed and ("Microsoft.Web/serverfarms", "plan1") in listed
    operations = list(arm.deployment_operations.list(names.resource_group, "dep1"))
    assert [op.properties.target_resource.resource_name for op in operations] == [
        "plan1",
        "quickweb",
        "jc1",
        "jc1/ping",
    ]
    site = arm.resources.get_by_id(listed_ids["Microsoft.Web/sites"], "2022-09-01")  # as az resource show reads it
    assert (site.name, site.properties["serverFarmId"]) == ("quickweb", "plan1")
    assert arm.providers.get("Microsoft.Web").resource_types[0].api_versions  # az picks an api-version there
    scheduler.jobs.run(names.resource_group, "jc1", "ping")
    received = target.wait_for(1, timeout=20, path="/")
    assert received[0].method == "GET"


FUNCTIONS_TEMPLATE = template(
    collection("[variables('jcName')]"),
    {
        **http_job(
            "[concat(variables('jcName'), '/job', copyIndex())]",
            "[format('{0}/hit/{1}', parameters('baseUri'), copyIndex(1))]",
        ),
        "copy": {"name": "jobLoop", "count": "[parameters('count')]"},
        "dependsOn": ["[variables('jcName')]"],
    },
    {
        **http_job("[concat(variables('jcName'), '/never')]", "http://127.0.0.1:9/never"),
        "condition": "[equals(parameters('flag'), 'on')]",
        "dependsOn": ["jobLoop"],
    },
    parameters={
        "count": {"type": "int", "defaultValue": 2, "minValue": 1, "maxValue": 5},
        "baseUri": {"type": "string"},
        "flag": {"type": "string", "defaultValue": "off", "allowedValues": ["on", "off"]},
        "secret": {"type": "securestring", "defaultValue": "hunter2"},
    },
    variables={"jcName": "[concat('jc-', uniqueString(resourceGroup().id))]"},
    outputs={
        "collection": {"type": "string", "value": "[variables('jcName')]"},
        "state": {
            "type": "string",
            "value": "[reference(resourceId('Microsoft.Scheduler/jobCollections/jobs', "
            "variables('jcName'), 'job0')).state]",
        },
        "secretOut": {"type": "securestring", "value": "[parameters('secret')]"},
    },
)


def test_functions_copy_condition_outputs_and_redeploy(
    arm: ResourceManagementClient, scheduler: SchedulerManagementClient, names: Names
) -> None:
    result = deploy(arm, names, FUNCTIONS_TEMPLATE, {"baseUri": "http://127.0.0.1:9", "count": 3})
    jc = result.properties.outputs["collection"]["value"]
    assert jc.startswith("jc-") and len(jc) == 16
    assert result.properties.outputs["state"]["value"] == "Enabled"
    assert "value" not in result.properties.outputs["secretOut"]  # secure outputs never echoed
    assert "value" not in result.properties.parameters["secret"]
    assert result.properties.parameters["count"]["value"] == 3
    jobs = sorted(j.name for j in scheduler.jobs.list(names.resource_group, jc))
    assert jobs == [f"{jc}/job0", f"{jc}/job1", f"{jc}/job2"]
    assert scheduler.jobs.get(names.resource_group, jc, "job2").properties.action.request.uri.endswith("/hit/3")
    # Incremental redeploy with fewer copies keeps the third job; Complete removes it
    deploy(arm, names, FUNCTIONS_TEMPLATE, {"baseUri": "http://127.0.0.1:9", "count": 2}, name="dep2")
    assert len(list(scheduler.jobs.list(names.resource_group, jc))) == 3
    deploy(arm, names, FUNCTIONS_TEMPLATE, {"baseUri": "http://127.0.0.1:9", "count": 2}, name="dep3", mode="Complete")
    assert sorted(j.name for j in scheduler.jobs.list(names.resource_group, jc)) == [f"{jc}/job0", f"{jc}/job1"]
    assert [d.name for d in arm.deployments.list_by_resource_group(names.resource_group)] == ["dep1", "dep2", "dep3"]
    exported = arm.deployments.export_template(names.resource_group, "dep1")
    assert exported.template == FUNCTIONS_TEMPLATE


def test_a_bad_job_ends_the_deployment_failed_with_the_schedulers_error(
    arm: ResourceManagementClient, scheduler: SchedulerManagementClient, names: Names
) -> None:
    bad = http_job("jcbad/broken", "http://127.0.0.1:9/x")
    bad["properties"]["recurrence"] = {"frequency": "Day", "interval": -5}
    with pytest.raises(HttpResponseError) as failed:
        deploy(arm, names, template(collection("jcbad"), bad))
    assert "DeploymentFailed" in str(failed.value)
    got = arm.deployments.get(names.resource_group, "dep1")
    assert got.properties.provisioning_state == "Failed"
    assert got.properties.error.code == "DeploymentFailed"
    assert "properties.recurrence.interval" in got.properties.error.details[0].message
    operations = {
        op.properties.target_resource.resource_name: op
        for op in arm.deployment_operations.list(names.resource_group, "dep1")
    }
    assert operations["jcbad"].properties.provisioning_state == "Succeeded"  # kept: no rollback
    assert operations["jcbad/broken"].properties.provisioning_state == "Failed"
    assert operations["jcbad/broken"].properties.status_code == "BadRequest"
    assert scheduler.job_collections.get(names.resource_group, "jcbad").name == "jcbad"
    with pytest.raises(HttpResponseError) as not_active:
        arm.deployments.cancel(names.resource_group, "dep1")
    assert not_active.value.status_code == 409


@pytest.mark.parametrize(
    ("change", "code", "words"),
    [
        (lambda t: t["resources"][0].update(name="[nope('x')]"), "InvalidTemplate", "'nope' is not valid"),
        (
            lambda t: t["resources"].append(
                {"type": "Microsoft.Batch/batchAccounts", "name": "b", "apiVersion": "2020-01-01"}
            ),
            None,
            None,
        ),
        (lambda t: t.update(parameters={"p": {"type": "string"}}), "InvalidTemplateParameter", "'p' is not provided"),
        (lambda t: t["resources"][0].update(name="[concat('a']"), "InvalidTemplate", "not valid"),
        (lambda t: t["resources"][0].update(resourceGroup="other"), "InvalidTemplate", "another scope"),
        (
            lambda t: t["resources"].append(
                {"type": "Microsoft.Resources/deployments", "name": "nested", "apiVersion": "2020-01-01"}
            ),
            "InvalidTemplate",
            "nested deployments",
        ),
    ],
)
def test_preflight_errors_refuse_and_create_nothing(
    arm: ResourceManagementClient,
    scheduler: SchedulerManagementClient,
    names: Names,
    change: Any,
    code: str | None,
    words: str | None,
) -> None:
    bad = template(collection("jcpre"))
    change(bad)
    if code is None:  # inert mode keeps other providers' resources: this one deploys
        assert deploy(arm, names, bad).properties.provisioning_state == "Succeeded"
        return
    with pytest.raises(HttpResponseError) as refused:
        deploy(arm, names, bad)
    assert refused.value.status_code == 400
    assert refused.value.error.code == code and words in refused.value.error.message
    assert list(scheduler.job_collections.list_by_resource_group(names.resource_group)) == []
    assert list(arm.deployments.list_by_resource_group(names.resource_group)) == []
    validated = arm.deployments.begin_validate  # the same refusal from validate
    with pytest.raises(HttpResponseError):
        validated(names.resource_group, "v", {"properties": {"mode": "Incremental", "template": bad}}).result()


def test_what_az_sends_jsonc_with_an_unquoted_template_key(emulator: ServerProcess, names: Names, arm: Any) -> None:
    raw = (
        '{"properties": {template: {\n  // the file as written\n  "$schema": "x", "contentVersion": "1.0.0.0",\n'
        '  /* comments */ "resources": [{"type": "Microsoft.Scheduler/jobCollections", "apiVersion": "2016-03-01",\n'
        '  "name": "jcaz", "location": "westus", "properties": {"sku": {"name": "Free"}}}]},\n'
        ' "parameters": {}, "mode": "Incremental"}}'
    )
    group = f"/subscriptions/{names.subscription}/resourcegroups/{names.resource_group}"
    path = f"{group}/providers/Microsoft.Resources/deployments/az1"
    with httpx.Client(base_url=emulator.url, verify=emulator.verify) as http:
        answer = http.put(
            path, params={"api-version": "2024-03-01"}, content=raw, headers={"content-type": "application/json"}
        )
        assert answer.status_code == 201, answer.text
        assert answer.headers["Retry-After"] == "1" and "operationStatuses" in answer.headers["Azure-AsyncOperation"]
        # the Scheduler's own paths stay strict JSON
        strict = http.put(
            f"/subscriptions/{names.subscription}/resourceGroups/{names.resource_group}/providers/"
            "Microsoft.Scheduler/jobCollections/x",
            params={"api-version": "2016-03-01"},
            content='{location: "westus"}',
            headers={"content-type": "application/json"},
        )
        assert strict.status_code == 400
    # the SDK sees the same deployment
    assert arm.deployments.get(names.resource_group, "az1").properties.provisioning_state in (
        "Accepted",
        "Running",
        "Succeeded",
    )


def test_inert_resources_answer_reference_and_list_keys(
    arm: ResourceManagementClient, scheduler: SchedulerManagementClient, names: Names
) -> None:
    sb = {
        "type": "Microsoft.ServiceBus/namespaces",
        "apiVersion": "2021-11-01",
        "name": "sbns01",
        "location": "westus",
        "sku": {"name": "Standard"},
        "properties": {"zoneRedundant": False},
    }
    job = http_job("jcsb/q", "http://127.0.0.1:9/x")
    job["properties"]["action"] = {
        "type": "ServiceBusQueue",
        "serviceBusQueueMessage": {
            "namespace": "sbns01",
            "queueName": "q1",
            "message": "hi",
            "transportType": "AMQP",
            "authentication": {
                "type": "SharedAccessKey",
                "sasKeyName": "RootManageSharedAccessKey",
                "sasKey": "[listKeys(resourceId('Microsoft.ServiceBus/namespaces/authorizationRules', "
                "'sbns01', 'RootManageSharedAccessKey'), '2021-11-01').primaryKey]",
            },
        },
    }
    job["dependsOn"].append("sbns01")
    result = deploy(
        arm,
        names,
        template(
            sb,
            collection("jcsb"),
            job,
            outputs={
                "endpoint": {"type": "string", "value": "[reference('sbns01').serviceBusEndpoint]"},
                "redundant": {"type": "bool", "value": "[reference('sbns01').zoneRedundant]"},
            },
        ),
    )
    assert result.properties.outputs["endpoint"]["value"] == "https://sbns01.servicebus.windows.net:443/"
    assert result.properties.outputs["redundant"]["value"] is False
    got = scheduler.jobs.get(names.resource_group, "jcsb", "q")
    assert got.properties.action.service_bus_queue_message.authentication.sas_key is None  # never echoed
    arm.resource_groups.begin_delete(names.resource_group).result()
    assert list(arm.resources.list(filter=f"resourceGroup eq '{names.resource_group}'")) == []
    assert list(arm.deployments.list_by_resource_group(names.resource_group)) == []


def test_deployments_without_inert_mode_name_each_foreign_type(server: ServerProcess, names: Names) -> None:
    with resource_sdk(server, FakeCredential(), names.subscription) as client:
        client.resource_groups.create_or_update(names.resource_group, {"location": "westus"})
        body = {
            "properties": {
                "mode": "Incremental",
                "template": copy.deepcopy(QUICKSTART),
                "parameters": {
                    k: {"value": "x1"} for k in ("appSvcPlanName", "webAppName", "jobCollectionName", "jobName")
                },
            }
        }
        with pytest.raises(HttpResponseError) as refused:
            client.deployments.begin_create_or_update(names.resource_group, "d", body).result()
        assert refused.value.status_code == 400
        assert "Microsoft.Web/serverfarms" in refused.value.error.message
        assert "Microsoft.Web/sites" in refused.value.error.message
        with pytest.raises(HttpResponseError) as missing_group:
            client.deployments.begin_create_or_update("no-such-group", "d", body).result()
        assert missing_group.value.error.code == "ResourceGroupNotFound"
    gc.collect()


def test_member_names_in_any_case_and_numbers_as_text(
    arm: ResourceManagementClient, scheduler: SchedulerManagementClient, names: Names, emulator: ServerProcess
) -> None:
    job = http_job("jccase/docs2015", "http://127.0.0.1:9/x")
    job["properties"] = {  # written as a 2015 docs template wrote it (Json.NET matched members in any case)
        "StartTime": SOON,
        "Action": {"Type": "Http", "Request": {"Uri": "http://127.0.0.1:9/x", "Method": "GET"}},
        "Recurrence": {"Frequency": "Minute", "Interval": "5"},
    }
    deploy(arm, names, template(collection("jccase"), job))
    got = scheduler.jobs.get(names.resource_group, "jccase", "docs2015")
    assert (got.properties.recurrence.frequency, got.properties.recurrence.interval) == ("minute", 5)
    assert got.properties.action.request.uri == "http://127.0.0.1:9/x"
    path = f"/subscriptions/{names.subscription}/resourceGroups/{names.resource_group}/providers/Microsoft.Scheduler"
    body = {
        "Properties": {
            "Action": {
                "Type": "Http",
                "Request": {
                    "Uri": "http://127.0.0.1:9/y",
                    "Method": "GET",
                    "Authentication": {"Type": "Basic", "Username": "u", "Password": "hunter2"},
                },
            },
            "Recurrence": {"Frequency": "Day", "Interval": "2"},
            "StartTime": SOON,
        }
    }
    with httpx.Client(base_url=emulator.url, verify=emulator.verify) as http:
        answer = http.put(f"{path}/jobCollections/jccase/jobs/raw", params={"api-version": "2016-03-01"}, json=body)
    assert answer.status_code == 201, answer.text
    assert "hunter2" not in answer.text and "Password" not in answer.text  # the secret is found in any case
    assert answer.json()["properties"]["recurrence"]["interval"] == 2  # read and answered as the number


def test_numbers_a_template_writes_as_text_are_answered_as_numbers(
    arm: ResourceManagementClient, names: Names, emulator: ServerProcess
) -> None:
    """As tfitzmac/AppServiceTemplates WebAppWithWebJobs (2015) wrote them: "maxJobCount": "10", "interval":
    "1"; Azure answered 10 and 1. Every integer member of a collection and a job, sent as text."""
    jc = collection("jctext")
    jc["properties"] = {
        "sku": {"name": "Standard"},
        "quota": {
            "maxJobCount": "10",
            "maxJobOccurrence": "100",
            "maxRecurrence": {"frequency": "Minute", "interval": "1"},
        },
    }
    retry = {"retryType": "Fixed", "retryCount": "3", "retryInterval": "PT1M"}
    hourly = http_job("jctext/hourly", "http://127.0.0.1:9/x")
    hourly["properties"]["action"]["retryPolicy"] = retry
    hourly["properties"]["recurrence"] = {
        "frequency": "Hour",
        "interval": "1",
        "count": "5",
        "schedule": {"minutes": ["0", "30"], "hours": "6"},
    }
    monthly = http_job("jctext/monthly", "http://127.0.0.1:9/x")
    monthly["properties"]["recurrence"] = {
        "frequency": "Month",
        "interval": "2",
        "schedule": {"monthDays": ["1", "-1"], "monthlyOccurrences": [{"day": "Monday", "occurrence": "2"}]},
    }
    deploy(arm, names, template(jc, hourly, monthly))
    path = f"/subscriptions/{names.subscription}/resourceGroups/{names.resource_group}/providers/Microsoft.Scheduler"
    with httpx.Client(base_url=emulator.url, verify=emulator.verify, params={"api-version": "2016-03-01"}) as http:
        quota = http.get(f"{path}/jobCollections/jctext").json()["properties"]["quota"]
        first = http.get(f"{path}/jobCollections/jctext/jobs/hourly").json()["properties"]
        second = http.get(f"{path}/jobCollections/jctext/jobs/monthly").json()["properties"]
    assert quota == {
        "maxJobCount": 10,
        "maxJobOccurrence": 100,
        "maxRecurrence": {"frequency": "minute", "interval": 1},
    }
    assert first["action"]["retryPolicy"]["retryCount"] == 3
    assert first["recurrence"] == {
        "frequency": "hour",
        "interval": 1,
        "count": 5,
        "schedule": {"minutes": [0, 30], "hours": 6},
    }
    schedule = second["recurrence"]["schedule"]
    assert second["recurrence"]["interval"] == 2
    assert schedule["monthDays"] == [1, -1]
    assert schedule["monthlyOccurrences"] == [{"day": "monday", "occurrence": 2, "Occurrence": 2}]


def test_the_split_deployments_client(emulator: ServerProcess, names: Names, arm: ResourceManagementClient) -> None:
    """azure-mgmt-resource-deployments 2.0.0 (api-version 2026-06-01): the same surface for the newer client."""
    from azure.mgmt.resource.deployments import DeploymentsMgmtClient

    with DeploymentsMgmtClient(
        FakeCredential(),
        names.subscription,
        base_url=emulator.url,
        connection_verify=str(emulator.cert_path),
        retry_total=0,
    ) as client:
        body = {"properties": {"mode": "Incremental", "template": template(collection("jcsplit"))}}
        result = client.deployments.begin_create_or_update(names.resource_group, "split", body).result()
        assert result.properties.provisioning_state == "Succeeded"
        assert client.deployments.check_existence(names.resource_group, "split") is True
        operations = list(client.deployment_operations.list(names.resource_group, "split"))
        assert [op.properties.target_resource.resource_name for op in operations] == ["jcsplit"]
        client.deployments.begin_delete(names.resource_group, "split").result()
        assert client.deployments.check_existence(names.resource_group, "split") is False
    gc.collect()


def test_cancel_stops_a_running_deployment_between_resources(
    arm: ResourceManagementClient, scheduler: SchedulerManagementClient, names: Names
) -> None:
    # 799 jobs are written one transaction each (seconds); the cancel arrives within milliseconds of the PUT.
    premium = collection("jcbig")
    premium["properties"] = {"sku": {"name": "P20Premium"}}
    loop = {
        **http_job("[concat('jcbig/j', copyIndex())]", "http://127.0.0.1:9/x"),
        "copy": {"name": "many", "count": 799},
        "dependsOn": ["jcbig"],
    }
    body = {"properties": {"mode": "Incremental", "template": template(premium, loop)}}
    poller = arm.deployments.begin_create_or_update(names.resource_group, "big", body)
    arm.deployments.cancel(names.resource_group, "big")
    with pytest.raises(HttpResponseError):
        poller.result()
    got = arm.deployments.get(names.resource_group, "big")
    assert got.properties.provisioning_state == "Canceled"
    deployed = len(list(arm.deployment_operations.list(names.resource_group, "big")))
    assert deployed < 800
    if deployed == 0:  # on a busy machine the cancel can land before the first resource: nothing was made
        with pytest.raises(ResourceNotFoundError):
            scheduler.job_collections.get(names.resource_group, "jcbig")
    else:  # the collection, then deployed - 1 of the jobs
        assert len(list(scheduler.jobs.list(names.resource_group, "jcbig"))) == deployed - 1


def test_template_and_parameters_links_are_fetched_through_the_outbound_policy(
    arm: ResourceManagementClient, scheduler: SchedulerManagementClient, names: Names, target: TargetServer
) -> None:
    linked = template(collection("[parameters('jc')]"), parameters={"jc": {"type": "string"}})
    target.respond("/templates/azuredeploy.json", 200, json.dumps(linked).encode())
    target.respond(
        "/templates/azuredeploy.parameters.json",
        200,
        b'{"$schema": "x", "contentVersion": "1.0.0.0", "parameters": {"jc": {"value": "jclinked"}}}',
    )
    body = {
        "properties": {
            "mode": "Incremental",
            "templateLink": {"uri": target.url("/templates/azuredeploy.json")},
            "parametersLink": {"uri": target.url("/templates/azuredeploy.parameters.json")},
        }
    }
    result = arm.deployments.begin_create_or_update(names.resource_group, "linked", body).result()
    assert result.properties.provisioning_state == "Succeeded"
    assert scheduler.job_collections.get(names.resource_group, "jclinked").name == "jclinked"
    body["properties"]["templateLink"] = {"uri": "http://169.254.169.254/metadata/template.json"}
    with pytest.raises(HttpResponseError) as blocked:
        arm.deployments.begin_create_or_update(names.resource_group, "linked2", body).result()
    assert blocked.value.error.code == "InvalidContentLink" and "outbound policy" in blocked.value.error.message


def test_on_error_deployment_redeploys_the_last_successful_one(
    arm: ResourceManagementClient, scheduler: SchedulerManagementClient, names: Names
) -> None:
    good = template(collection("[parameters('jc')]"), parameters={"jc": {"type": "string"}})
    deploy(arm, names, good, {"jc": "jcgood"}, name="good")
    scheduler.job_collections.begin_delete(names.resource_group, "jcgood").result()
    bad = http_job("jcgood2/broken", "http://127.0.0.1:9/x")
    bad["properties"]["recurrence"] = {"frequency": "Day", "interval": -1}
    body = {
        "properties": {
            "mode": "Incremental",
            "template": template(collection("jcgood2"), bad),
            "onErrorDeployment": {"type": "LastSuccessful"},
        }
    }
    with pytest.raises(HttpResponseError):
        arm.deployments.begin_create_or_update(names.resource_group, "bad", body).result()

    def redeployed() -> Any:
        got = arm.deployments.get(names.resource_group, "bad").properties.on_error_deployment
        return got if got.provisioning_state in ("Succeeded", "Failed") else None

    outcome = wait_until(redeployed, timeout=30, what="the on-error redeployment to end")
    assert (outcome.type, outcome.deployment_name, outcome.provisioning_state) == (
        "LastSuccessful",
        "good",
        "Succeeded",
    )
    assert scheduler.job_collections.get(names.resource_group, "jcgood").name == "jcgood"  # deployed again
    with pytest.raises(HttpResponseError) as nothing_to_redeploy:
        body["properties"]["onErrorDeployment"] = {"type": "SpecificDeployment", "deploymentName": "missing"}
        arm.deployments.begin_create_or_update(names.resource_group, "bad2", body).result()
    assert nothing_to_redeploy.value.error.code == "InvalidOnErrorDeployment"
