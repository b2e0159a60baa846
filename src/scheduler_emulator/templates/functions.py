"""The one table of template functions (ARM's template reference: array, comparison, date, deployment,
logical, numeric, object, resource and string functions), each with its arity.

Values are JSON values: dict, list, str, int, float, bool, None. String comparisons are ordinal and
case-sensitive except where ARM documents otherwise (``indexOf``, ``startsWith``…, object keys)."""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote, unquote, urljoin

from dateutil.relativedelta import relativedelta

from scheduler_emulator.templates.errors import TemplateError
from scheduler_emulator.templates.evaluation import MAX_VALUE_SIZE, Scope, evaluate, type_name
from scheduler_emulator.templates.expressions import Call, Node
from scheduler_emulator.templates.hashing import arm_guid, unique_string

Impl = Callable[[list[Any], Scope], Any]
MIN_INTEGER, MAX_INTEGER = -(2**63), 2**63 - 1  # ARM's integers are 64-bit


@dataclass(frozen=True)
class Function:
    impl: Callable[..., Any]
    low: int
    high: int | None  # None: any number
    lazy: bool = False  # impl gets the argument nodes (if, and, or, coalesce short-circuit)


FUNCTIONS: dict[str, Function] = {}


def function(name: str, low: int, high: int | None, *, lazy: bool = False) -> Callable[[Impl], Impl]:
    def register(impl: Impl) -> Impl:
        FUNCTIONS[name.lower()] = Function(impl, low, high, lazy)
        return impl

    return register


def known(name: str) -> bool:
    """Whether ``name`` is a function of the table (``list*`` included)."""
    return name.lower() in FUNCTIONS or _is_list_action(name)


def check_call(node: Call) -> None:
    """TemplateError for an unknown function or a wrong number of arguments (the static preflight check)."""
    if _is_list_action(node.name):
        if not 1 <= len(node.args) <= 3:
            raise TemplateError(f"The template function '{node.name}' takes 1 to 3 arguments.")
        return
    spec = FUNCTIONS.get(node.name.lower())
    if spec is None:
        raise TemplateError(f"The template function '{node.name}' is not valid or is not supported by this emulator.")
    if len(node.args) < spec.low or (spec.high is not None and len(node.args) > spec.high):
        expected = (
            f"{spec.low}" if spec.high == spec.low else f"{spec.low} to {spec.high if spec.high is not None else 'any'}"
        )
        raise TemplateError(
            f"The template function '{node.name}' takes {expected} argument(s); {len(node.args)} given."
        )


def call_function(node: Call, scope: Scope) -> Any:
    check_call(node)
    if _is_list_action(node.name):
        args = [evaluate(arg, scope) for arg in node.args]
        resource_id = _string(args[0], node.name)
        api_version = args[1] if len(args) > 1 and isinstance(args[1], str) else None
        return scope.lookup.list_action(node.name, _full_id(resource_id, scope), api_version)
    spec = FUNCTIONS[node.name.lower()]
    if spec.lazy:
        return spec.impl(list(node.args), scope)
    result = spec.impl([evaluate(arg, scope) for arg in node.args], scope)
    if isinstance(result, str | list) and len(result) > MAX_VALUE_SIZE:
        raise TemplateError(f"The result of '{node.name}' is larger than {MAX_VALUE_SIZE} characters or items.")
    if isinstance(result, int) and not isinstance(result, bool) and not MIN_INTEGER <= result <= MAX_INTEGER:
        raise TemplateError(f"The result of '{node.name}' is outside the 64-bit integer range.")
    return result


def _is_list_action(name: str) -> bool:
    return (
        name.lower().startswith("list")
        and name.lower() not in FUNCTIONS
        and re.fullmatch(r"[A-Za-z]+", name) is not None
    )


# --- argument readers ---------------------------------------------------------------------------------


def _string(value: Any, function_name: str) -> str:
    if not isinstance(value, str):
        raise TemplateError(f"The template function '{function_name}' expects a string, not a {type_name(value)}.")
    return value


def _integer(value: Any, function_name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TemplateError(f"The template function '{function_name}' expects an integer, not a {type_name(value)}.")
    return value


def _array(value: Any, function_name: str) -> list[Any]:
    if not isinstance(value, list):
        raise TemplateError(f"The template function '{function_name}' expects an array, not a {type_name(value)}.")
    return value


def to_text(value: Any) -> str:
    """A value as ARM's string() writes it: compact JSON for arrays and objects, True/False for booleans."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "True" if value else "False"
    if value is None:
        return ""
    if isinstance(value, list | dict):
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return str(value)


# --- deployment ---------------------------------------------------------------------------------------


@function("parameters", 1, 1)
def _parameters(args: list[Any], scope: Scope) -> Any:
    return scope.parameter(_string(args[0], "parameters"))


@function("variables", 1, 1)
def _variables(args: list[Any], scope: Scope) -> Any:
    return scope.variable(_string(args[0], "variables"))


@function("deployment", 0, 0)
def _deployment(args: list[Any], scope: Scope) -> Any:
    return scope.environment.deployment


@function("environment", 0, 0)
def _environment(args: list[Any], scope: Scope) -> Any:
    manager = scope.environment.resource_manager
    return {
        "name": "AzureCloud",
        "gallery": "https://gallery.azure.com/",
        "graph": "https://graph.windows.net/",
        "portal": "https://portal.azure.com",
        "resourceManager": manager,
        "authentication": {
            "loginEndpoint": "https://login.microsoftonline.com/",
            "audiences": ["https://management.core.windows.net/", "https://management.azure.com/"],
            "tenant": "common",
            "identityProvider": "AAD",
        },
        "suffixes": {
            "storage": "core.windows.net",
            "keyvaultDns": ".vault.azure.net",
            "sqlServerHostname": ".database.windows.net",
        },
    }


@function("copyIndex", 0, 2)
def _copy_index(args: list[Any], scope: Scope) -> Any:
    offset = 0
    loop = ""
    if args and isinstance(args[0], str):
        loop = args[0]
        if len(args) > 1:
            offset = _integer(args[1], "copyIndex")
    elif args:
        offset = _integer(args[0], "copyIndex")
        if len(args) > 1:
            raise TemplateError("copyIndex takes the loop name first, then the offset.")
    if loop and loop not in scope.copy_indexes:
        raise TemplateError(f"The copy loop '{loop}' is not around this expression.")
    key = loop or ("" if "" in scope.copy_indexes else (scope.innermost_loop or ""))
    if key not in scope.copy_indexes:
        raise TemplateError("The template function 'copyIndex' is not expected at this location: no copy loop.")
    return scope.copy_indexes[key] + offset


# --- resource ------------------------------------------------------------------------------------------


@function("resourceGroup", 0, 0)
def _resource_group(args: list[Any], scope: Scope) -> Any:
    return scope.environment.resource_group


@function("subscription", 0, 0)
def _subscription(args: list[Any], scope: Scope) -> Any:
    env = scope.environment
    return {
        "id": f"/subscriptions/{env.subscription_id}",
        "subscriptionId": env.subscription_id,
        "tenantId": env.tenant_id,
        "displayName": "Azure Scheduler emulator",
    }


@function("tenant", 0, 0)
def _tenant(args: list[Any], scope: Scope) -> Any:
    return {
        "countryCode": "US",
        "displayName": "Emulator",
        "id": f"/tenants/{scope.environment.tenant_id}",
        "tenantId": scope.environment.tenant_id,
    }


def _type_and_names(args: list[Any], function_name: str) -> tuple[list[str], str, list[str]]:
    """(scope arguments before the type, the type without a trailing '/', the names after it)."""
    texts = [_string(arg, function_name) for arg in args]
    for position, text in enumerate(texts):
        if "/" in text.strip("/"):
            resource_type = text.strip("/")
            names = texts[position + 1 :]
            expected = len(resource_type.split("/")) - 1
            if len(names) != expected:
                raise TemplateError(
                    f"Unable to evaluate template language function '{function_name}': the type "
                    f"'{resource_type}' needs {expected} name segment(s); {len(names)} given."
                )
            return texts[:position], resource_type, names
    raise TemplateError(f"The template function '{function_name}' needs a resource type such as 'Microsoft.X/y'.")


def _provider_path(resource_type: str, names: list[str]) -> str:
    namespace, *types = resource_type.split("/")
    return f"providers/{namespace}/" + "/".join(f"{t}/{n}" for t, n in zip(types, names, strict=True))


@function("resourceId", 2, None)
def _resource_id(args: list[Any], scope: Scope) -> Any:
    before, resource_type, names = _type_and_names(args, "resourceId")
    if len(before) > 2:
        raise TemplateError("resourceId takes at most a subscription id and a resource group before the type.")
    subscription = before[0] if len(before) == 2 else scope.environment.subscription_id
    group = before[-1] if before else scope.environment.resource_group["name"]
    return f"/subscriptions/{subscription}/resourceGroups/{group}/{_provider_path(resource_type, names)}"


@function("subscriptionResourceId", 2, None)
def _subscription_resource_id(args: list[Any], scope: Scope) -> Any:
    before, resource_type, names = _type_and_names(args, "subscriptionResourceId")
    subscription = before[0] if before else scope.environment.subscription_id
    return f"/subscriptions/{subscription}/{_provider_path(resource_type, names)}"


@function("tenantResourceId", 2, None)
def _tenant_resource_id(args: list[Any], scope: Scope) -> Any:
    _, resource_type, names = _type_and_names(args, "tenantResourceId")
    return "/" + _provider_path(resource_type, names)


@function("extensionResourceId", 3, None)
def _extension_resource_id(args: list[Any], scope: Scope) -> Any:
    base = _string(args[0], "extensionResourceId").rstrip("/")
    _, resource_type, names = _type_and_names(args[1:], "extensionResourceId")
    return f"{base}/{_provider_path(resource_type, names)}"


def _full_id(resource: str, scope: Scope) -> str:
    """A resource id, or a name of a resource in this template turned into its id."""
    if resource.startswith("/"):
        return resource
    found = scope.resource_ids(resource)
    if found is None:
        raise TemplateError(f"The resource '{resource}' is not defined in the template; give its resource id.")
    return found


@function("reference", 1, 3)
def _reference(args: list[Any], scope: Scope) -> Any:
    resource = _string(args[0], "reference")
    api_version = args[1] if len(args) > 1 and isinstance(args[1], str) else None
    full = len(args) > 2 and isinstance(args[2], str) and args[2].lower() == "full"
    return scope.lookup.reference(_full_id(resource, scope), api_version, full)


# --- logical --------------------------------------------------------------------------------------------


def _bool(value: Any, function_name: str) -> bool:
    if not isinstance(value, bool):
        raise TemplateError(f"The template function '{function_name}' expects a Boolean, not a {type_name(value)}.")
    return value


@function("if", 3, 3, lazy=True)
def _if(args: list[Node], scope: Scope) -> Any:
    return evaluate(args[1] if _bool(evaluate(args[0], scope), "if") else args[2], scope)


@function("and", 2, None, lazy=True)
def _and(args: list[Node], scope: Scope) -> Any:
    return all(_bool(evaluate(arg, scope), "and") for arg in args)


@function("or", 2, None, lazy=True)
def _or(args: list[Node], scope: Scope) -> Any:
    return any(_bool(evaluate(arg, scope), "or") for arg in args)


@function("not", 1, 1)
def _not(args: list[Any], scope: Scope) -> Any:
    return not _bool(args[0], "not")


@function("true", 0, 0)
def _true(args: list[Any], scope: Scope) -> Any:
    return True


@function("false", 0, 0)
def _false(args: list[Any], scope: Scope) -> Any:
    return False


@function("bool", 1, 1)
def _to_bool(args: list[Any], scope: Scope) -> Any:
    value = args[0]
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    if isinstance(value, int):
        return value != 0
    raise TemplateError(f"The template function 'bool' cannot convert '{to_text(value)[:50]}' to a Boolean.")


# --- comparison -----------------------------------------------------------------------------------------


@function("equals", 2, 2)
def _equals(args: list[Any], scope: Scope) -> Any:
    return _same(args[0], args[1])


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b or (isinstance(a, int | float) and isinstance(b, int | float) and a == b)


def _ordered(args: list[Any], function_name: str) -> tuple[Any, Any]:
    a, b = args
    numbers = all(isinstance(x, int | float) and not isinstance(x, bool) for x in (a, b))
    if not numbers and not (isinstance(a, str) and isinstance(b, str)):
        raise TemplateError(f"The template function '{function_name}' compares two integers or two strings.")
    return a, b


@function("greater", 2, 2)
def _greater(args: list[Any], scope: Scope) -> Any:
    a, b = _ordered(args, "greater")
    return a > b


@function("greaterOrEquals", 2, 2)
def _greater_or_equals(args: list[Any], scope: Scope) -> Any:
    a, b = _ordered(args, "greaterOrEquals")
    return a >= b


@function("less", 2, 2)
def _less(args: list[Any], scope: Scope) -> Any:
    a, b = _ordered(args, "less")
    return a < b


@function("lessOrEquals", 2, 2)
def _less_or_equals(args: list[Any], scope: Scope) -> Any:
    a, b = _ordered(args, "lessOrEquals")
    return a <= b


@function("coalesce", 1, None, lazy=True)
def _coalesce(args: list[Node], scope: Scope) -> Any:
    for arg in args:
        value = evaluate(arg, scope)
        if value is not None:
            return value
    return None


# --- numeric --------------------------------------------------------------------------------------------


def _numbers(args: list[Any], function_name: str) -> list[int]:
    return [_integer(arg, function_name) for arg in args]


@function("add", 2, 2)
def _add(args: list[Any], scope: Scope) -> Any:
    a, b = _numbers(args, "add")
    return a + b


@function("sub", 2, 2)
def _sub(args: list[Any], scope: Scope) -> Any:
    a, b = _numbers(args, "sub")
    return a - b


@function("mul", 2, 2)
def _mul(args: list[Any], scope: Scope) -> Any:
    a, b = _numbers(args, "mul")
    return a * b


def _divisor(value: int, function_name: str) -> int:
    if value == 0:
        raise TemplateError(f"The template function '{function_name}' cannot divide by zero.")
    return value


@function("div", 2, 2)
def _div(args: list[Any], scope: Scope) -> Any:
    a, b = _numbers(args, "div")
    return int(a / _divisor(b, "div")) if abs(a) < 2**52 else (abs(a) // abs(b)) * (1 if (a < 0) == (b < 0) else -1)


@function("mod", 2, 2)
def _mod(args: list[Any], scope: Scope) -> Any:
    a, b = _numbers(args, "mod")
    return int(math.fmod(a, _divisor(b, "mod"))) if abs(a) < 2**52 else a - b * _div(args, scope)


@function("int", 1, 1)
def _int(args: list[Any], scope: Scope) -> Any:
    value = args[0]
    if isinstance(value, bool):
        raise TemplateError("The template function 'int' cannot convert a Boolean.")
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value)
    if isinstance(value, str) and re.fullmatch(r"\s*[+-]?\d{1,19}\s*", value):
        return int(value)
    raise TemplateError(f"The template function 'int' cannot convert '{to_text(value)[:50]}' to an integer.")


@function("float", 1, 1)
def _float(args: list[Any], scope: Scope) -> Any:
    value = args[0]
    try:
        if isinstance(value, int | float | str) and not isinstance(value, bool):
            result = float(value)
            if math.isfinite(result):
                return result
    except ValueError:
        pass
    raise TemplateError(f"The template function 'float' cannot convert '{to_text(value)[:50]}' to a number.")


def _extreme(args: list[Any], function_name: str, pick: Callable[..., Any]) -> Any:
    values = args[0] if len(args) == 1 and isinstance(args[0], list) else args
    if not values:
        raise TemplateError(f"The template function '{function_name}' needs at least one value.")
    return pick(_numbers(values, function_name))


@function("min", 1, None)
def _min(args: list[Any], scope: Scope) -> Any:
    return _extreme(args, "min", min)


@function("max", 1, None)
def _max(args: list[Any], scope: Scope) -> Any:
    return _extreme(args, "max", max)


@function("range", 2, 2)
def _range(args: list[Any], scope: Scope) -> Any:
    start, count = _numbers(args, "range")
    if not 0 <= count <= 10_000:
        raise TemplateError("The template function 'range' takes a count from 0 to 10000.")
    return list(range(start, start + count))


# --- strings and arrays -----------------------------------------------------------------------------


@function("concat", 0, None)
def _concat(args: list[Any], scope: Scope) -> Any:
    if args and isinstance(args[0], list):
        result: list[Any] = []
        for arg in args:
            result.extend(_array(arg, "concat"))
        return result
    return "".join(to_text(arg) for arg in args)


@function("string", 1, 1)
def _string_function(args: list[Any], scope: Scope) -> Any:
    return to_text(args[0]) if args[0] is not None else "null"


@function("format", 1, None)
def _format(args: list[Any], scope: Scope) -> Any:
    template = _string(args[0], "format")
    values = args[1:]

    def replace(match: re.Match[str]) -> str:
        if match.group(0) in ("{{", "}}"):
            return match.group(0)[0]
        position = int(match.group(1))
        if position >= len(values):
            raise TemplateError(f"The format string refers to argument {position}, but only {len(values)} given.")
        return _format_one(values[position], match.group(2))

    return re.sub(r"\{\{|\}\}|\{(\d+)(?::([^}]*))?\}", replace, template)


def _format_one(value: Any, spec: str | None) -> str:
    if not spec or not isinstance(value, int | float) or isinstance(value, bool):
        return to_text(value)
    kind, digits = spec[0].upper(), spec[1:]
    places = int(digits) if digits.isdigit() and len(digits) <= 2 else None  # .NET allows 0..99
    if kind == "N":
        return f"{value:,.{2 if places is None else places}f}"
    if kind == "D" and isinstance(value, int):
        return f"{value:0{places or 0}d}"
    if kind == "X" and isinstance(value, int):
        text = f"{value:0{places or 0}X}"
        return text if spec[0] == "X" else text.lower()
    if kind == "F":
        return f"{value:.{2 if places is None else places}f}"
    return to_text(value)


@function("toLower", 1, 1)
def _to_lower(args: list[Any], scope: Scope) -> Any:
    return _string(args[0], "toLower").lower()


@function("toUpper", 1, 1)
def _to_upper(args: list[Any], scope: Scope) -> Any:
    return _string(args[0], "toUpper").upper()


@function("trim", 1, 1)
def _trim(args: list[Any], scope: Scope) -> Any:
    return _string(args[0], "trim").strip()


@function("length", 1, 1)
def _length(args: list[Any], scope: Scope) -> Any:
    value = args[0]
    if isinstance(value, str | list | dict):
        return len(value)
    raise TemplateError(f"The template function 'length' expects a string, array or object, not a {type_name(value)}.")


@function("empty", 1, 1)
def _empty(args: list[Any], scope: Scope) -> Any:
    value = args[0]
    return value is None or (isinstance(value, str | list | dict) and len(value) == 0)


@function("contains", 2, 2)
def _contains(args: list[Any], scope: Scope) -> Any:
    container, item = args
    if isinstance(container, str):
        return to_text(item) in container
    if isinstance(container, list):
        return any(_same(element, item) for element in container)
    if isinstance(container, dict):
        return isinstance(item, str) and item.lower() in {key.lower() for key in container}
    raise TemplateError(
        f"The template function 'contains' expects a string, array or object, not a {type_name(container)}."
    )


@function("first", 1, 1)
def _first(args: list[Any], scope: Scope) -> Any:
    value = args[0]
    if isinstance(value, str | list):
        return value[0] if value else ("" if isinstance(value, str) else None)
    raise TemplateError("The template function 'first' expects a string or an array.")


@function("last", 1, 1)
def _last(args: list[Any], scope: Scope) -> Any:
    value = args[0]
    if isinstance(value, str | list):
        return value[-1] if value else ("" if isinstance(value, str) else None)
    raise TemplateError("The template function 'last' expects a string or an array.")


@function("indexOf", 2, 2)
def _index_of(args: list[Any], scope: Scope) -> Any:
    container, item = args
    if isinstance(container, list):
        return next((i for i, element in enumerate(container) if _same(element, item)), -1)
    return _string(container, "indexOf").lower().find(_string(item, "indexOf").lower())


@function("lastIndexOf", 2, 2)
def _last_index_of(args: list[Any], scope: Scope) -> Any:
    container, item = args
    if isinstance(container, list):
        return next((i for i in range(len(container) - 1, -1, -1) if _same(container[i], item)), -1)
    return _string(container, "lastIndexOf").lower().rfind(_string(item, "lastIndexOf").lower())


@function("startsWith", 2, 2)
def _starts_with(args: list[Any], scope: Scope) -> Any:
    return _string(args[0], "startsWith").lower().startswith(_string(args[1], "startsWith").lower())


@function("endsWith", 2, 2)
def _ends_with(args: list[Any], scope: Scope) -> Any:
    return _string(args[0], "endsWith").lower().endswith(_string(args[1], "endsWith").lower())


@function("replace", 3, 3)
def _replace(args: list[Any], scope: Scope) -> Any:
    text, old, new = (_string(arg, "replace") for arg in args)
    if not old:
        raise TemplateError("The template function 'replace' cannot replace an empty string.")
    return text.replace(old, new)


@function("split", 2, 2)
def _split(args: list[Any], scope: Scope) -> Any:
    text = _string(args[0], "split")
    delimiters = args[1] if isinstance(args[1], list) else [args[1]]
    separators = [_string(d, "split") for d in delimiters if d != ""]
    if not separators:
        return [text]
    return re.split("|".join(re.escape(s) for s in separators), text)


@function("join", 2, 2)
def _join(args: list[Any], scope: Scope) -> Any:
    return _string(args[1], "join").join(to_text(item) for item in _array(args[0], "join"))


@function("substring", 2, 3)
def _substring(args: list[Any], scope: Scope) -> Any:
    text = _string(args[0], "substring")
    start = _integer(args[1], "substring")
    length = _integer(args[2], "substring") if len(args) > 2 else len(text) - start
    if start < 0 or length < 0 or start + length > len(text):
        raise TemplateError(
            f"The index and length parameters must refer to a location within the string (start {start}, "
            f"length {length}, string length {len(text)})."
        )
    return text[start : start + length]


@function("padLeft", 2, 3)
def _pad_left(args: list[Any], scope: Scope) -> Any:
    text = to_text(args[0]) if isinstance(args[0], int | str) else _string(args[0], "padLeft")
    width = _integer(args[1], "padLeft")
    pad = _string(args[2], "padLeft") if len(args) > 2 else " "
    if len(pad) != 1:
        raise TemplateError("The template function 'padLeft' pads with exactly one character.")
    if width > 16_384:
        raise TemplateError("The template function 'padLeft' pads to at most 16384 characters.")
    return text.rjust(width, pad)


@function("skip", 2, 2)
def _skip(args: list[Any], scope: Scope) -> Any:
    value = args[0]
    count = max(0, _integer(args[1], "skip"))
    if isinstance(value, str | list):
        return value[count:]
    raise TemplateError("The template function 'skip' expects a string or an array.")


@function("take", 2, 2)
def _take(args: list[Any], scope: Scope) -> Any:
    value = args[0]
    count = max(0, _integer(args[1], "take"))
    if isinstance(value, str | list):
        return value[:count]
    raise TemplateError("The template function 'take' expects a string or an array.")


@function("array", 1, 1)
def _array_function(args: list[Any], scope: Scope) -> Any:
    return args[0] if isinstance(args[0], list) else [args[0]]


@function("createArray", 0, None)
def _create_array(args: list[Any], scope: Scope) -> Any:
    return list(args)


@function("flatten", 1, 1)
def _flatten(args: list[Any], scope: Scope) -> Any:
    result: list[Any] = []
    for item in _array(args[0], "flatten"):
        result.extend(_array(item, "flatten"))
    return result


@function("union", 1, None)
def _union(args: list[Any], scope: Scope) -> Any:
    if all(isinstance(arg, dict) for arg in args):
        merged: dict[str, Any] = {}
        for arg in args:
            for key, value in arg.items():
                if isinstance(merged.get(key), dict) and isinstance(value, dict):
                    merged[key] = _union([merged[key], value], scope)
                else:
                    merged[key] = value
        return merged
    if all(isinstance(arg, list) for arg in args):
        result: list[Any] = []
        for arg in args:
            for item in arg:
                if not any(_same(item, seen) for seen in result):
                    result.append(item)
        return result
    raise TemplateError("The template function 'union' takes only arrays or only objects.")


@function("intersection", 2, None)
def _intersection(args: list[Any], scope: Scope) -> Any:
    if all(isinstance(arg, dict) for arg in args):
        first = args[0]
        return {k: v for k, v in first.items() if all(k in other and _same(other[k], v) for other in args[1:])}
    if all(isinstance(arg, list) for arg in args):
        result: list[Any] = []
        for item in args[0]:
            if all(any(_same(item, x) for x in other) for other in args[1:]) and not any(
                _same(item, r) for r in result
            ):
                result.append(item)
        return result
    raise TemplateError("The template function 'intersection' takes only arrays or only objects.")


# --- objects ---------------------------------------------------------------------------------------------


@function("createObject", 0, None)
def _create_object(args: list[Any], scope: Scope) -> Any:
    if len(args) % 2:
        raise TemplateError("The template function 'createObject' takes key and value pairs.")
    return {_string(args[i], "createObject"): args[i + 1] for i in range(0, len(args), 2)}


@function("json", 1, 1)
def _json(args: list[Any], scope: Scope) -> Any:
    text = _string(args[0], "json")
    try:
        return json.loads(text, parse_constant=_no_constant)
    except (ValueError, RecursionError):
        raise TemplateError(f"The template function 'json' cannot parse '{text[:80]}' as JSON.") from None


def _no_constant(name: str) -> Any:
    raise ValueError(name)


@function("null", 0, 0)
def _null(args: list[Any], scope: Scope) -> Any:
    return None


@function("items", 1, 1)
def _items(args: list[Any], scope: Scope) -> Any:
    value = args[0]
    if not isinstance(value, dict):
        raise TemplateError("The template function 'items' expects an object.")
    return [{"key": key, "value": value[key]} for key in sorted(value, key=str.lower)]


@function("objectKeys", 1, 1)
def _object_keys(args: list[Any], scope: Scope) -> Any:
    if not isinstance(args[0], dict):
        raise TemplateError("The template function 'objectKeys' expects an object.")
    return list(args[0])


# --- encodings, ids, uris -------------------------------------------------------------------------------


@function("uniqueString", 1, None)
def _unique_string(args: list[Any], scope: Scope) -> Any:
    return unique_string(*(_string(arg, "uniqueString") for arg in args))


@function("guid", 1, None)
def _guid(args: list[Any], scope: Scope) -> Any:
    return arm_guid(*(_string(arg, "guid") for arg in args))


@function("newGuid", 0, 0)
def _new_guid(args: list[Any], scope: Scope) -> Any:
    if not scope.in_parameter_default:
        raise TemplateError("The template function 'newGuid' is only allowed in a parameter's defaultValue.")
    return str(uuid.uuid4())


@function("base64", 1, 1)
def _base64(args: list[Any], scope: Scope) -> Any:
    return base64.b64encode(_string(args[0], "base64").encode("utf-8")).decode("ascii")


def _from_base64(text: str, function_name: str) -> str:
    try:
        return base64.b64decode(text, validate=True).decode("utf-8")
    except (binascii.Error, ValueError):
        raise TemplateError(f"The template function '{function_name}' got a value that is not base64 UTF-8.") from None


@function("base64ToString", 1, 1)
def _base64_to_string(args: list[Any], scope: Scope) -> Any:
    return _from_base64(_string(args[0], "base64ToString"), "base64ToString")


@function("base64ToJson", 1, 1)
def _base64_to_json(args: list[Any], scope: Scope) -> Any:
    return _json([_from_base64(_string(args[0], "base64ToJson"), "base64ToJson")], scope)


@function("dataUri", 1, 1)
def _data_uri(args: list[Any], scope: Scope) -> Any:
    return "data:text/plain;charset=utf8;base64," + _base64(args, scope)


@function("dataUriToString", 1, 1)
def _data_uri_to_string(args: list[Any], scope: Scope) -> Any:
    text = _string(args[0], "dataUriToString")
    header, _, data = text.partition(",")
    if not header.startswith("data:"):
        raise TemplateError("The template function 'dataUriToString' expects a data URI.")
    return _from_base64(data, "dataUriToString") if header.endswith(";base64") else unquote(data)


@function("uri", 2, 2)
def _uri(args: list[Any], scope: Scope) -> Any:
    return urljoin(_string(args[0], "uri"), _string(args[1], "uri"))


@function("uriComponent", 1, 1)
def _uri_component(args: list[Any], scope: Scope) -> Any:
    return quote(_string(args[0], "uriComponent"), safe="-_.~")


@function("uriComponentToString", 1, 1)
def _uri_component_to_string(args: list[Any], scope: Scope) -> Any:
    return unquote(_string(args[0], "uriComponentToString"))


# --- dates -----------------------------------------------------------------------------------------------

_DURATION = re.compile(
    r"^(?P<sign>-)?P(?:(?P<years>\d+)Y)?(?:(?P<months>\d+)M)?(?:(?P<weeks>\d+)W)?(?:(?P<days>\d+)D)?"
    r"(?:T(?:(?P<hours>\d+)H)?(?:(?P<minutes>\d+)M)?(?:(?P<seconds>\d+(?:\.\d+)?)S)?)?$"
)


def _format_date(moment: datetime, fmt: str | None) -> str:
    """A datetime in a .NET format: 'u', 's', 'o', or a custom pattern of yyyy MM dd HH mm ss (default: 'o'-like)."""
    if fmt is None or fmt == "o":
        return moment.strftime("%Y-%m-%dT%H:%M:%S.%f") + "0Z"
    if fmt == "u":
        return moment.strftime("%Y-%m-%d %H:%M:%SZ")
    if fmt == "s":
        return moment.strftime("%Y-%m-%dT%H:%M:%S")
    if fmt == "d":
        return f"{moment.month}/{moment.day}/{moment.year}"
    out = fmt
    for token, value in (
        ("yyyy", f"{moment.year:04d}"),
        ("MM", f"{moment.month:02d}"),
        ("dd", f"{moment.day:02d}"),
        ("HH", f"{moment.hour:02d}"),
        ("mm", f"{moment.minute:02d}"),
        ("ss", f"{moment.second:02d}"),
    ):
        out = out.replace(token, value)
    return out


def _parse_date(text: str, function_name: str) -> datetime:
    try:
        moment = datetime.fromisoformat(text.strip().replace(" ", "T", 1).replace("z", "Z"))
    except ValueError:
        raise TemplateError(f"The template function '{function_name}' cannot read '{text[:50]}' as a date.") from None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


@function("utcNow", 0, 1)
def _utc_now(args: list[Any], scope: Scope) -> Any:
    if not scope.in_parameter_default:
        raise TemplateError("The template function 'utcNow' is only allowed in a parameter's defaultValue.")
    fmt = _string(args[0], "utcNow") if args else "yyyyMMddTHHmmssZ"
    return _format_date(scope.environment.now.astimezone(UTC), fmt)


@function("dateTimeAdd", 2, 3)
def _date_time_add(args: list[Any], scope: Scope) -> Any:
    base = _parse_date(_string(args[0], "dateTimeAdd"), "dateTimeAdd")
    match = _DURATION.match(_string(args[1], "dateTimeAdd"))
    if not match or args[1] in ("P", "PT", "-P"):
        raise TemplateError(
            f"The template function 'dateTimeAdd' cannot read '{args[1][:40]}' as an ISO 8601 duration."
        )
    parts = {k: float(v) if k == "seconds" else int(v) for k, v in match.groupdict().items() if v and k != "sign"}
    try:
        delta = relativedelta(years=parts.get("years", 0), months=parts.get("months", 0)) + timedelta(
            weeks=parts.get("weeks", 0),
            days=parts.get("days", 0),
            hours=parts.get("hours", 0),
            minutes=parts.get("minutes", 0),
            seconds=parts.get("seconds", 0),
        )
        moment = base - delta if match.group("sign") else base + delta
    except (OverflowError, ValueError):
        raise TemplateError("The template function 'dateTimeAdd' went beyond the years 1 to 9999.") from None
    fmt = _string(args[2], "dateTimeAdd") if len(args) > 2 else None
    return _format_date(moment, fmt) if fmt else moment.strftime("%Y-%m-%dT%H:%M:%SZ")


@function("dateTimeToEpoch", 1, 1)
def _date_time_to_epoch(args: list[Any], scope: Scope) -> Any:
    return int(_parse_date(_string(args[0], "dateTimeToEpoch"), "dateTimeToEpoch").timestamp())


@function("dateTimeFromEpoch", 1, 1)
def _date_time_from_epoch(args: list[Any], scope: Scope) -> Any:
    seconds = _integer(args[0], "dateTimeFromEpoch")
    try:
        return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (OverflowError, ValueError, OSError):
        raise TemplateError(
            "The template function 'dateTimeFromEpoch' got a time beyond the years 1 to 9999."
        ) from None
