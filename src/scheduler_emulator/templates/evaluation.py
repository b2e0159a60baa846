"""Evaluating expression trees against a scope: the deployment's parameters and variables, the copy loops
around the value, the deployment's environment, and a lookup for ``reference()`` and ``list*()``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from scheduler_emulator.templates.errors import TemplateError
from scheduler_emulator.templates.expressions import Call, Index, Literal, Member, Node, parse_string

MAX_VALUE_SIZE = 4 * 1024 * 1024  # characters a computed string or array may reach (range(), padLeft()...)
MAX_EVALUATED_VALUES = 200_000  # JSON values one deployment pass may evaluate (1-2 s of work)


class ResourceLookup(Protocol):
    """What answers ``reference()`` and ``list*()``: the emulator's store at deploy time, or a preflight
    stand-in that raises NeedsDeployment."""

    def reference(self, resource_id: str, api_version: str | None, full: bool) -> Any:
        """The resource's properties (``full``: the whole resource)."""

    def list_action(self, action: str, resource_id: str, api_version: str | None) -> Any:
        """The answer of POST ``{resource_id}/{action}`` (``listKeys``…)."""


@dataclass(frozen=True, kw_only=True)
class Environment:
    """Where the deployment happens: what ``subscription()``, ``resourceGroup()``, ``deployment()`` answer."""

    subscription_id: str
    tenant_id: str
    resource_group: dict[str, Any]  # resourceGroup()'s object
    deployment: dict[str, Any]  # deployment()'s object
    now: datetime  # utcNow() (parameter defaults only)
    resource_manager: str = "https://management.azure.com/"


@dataclass(kw_only=True)
class Scope:
    """Everything an expression can see. ``parameter``/``variable`` are lazy readers (they evaluate defaults
    and variables on first use, refusing cycles); ``copy_indexes`` maps loop names (and ``""`` for the
    innermost resource loop) to the current index; ``in_parameter_default`` allows utcNow() and newGuid()."""

    environment: Environment
    # What evaluates a function call (templates.functions.call_function, handed in by templates.template): the
    # functions build on this module, so it names none of them.
    functions: Callable[[Call, Scope], Any]
    parameter: Callable[[str], Any]
    variable: Callable[[str], Any]
    lookup: ResourceLookup
    resource_ids: Callable[[str], str | None] = lambda name: None  # a template resource's id by its name
    copy_indexes: dict[str, int] = field(default_factory=dict)
    innermost_loop: str | None = None
    in_parameter_default: bool = False
    # Values left to evaluate, shared by every scope derived from this one: nested copy loops multiply, and a
    # 64 KB body must not buy minutes of work.
    budget: list[int] = field(default_factory=lambda: [MAX_EVALUATED_VALUES])

    def with_copy(self, name: str, index: int, *, resource_loop: bool = False) -> Scope:
        indexes = {**self.copy_indexes, name: index}
        if resource_loop:
            indexes[""] = index
        return Scope(
            environment=self.environment,
            functions=self.functions,
            parameter=self.parameter,
            variable=self.variable,
            lookup=self.lookup,
            resource_ids=self.resource_ids,
            copy_indexes=indexes,
            innermost_loop=name,
            in_parameter_default=self.in_parameter_default,
            budget=self.budget,
        )


def evaluate(node: Node, scope: Scope) -> Any:
    """The value of ``node``; TemplateError for anything ARM would refuse."""
    if isinstance(node, Literal):
        return node.value
    if isinstance(node, Call):
        return scope.functions(node, scope)
    if isinstance(node, Member):
        return member(evaluate(node.target, scope), node.name)
    if isinstance(node, Index):
        return index(evaluate(node.target, scope), evaluate(node.index, scope))
    raise AssertionError(node)


def member(value: Any, name: str) -> Any:
    """``value.name``: object members match case-insensitively, as ARM's do."""
    if not isinstance(value, dict):
        raise TemplateError(
            f"The language expression property '{name}' can't be evaluated: the value is a {type_name(value)}, "
            "not an object."
        )
    if name in value:
        return value[name]
    for key, item in value.items():
        if key.lower() == name.lower():
            return item
    available = ", ".join(list(value)[:20])
    raise TemplateError(
        f"The language expression property '{name}' doesn't exist, available properties are '{available}'."
    )


def index(value: Any, key: Any) -> Any:
    """``value[key]``: an array by integer, an object by string."""
    if isinstance(value, list):
        if not isinstance(key, int) or isinstance(key, bool):
            raise TemplateError(f"An array index must be an integer, not a {type_name(key)}.")
        if not 0 <= key < len(value):
            raise TemplateError(f"The language expression array index '{key}' is out of bounds (length {len(value)}).")
        return value[key]
    if isinstance(value, dict):
        if not isinstance(key, str):
            raise TemplateError(f"An object index must be a string, not a {type_name(key)}.")
        return member(value, key)
    raise TemplateError(f"The value is a {type_name(value)}: it cannot be indexed.")


def type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "Boolean"
    if isinstance(value, int):
        return "Integer"
    if isinstance(value, float):
        return "Float"
    if isinstance(value, str):
        return "String"
    if isinstance(value, list):
        return "Array"
    return "Object"


def evaluate_value(value: Any, scope: Scope, path: str) -> Any:
    """A JSON value with every expression string in it evaluated and every property ``copy`` expanded;
    errors name ``path``."""
    scope.budget[0] -= 1
    if scope.budget[0] < 0:
        raise TemplateError(f"The template expands to more than {MAX_EVALUATED_VALUES} values.", path)
    if isinstance(value, str):
        try:
            return evaluate(parse_string(value), scope)
        except TemplateError as exc:
            raise exc.at(path) from None
    if isinstance(value, list):
        return [evaluate_value(item, scope, f"{path}[{i}]") for i, item in enumerate(value)]
    if isinstance(value, dict):
        result: dict[str, Any] = {}
        for key, item in value.items():
            if key == "copy" and isinstance(item, list) and all(isinstance(c, dict) and "input" in c for c in item):
                result.update(expand_property_copies(item, scope, f"{path}.copy"))
                continue
            result[key] = evaluate_value(item, scope, f"{path}.{key}")
        return result
    return value


def expand_property_copies(copies: list[dict[str, Any]], scope: Scope, path: str) -> dict[str, Any]:
    """``"copy": [{"name", "count", "input"}]`` → ``{name: [input evaluated at each index]}``."""
    result: dict[str, Any] = {}
    for position, copy in enumerate(copies):
        where = f"{path}[{position}]"
        name = copy.get("name")
        if not isinstance(name, str) or not name:
            raise TemplateError("A copy needs a 'name'.", f"{where}.name")
        count = copy_count(evaluate_value(copy.get("count"), scope, f"{where}.count"), f"{where}.count")
        result[name] = [evaluate_value(copy["input"], scope.with_copy(name, i), f"{where}.input") for i in range(count)]
    return result


MAX_COPY_COUNT = 800  # ARM's limit on a copy loop


def copy_count(value: Any, path: str) -> int:
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_COPY_COUNT:
        raise TemplateError(f"The copy count must be an integer from 0 to {MAX_COPY_COUNT}.", path)
    return value
