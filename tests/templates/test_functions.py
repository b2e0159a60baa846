"""The template language's functions, against the examples of ARM's template function reference
(learn.microsoft.com, azure-resource-manager/templates/template-functions-*), and uniqueString()/guid()
against published input→output pairs.

uniqueString pairs, each computed by Azure/Bicep and published with an independent re-implementation:
- "test" → rbgf3xv4ufgzg: cloud-maker-ai/terraform-provider-arm2tf (its unique_string acceptance test) and a Go
  GenerateUniqueString test in another public repository;
- ("hello","world") → a7wkljktk6wne, "abc" → cgtzqvhu4i23s, the all-zero subscription's "my-rg" group id →
  bmg7c6xu4tw46, ("foo","bar","baz") → xzi4ioaxtmth4: a public uniquestring.sh whose self-test states it was
  "verified against Bicep uniqueString() output"."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import pytest

from scheduler_emulator.templates.errors import TemplateError
from scheduler_emulator.templates.evaluation import Environment, Scope, evaluate
from scheduler_emulator.templates.expressions import parse_string
from scheduler_emulator.templates.functions import call_function

ENV = Environment(
    subscription_id="00000000-0000-0000-0000-000000000001",
    tenant_id="00000000-0000-0000-0000-0000000000aa",
    resource_group={
        "id": "/subscriptions/00000000-0000-0000-0000-000000000001/resourceGroups/rg1",
        "name": "rg1",
        "location": "westus",
        "properties": {"provisioningState": "Succeeded"},
    },
    deployment={"name": "dep1", "properties": {"mode": "Incremental"}},
    now=datetime(2024, 3, 5, 17, 53, 18, tzinfo=UTC),
)
PARAMETERS: dict[str, Any] = {
    "testString": "one, two, three",
    "testArray": ["a", "b", "c"],
    "testObject": {"valueA": 10, "valueB": "Example Text"},
    "firstObject": {"one": "a", "two": "b", "three": "c1"},
    "secondObject": {"three": "c2", "four": "d", "five": "e"},
}


class NoLookup:
    def reference(self, resource_id: str, api_version: str | None, full: bool) -> Any:
        return {"id": resource_id, "hostNames": ["site.example"]}

    def list_action(self, action: str, resource_id: str, api_version: str | None) -> Any:
        return {"action": action, "id": resource_id}


def scope(**kwargs: Any) -> Scope:
    return Scope(
        environment=ENV,
        functions=call_function,
        parameter=lambda name: PARAMETERS[name],
        variable=lambda name: {"v": 1}[name],
        lookup=NoLookup(),
        **kwargs,
    )


def run(text: str, **kwargs: Any) -> Any:
    return evaluate(parse_string(text), scope(**kwargs))


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        # string functions (template-functions-string)
        ("[concat('prefix', '-', 'suffix')]", "prefix-suffix"),
        ("[concat(createArray('1-1','1-2'), createArray('2-1'))]", ["1-1", "1-2", "2-1"]),
        (
            "[format('{0}, {1}. Formatted number: {2:N0}', 'Hello', 'User', 8175133)]",
            "Hello, User. Formatted number: 8,175,133",
        ),
        ("[base64('one, two, three')]", "b25lLCB0d28sIHRocmVl"),
        ("[base64ToString('b25lLCB0d28sIHRocmVl')]", "one, two, three"),
        ("[base64ToJson('eyJvbmUiOiAiYSIsICJ0d28iOiAiYiJ9')]", {"one": "a", "two": "b"}),
        ("[dataUri('Hello')]", "data:text/plain;charset=utf8;base64,SGVsbG8="),
        ("[dataUriToString('data:;base64,SGVsbG8sIFdvcmxkIQ==')]", "Hello, World!"),
        ("[endsWith('abcdef', 'EF')]", True),
        ("[startsWith('abcdef', 'ab')]", True),
        ("[startsWith('abcdef', 'e')]", False),
        ("[indexOf('test', 't')]", 0),
        ("[indexOf('abcdef', 'CD')]", 2),
        ("[lastIndexOf('test', 't')]", 3),
        ("[indexOf('abcdef', 'z')]", -1),
        ("[padLeft('123', 10, '0')]", "0000000123"),
        ("[replace('123-123-1234', '-', '')]", "1231231234"),
        ("[skip('one two three', 4)]", "two three"),
        ("[take('one two three', 2)]", "on"),
        ("[split('one,two,three', ',')]", ["one", "two", "three"]),
        ("[split('one;two,three', createArray(',', ';'))]", ["one", "two", "three"]),
        ("[string(parameters('testObject'))]", '{"valueA":10,"valueB":"Example Text"}'),
        ("[string(parameters('testArray'))]", '["a","b","c"]'),
        ("[string(5)]", "5"),
        ("[substring('one two three', 4, 3)]", "two"),
        ("[toLower('One Two Three')]", "one two three"),
        ("[toUpper('One Two Three')]", "ONE TWO THREE"),
        ("[trim('    one two three   ')]", "one two three"),
        (
            "[uri('http://contoso.com/resources/', 'nested/azuredeploy.json')]",
            "http://contoso.com/resources/nested/azuredeploy.json",
        ),
        (
            "[uriComponent('http://contoso.com/resources/nested/azuredeploy.json')]",
            "http%3A%2F%2Fcontoso.com%2Fresources%2Fnested%2Fazuredeploy.json",
        ),
        (
            "[uriComponentToString('http%3A%2F%2Fcontoso.com%2Fresources%2Fnested%2Fazuredeploy.json')]",
            "http://contoso.com/resources/nested/azuredeploy.json",
        ),
        ("[first('One Two Three')]", "O"),
        ("[last(parameters('testArray'))]", "c"),
        ("[join(createArray('Ubuntu', 'Windows', 'MacOS'), ',')]", "Ubuntu,Windows,MacOS"),
        ("[contains('OneTwoThree', 'e')]", True),
        ("[contains('OneTwoThree', 'z')]", False),
        ("[contains(parameters('testObject'), 'valueA')]", True),
        ("[contains(parameters('testArray'), 'd')]", False),
        ("[empty('')]", True),
        ("[empty(createObject())]", True),
        ("[length(parameters('testString'))]", 15),
        ("[length(parameters('testObject'))]", 2),
        # array and object functions
        (
            "[union(parameters('firstObject'), parameters('secondObject'))]",
            {"one": "a", "two": "b", "three": "c2", "four": "d", "five": "e"},
        ),
        ("[union(createArray('one','two','three'), createArray('three','four'))]", ["one", "two", "three", "four"]),
        ("[intersection(createArray('one','two','three'), createArray('two','three'))]", ["two", "three"]),
        (
            "[intersection(createObject('one','a','two','b','three','c'), createObject('one','a','two','z'))]",
            {"one": "a"},
        ),
        ("[range(1, 5)]", [1, 2, 3, 4, 5]),
        ("[array('efgh')]", ["efgh"]),
        (
            "[flatten(createArray(createArray('one','two'), createArray('three'), createArray('four','five')))]",
            ["one", "two", "three", "four", "five"],
        ),
        (
            "[createObject('intProp', 1, 'stringProp', 'abc', 'boolProp', true())]",
            {"intProp": 1, "stringProp": "abc", "boolProp": True},
        ),
        ('[json(\'{"a": "b"}\').a]', "b"),
        ("[json('null')]", None),
        (
            "[items(createObject('item002', 'b', 'item001', 'a'))]",
            [{"key": "item001", "value": "a"}, {"key": "item002", "value": "b"}],
        ),
        ("[max(createArray(0,3,2,5,4))]", 5),
        ("[min(0,3,2,5,4)]", 0),
        # comparison and logical functions
        ("[equals(parameters('testArray'), createArray('a','b','c'))]", True),
        ("[equals('abc', 'ABC')]", False),
        ("[greater(10, 5)]", True),
        ("[greater('A', 'a')]", False),
        ("[lessOrEquals(5, 5)]", True),
        ("[coalesce(null(), null(), 'fallback')]", "fallback"),
        ("[and(true(), false())]", False),
        ("[or(true(), false())]", True),
        ("[not(true())]", False),
        ("[if(equals('a', 'a'), 'yes', 'no')]", "yes"),
        ("[if(true(), 'ok', json('not json'))]", "ok"),  # the other branch is never evaluated
        ("[bool('true')]", True),
        ("[bool(0)]", False),
        # numeric functions
        ("[add(5, 3)]", 8),
        ("[sub(7, 3)]", 4),
        ("[mul(5, 3)]", 15),
        ("[div(8, 3)]", 2),
        ("[div(-8, 3)]", -2),
        ("[mod(7, 3)]", 1),
        ("[mod(-7, 3)]", -1),
        ("[int('4')]", 4),
        ("[float('2.5')]", 2.5),
        # date functions
        ("[dateTimeAdd('2020-04-07 14:53:14Z', 'P3Y')]", "2023-04-07T14:53:14Z"),
        ("[dateTimeAdd('2020-04-07 14:53:14Z', '-PT9H')]", "2020-04-07T05:53:14Z"),
        ("[dateTimeAdd('2020-04-07 14:53:14Z', 'PT1M', 'u')]", "2020-04-07 14:54:14Z"),
        ("[dateTimeToEpoch('2020-01-01T00:00:00Z')]", 1577836800),
        ("[dateTimeFromEpoch(1683040573)]", "2023-05-02T15:16:13Z"),
        # deployment and resource functions
        ("[resourceGroup().location]", "westus"),
        ("[subscription().subscriptionId]", "00000000-0000-0000-0000-000000000001"),
        ("[deployment().name]", "dep1"),
        (
            "[resourceId('Microsoft.Network/virtualNetworks/subnets', 'vnet', 'sub1')]",
            "/subscriptions/00000000-0000-0000-0000-000000000001/resourceGroups/rg1/providers/"
            "Microsoft.Network/virtualNetworks/vnet/subnets/sub1",
        ),
        (
            "[resourceId('otherRG', 'Microsoft.Storage/storageAccounts', 'st')]",
            "/subscriptions/00000000-0000-0000-0000-000000000001/resourceGroups/otherRG/providers/"
            "Microsoft.Storage/storageAccounts/st",
        ),
        (
            "[resourceId('Microsoft.Scheduler/jobCollections/', 'jc')]",  # trailing '/' tolerated (quickstarts)
            "/subscriptions/00000000-0000-0000-0000-000000000001/resourceGroups/rg1/providers/"
            "Microsoft.Scheduler/jobCollections/jc",
        ),
        (
            "[subscriptionResourceId('Microsoft.Authorization/roleDefinitions', 'r1')]",
            "/subscriptions/00000000-0000-0000-0000-000000000001/providers/Microsoft.Authorization/roleDefinitions/r1",
        ),
        (
            "[tenantResourceId('Microsoft.Management/managementGroups', 'mg')]",
            "/providers/Microsoft.Management/managementGroups/mg",
        ),
        ("[reference(resourceId('Microsoft.Web/sites', 'web')).hostNames[0]]", "site.example"),
        ("[listKeys(resourceId('Microsoft.Storage/storageAccounts', 'st'), '2019-06-01').action]", "listKeys"),
        # property and index access, escapes
        ("[parameters('testObject').valueB]", "Example Text"),
        ("[parameters('testObject')['valueA']]", 10),
        ("[parameters('testObject').VALUEA]", 10),  # members match case-insensitively
        ("[createArray(createObject('a', createArray(1, 2)))[0].a[1]]", 2),
        ("[[not an expression]", "[not an expression]"),
        ("[concat('it''s', ' ok')]", "it's ok"),
        ("plain text", "plain text"),
        # uniqueString (published pairs: see the module docstring) and guid
        ("[uniqueString('test')]", "rbgf3xv4ufgzg"),
        ("[uniqueString('hello', 'world')]", "a7wkljktk6wne"),
        ("[uniqueString('abc')]", "cgtzqvhu4i23s"),
        ("[uniqueString('/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/my-rg')]", "bmg7c6xu4tw46"),
        ("[uniqueString('foo', 'bar', 'baz')]", "xzi4ioaxtmth4"),
    ],
)
def test_documented_examples(expression: str, expected: Any) -> None:
    assert run(expression) == expected


def test_guid_is_a_version_5_uuid_in_arms_namespace() -> None:
    value = run("[guid('a', 'b')]")
    parsed = uuid.UUID(value)
    assert parsed.version == 5
    assert value == run("[guid('a', 'b')]") != run("[guid('a-b', '')]")
    assert value == str(uuid.uuid5(uuid.UUID("11fb06fb-712d-4ddd-98c7-e71bbd588830"), "a-b"))


def test_utc_now_only_in_parameter_defaults() -> None:
    assert run("[utcNow()]", in_parameter_default=True) == "20240305T175318Z"
    assert run("[utcNow('u')]", in_parameter_default=True) == "2024-03-05 17:53:18Z"
    with pytest.raises(TemplateError, match="defaultValue"):
        run("[utcNow()]")


def test_copy_index() -> None:
    inner = scope().with_copy("loop", 2, resource_loop=True)
    assert evaluate(parse_string("[copyIndex()]"), inner) == 2
    assert evaluate(parse_string("[copyIndex(1)]"), inner) == 3
    assert evaluate(parse_string("[copyIndex('loop', 10)]"), inner) == 12
    with pytest.raises(TemplateError, match="copy loop"):
        run("[copyIndex()]")


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("[noSuchFunction('a')]", "'noSuchFunction' is not valid"),
        ("[concat('a']", "not valid"),
        ("[parameters('testObject').missing]", "property 'missing' doesn't exist"),
        ("[parameters('testArray')[3]]", "out of bounds"),
        ("[div(1, 0)]", "divide by zero"),
        ("[substring('abc', 2, 5)]", "within the string"),
        ("[toLower(1)]", "expects a string"),
        ("[equals('a')]", "takes 2 argument"),
        ("[json('{')]", "cannot parse"),
        ("[range(1, 100000)]", "count from 0 to 10000"),
        ("[dateTimeAdd('2020-01-01T00:00:00Z', 'P99999999999999D')]", "years 1 to 9999"),
        ("[dateTimeAdd('2020-01-01T00:00:00Z', 'P99999Y')]", "years 1 to 9999"),
    ],
)
def test_errors_name_the_problem(expression: str, message: str) -> None:
    with pytest.raises(TemplateError, match=message):
        run(expression)


def test_format_widths_beyond_dotnets_are_not_honoured() -> None:
    assert run("[format('{0:D99999999}', 5)]") == "5"  # .NET takes 0..99: no giant strings
    assert run("[format('{0:D3}|{1:X}|{1:x2}', 7, 255)]") == "007|FF|ff"
