"""Whole templates (pure): parameters and their rules, variables (copy too), resources expanded over copy loops
and conditions, children flattened, dependsOn order, outputs."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from scheduler_emulator.templates.errors import NeedsDeployment, TemplateError
from scheduler_emulator.templates.evaluation import Environment
from scheduler_emulator.templates.template import TemplateDeployment

ENV = Environment(
    subscription_id="s1",
    tenant_id="t1",
    resource_group={"id": "/subscriptions/s1/resourceGroups/rg", "name": "rg", "location": "westus"},
    deployment={"name": "d"},
    now=datetime(2024, 1, 1, tzinfo=UTC),
)
JC = "Microsoft.Scheduler/jobCollections"


class Deferring:
    def reference(self, resource_id: str, api_version: str | None, full: bool) -> Any:
        raise NeedsDeployment(resource_id)

    def list_action(self, action: str, resource_id: str, api_version: str | None) -> Any:
        raise NeedsDeployment(resource_id)


def plan(template: dict[str, Any], **parameters: Any) -> TemplateDeployment:
    supplied = {name: {"value": value} for name, value in parameters.items()}
    return TemplateDeployment({"resources": [], **template}, supplied, ENV, Deferring())


def test_parameters_defaults_rules_and_secrets() -> None:
    template = {
        "parameters": {
            "size": {"type": "int", "defaultValue": 3, "minValue": 1, "maxValue": 5},
            "name": {"type": "string", "defaultValue": "[concat('jc-', string(parameters('size')))]"},
            "tier": {"type": "string", "defaultValue": "Standard", "allowedValues": ["Standard", "P10Premium"]},
            "password": {"type": "securestring"},
            "flag": {"type": "bool", "defaultValue": False},
        }
    }
    deployment = plan(template, password="s3cret", size="4", flag="true")
    shown = deployment.display_parameters()
    assert shown["size"] == {"type": "Int", "value": 4}  # numbers sent as strings are read as the type says
    assert shown["name"] == {"type": "String", "value": "jc-4"}
    assert shown["flag"]["value"] is True
    assert shown["password"] == {"type": "SecureString"}  # never echoed
    for bad, words in (
        ({"size": 9, "password": "x"}, "maxValue 5"),
        ({"tier": "Free", "password": "x"}, "allowed values"),
        ({}, "'password' is not provided"),
        ({"password": "x", "other": 1}, "'other' in the parameters file are not valid"),
        ({"password": 5}, "expected a String"),
    ):
        with pytest.raises(TemplateError, match=words) as refused:
            plan(template, **bad)
        assert refused.value.code == "InvalidTemplateParameter"
    with pytest.raises(TemplateError) as secret_refused:
        plan({"parameters": {"p": {"type": "securestring", "allowedValues": ["a"]}}}, p="hunter2")
    assert "hunter2" not in secret_refused.value.message


def test_variables_with_copy_and_cycles() -> None:
    deployment = plan(
        {
            "variables": {
                "prefix": "jc",
                "copy": [{"name": "names", "count": 3, "input": "[concat(variables('prefix'), copyIndex('names'))]"}],
                "disks": {"copy": [{"name": "list", "count": 2, "input": {"lun": "[copyIndex('list')]"}}]},
            }
        }
    )
    assert deployment.variable("names") == ["jc0", "jc1", "jc2"]
    assert deployment.variable("disks") == {"list": [{"lun": 0}, {"lun": 1}]}
    with pytest.raises(TemplateError, match="refers to itself"):
        plan({"variables": {"a": "[variables('b')]", "b": "[variables('a')]"}})


def test_resources_copy_condition_children_and_order() -> None:
    template = {
        "resources": [
            {  # declared first, depends on the loop: deployed last
                "type": f"{JC}/jobs",
                "name": "jc0/last",
                "dependsOn": ["jobs"],
                "properties": {"text": "[[not an expression]"},
            },
            {
                "type": f"{JC}/jobs",
                "name": "[concat('jc0/job', copyIndex())]",
                "copy": {"name": "jobs", "count": 2},
                "dependsOn": [f"[resourceId('{JC}', 'jc0')]"],
            },
            {"type": JC, "name": "skipped", "condition": "[equals(1, 2)]"},
            {"type": JC, "name": "jc0", "resources": [{"type": "jobs", "name": "child"}]},
        ]
    }
    deployment = plan(template)
    order = [r.name for r in deployment.resources]
    assert order.index("jc0") < order.index("jc0/job0") < order.index("jc0/last")
    assert order.index("jc0/job1") < order.index("jc0/last")
    assert "skipped" not in order
    child = next(r for r in deployment.resources if r.name == "jc0/child")
    assert child.type == f"{JC}/jobs" and order.index("jc0") < order.index("jc0/child")
    last = next(r for r in deployment.resources if r.name == "jc0/last")
    assert deployment.body_of(last) == {"properties": {"text": "[not an expression]"}}


@pytest.mark.parametrize(
    ("resources", "words"),
    [
        ([{"type": JC, "name": "a", "dependsOn": ["b"]}, {"type": JC, "name": "b", "dependsOn": ["a"]}], "circular"),
        ([{"type": JC, "name": "a", "dependsOn": ["missing"]}], "'missing' is not defined"),
        ([{"type": f"{JC}/jobs", "name": "only-one-segment"}], "must have 2 segment"),
        ([{"type": JC, "name": "a"}, {"type": JC, "name": "A"}], "more than once"),
        ([{"type": JC, "name": "[reference(resourceId('Microsoft.Web/sites', 'x')).y]"}], None),
    ],
)
def test_resource_errors(resources: list[dict[str, Any]], words: str | None) -> None:
    if words is None:  # reference() in a name cannot be answered before deploying
        with pytest.raises(NeedsDeployment):
            plan({"resources": resources})
        return
    with pytest.raises(TemplateError, match=words):
        plan({"resources": resources})


def test_outputs_copy_and_secure() -> None:
    deployment = plan(
        {
            "parameters": {"p": {"type": "securestring", "defaultValue": "x"}},
            "outputs": {
                "list": {"type": "array", "copy": {"count": 2, "input": "[concat('n', copyIndex())]"}},
                "secret": {"type": "securestring", "value": "[parameters('p')]"},
                "off": {"type": "string", "condition": "[false()]", "value": "no"},
            },
        }
    )
    assert deployment.outputs() == {
        "list": {"type": "Array", "value": ["n0", "n1"]},
        "secret": {"type": "SecureString"},
    }


def test_expansion_is_bounded() -> None:
    nested = {
        "copy": [
            {
                "name": "a",
                "count": 800,
                "input": {
                    "copy": [
                        {
                            "name": "b",
                            "count": 800,
                            "input": {"copy": [{"name": "c", "count": 800, "input": "[copyIndex('c')]"}]},
                        }
                    ]
                },
            }
        ]
    }
    with pytest.raises(TemplateError, match="more than 200000 values"):
        plan({"variables": {"big": nested}})
    children = [
        {
            "type": JC,
            "name": "[concat('p', copyIndex())]",
            "copy": {"name": "p", "count": 800},
            "resources": [
                {"type": "jobs", "name": "[concat('c', copyIndex('k'))]", "copy": {"name": "k", "count": 800}}
            ],
        }
    ]
    with pytest.raises(TemplateError, match="more than 800 resources"):
        plan({"resources": children})


def test_an_extension_resource_is_deployed_on_what_its_scope_names() -> None:
    """``scope`` as a resource id or as ``Namespace/type/name`` (what Bicep writes) gives the extension resource's
    id under that resource, and the resource deploys after it; outside the group, or malformed, is refused."""
    assignment = "Microsoft.Authorization/roleAssignments"
    collection = {"type": JC, "name": "jc", "apiVersion": "2016-03-01"}
    for scope in ("Microsoft.Scheduler/jobCollections/jc", "[resourceId('Microsoft.Scheduler/jobCollections', 'jc')]"):
        granted = {"type": assignment, "name": "g1", "scope": scope, "properties": {}}
        resources = plan({"resources": [granted, collection]}).resources
        assert [r.type for r in resources] == [JC, assignment]  # after the collection it extends
        collection_id = "/subscriptions/s1/resourceGroups/rg/providers/Microsoft.Scheduler/jobCollections/jc"
        assert resources[1].scope_id == collection_id
        assert resources[1].id == f"{collection_id}/providers/{assignment}/g1"
        assert "scope" not in plan({"resources": [granted, collection]}).body_of(resources[1])
    at_group = plan({"resources": [{"type": assignment, "name": "g2"}]}).resources[0]
    assert at_group.id == f"/subscriptions/s1/resourceGroups/rg/providers/{assignment}/g2"
    assert at_group.scope_id == "/subscriptions/s1/resourceGroups/rg"
    for bad, words in (
        ("/subscriptions/s1/resourceGroups/other", "outside the deployment's resource group"),
        ("/subscriptions/s2/resourceGroups/rg/providers/Microsoft.Scheduler/jobCollections/jc", "outside"),
        ("jobCollections/jc", "is not a resource id"),
        ("", "must be a resource id"),
    ):
        with pytest.raises(TemplateError, match=words) as refused:
            plan({"resources": [{"type": assignment, "name": "g3", "scope": bad}]})
        assert refused.value.target == "template.resources[0].scope"
