"""A whole template with its parameters: read, checked (the preflight), planned (resources expanded over
their copy loops and conditions, children flattened, put in dependency order), then evaluated resource by
resource and, at the end, its outputs."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from scheduler_emulator.templates.errors import TemplateError
from scheduler_emulator.templates.evaluation import (
    MAX_EVALUATED_VALUES,
    Environment,
    ResourceLookup,
    Scope,
    copy_count,
    evaluate_value,
    type_name,
)
from scheduler_emulator.templates.expressions import calls_in, is_expression, parse
from scheduler_emulator.templates.functions import call_function, check_call

PARAMETER_TYPES = {
    "string": "String",
    "securestring": "SecureString",
    "int": "Int",
    "bool": "Bool",
    "object": "Object",
    "secureobject": "SecureObject",
    "array": "Array",
}
SECURE_TYPES = ("SecureString", "SecureObject")
# Members of a resource that are about the template, not the resource's body.
_TEMPLATE_MEMBERS = {
    "type",
    "name",
    "apiversion",
    "dependson",
    "copy",
    "condition",
    "resources",
    "comments",
    "metadata",
    "scope",
}
MAX_RESOURCES = 800


@dataclass(kw_only=True)
class ResourceInstance:
    """One resource the deployment will create or update."""

    type: str  # full type: Microsoft.Scheduler/jobCollections/jobs
    name: str  # full name: jc/job
    id: str
    api_version: str | None
    definition: dict[str, Any] = field(repr=False)  # the template's resource (children left out)
    scope: Scope = field(repr=False)
    path: str
    loop: str | None
    depends_on_raw: list[str] = field(default_factory=list)
    depends_on: list[str] = field(default_factory=list)  # ids
    # what the resource is deployed on: the deployment's resource group, or the resource an extension resource's
    # ``scope`` names (a role assignment on a job collection)
    scope_id: str = ""


def provider_path(resource_type: str, name: str) -> str:
    """``providers/{namespace}/{type}/{name}[/{type}/{name}]`` of a resource's full type and name."""
    namespace, *types = resource_type.split("/")
    names = name.split("/")
    tail = "/".join(f"{t}/{n}" for t, n in zip(types, names, strict=False))
    return f"providers/{namespace}/{tail}"


def resource_id(subscription: str, group: str, resource_type: str, name: str) -> str:
    return f"/subscriptions/{subscription}/resourceGroups/{group}/{provider_path(resource_type, name)}"


class TemplateDeployment:
    """The template ``template`` with the supplied ``parameters`` (``{name: {"value": v}}``) in ``environment``.
    Construction is the preflight: it raises TemplateError for anything ARM refuses before deploying, and
    leaves ``resources`` in the order to deploy them. ``reference()`` and ``list*()`` ask ``lookup``, which the
    caller may replace between steps (a preflight stand-in, then the store)."""

    def __init__(
        self,
        template: Any,
        parameters: Any,
        environment: Environment,
        lookup: ResourceLookup,
    ) -> None:
        if not isinstance(template, dict):
            raise TemplateError("The template must be a JSON object.", "properties.template")
        self.template = template
        self.environment = environment
        self.lookup = lookup
        self._check_expressions(template, "template")
        self._definitions = self._parameter_definitions()
        self._supplied = self._supplied_parameters(parameters)
        self._parameter_values: dict[str, Any] = {}
        self._variable_values: dict[str, Any] = {}
        self._evaluating: set[str] = set()
        self._all: list[ResourceInstance] = []  # every resource instance, once planned (reference() by name)
        self.scope = Scope(
            environment=environment,
            functions=call_function,
            parameter=self.parameter,
            variable=self.variable,
            lookup=self,
            resource_ids=self._id_by_name,
        )
        for name in self._definitions:
            self.parameter(name)
        for name, value in self._variable_definitions().items():
            if name != "copy":
                self.variable(name)
            elif isinstance(value, list):
                for copy in value:
                    if not isinstance(copy, dict) or not isinstance(copy.get("name"), str) or not copy["name"]:
                        raise TemplateError("A variable copy needs a 'name'.", "template.variables.copy")
                    self.variable(copy["name"])
            else:
                raise TemplateError("The variables' 'copy' must be an array.", "template.variables.copy")
        self.resources = self._plan()

    def fresh_budget(self) -> None:
        """A new allowance of values to evaluate (MAX_EVALUATED_VALUES) for the next pass: the run after the
        preflight."""
        self.scope.budget[0] = MAX_EVALUATED_VALUES

    # --- ResourceLookup, delegated to the current lookup -------------------------------------------------

    def reference(self, resource_id: str, api_version: str | None, full: bool) -> Any:
        return self.lookup.reference(resource_id, api_version, full)

    def list_action(self, action: str, resource_id: str, api_version: str | None) -> Any:
        return self.lookup.list_action(action, resource_id, api_version)

    # --- static checks -----------------------------------------------------------------------------------

    @staticmethod
    def _check_expressions(value: Any, path: str) -> None:
        """Every expression in the template parses and calls known functions with the right arity."""
        stack: list[tuple[Any, str]] = [(value, path)]
        while stack:
            current, where = stack.pop()
            if isinstance(current, str) and is_expression(current):
                try:
                    for call in calls_in(parse(current[1:-1])):
                        check_call(call)
                except TemplateError as exc:
                    raise exc.at(where) from None
            elif isinstance(current, dict):
                stack.extend((item, f"{where}.{key}") for key, item in current.items())
            elif isinstance(current, list):
                stack.extend((item, f"{where}[{i}]") for i, item in enumerate(current))

    # --- parameters --------------------------------------------------------------------------------------

    def _parameter_definitions(self) -> dict[str, dict[str, Any]]:
        raw = self.template.get("parameters") or {}
        if not isinstance(raw, dict):
            raise TemplateError("The template's 'parameters' must be an object.", "template.parameters")
        definitions: dict[str, dict[str, Any]] = {}
        for name, definition in raw.items():
            where = f"template.parameters.{name}"
            if not isinstance(definition, dict):
                raise TemplateError(f"The template parameter '{name}' must be an object.", where)
            kind = definition.get("type")
            if not isinstance(kind, str) or kind.lower() not in PARAMETER_TYPES:
                raise TemplateError(
                    f"The template parameter '{name}' has type '{kind}'; use one of "
                    f"{', '.join(PARAMETER_TYPES.values())}.",
                    f"{where}.type",
                )
            definitions[name] = definition
        return definitions

    def _supplied_parameters(self, parameters: Any) -> dict[str, Any]:
        if parameters is None:
            return {}
        if not isinstance(parameters, dict):
            raise TemplateError("The deployment's 'parameters' must be an object.", "properties.parameters")
        known = {name.lower(): name for name in self._definitions}
        supplied: dict[str, Any] = {}
        unknown: list[str] = []
        for name, wrapper in parameters.items():
            if name.lower() not in known:
                unknown.append(name)
                continue
            where = f"properties.parameters.{name}"
            if not isinstance(wrapper, dict) or "value" not in wrapper:
                if isinstance(wrapper, dict) and "reference" in wrapper:
                    raise TemplateError(
                        f"The parameter '{name}' is a Key Vault reference; this emulator has no Key Vault: "
                        "pass the value.",
                        where,
                        "InvalidTemplateParameter",
                    )
                raise TemplateError(f"The parameter '{name}' must be given as {{\"value\": ...}}.", where)
            supplied[known[name.lower()]] = wrapper["value"]
        if unknown:
            raise TemplateError(
                f"The template parameters '{', '.join(unknown)}' in the parameters file are not valid; they are not "
                "present in the original template and can therefore not be provided at deployment time.",
                "properties.parameters",
                "InvalidTemplateParameter",
            )
        return supplied

    def parameter_type(self, name: str) -> str:
        return PARAMETER_TYPES[self._definitions[name]["type"].lower()]

    def parameter(self, name: str) -> Any:
        """The parameter's value: supplied, else its default (evaluated once); checked against its rules."""
        key = next((n for n in self._definitions if n.lower() == name.lower()), None)
        if key is None:
            raise TemplateError(f"The template parameter '{name}' is not found.")
        if key in self._parameter_values:
            return self._parameter_values[key]
        marker = "parameter:" + key
        if marker in self._evaluating:
            raise TemplateError(f"The template parameter '{key}' refers to itself through its defaultValue.")
        definition = self._definitions[key]
        where = f"template.parameters.{key}"
        self._evaluating.add(marker)
        try:
            if key in self._supplied:
                value = self._supplied[key]
                where = f"properties.parameters.{key}"
            elif "defaultValue" in definition:
                default_scope = Scope(
                    environment=self.environment,
                    functions=call_function,
                    parameter=self.parameter,
                    variable=self._no_variables,
                    lookup=self,
                    in_parameter_default=True,
                    budget=self.scope.budget,
                )
                value = evaluate_value(definition["defaultValue"], default_scope, f"{where}.defaultValue")
            else:
                raise TemplateError(
                    f"The value for the template parameter '{key}' is not provided.",
                    f"properties.parameters.{key}",
                    "InvalidTemplateParameter",
                )
        finally:
            self._evaluating.discard(marker)
        value = self._checked_parameter(key, definition, value, where)
        self._parameter_values[key] = value
        return value

    @staticmethod
    def _no_variables(name: str) -> Any:
        raise TemplateError("The template function 'variables' is not allowed in a parameter's defaultValue.")

    def _checked_parameter(self, name: str, definition: dict[str, Any], value: Any, where: str) -> Any:
        kind = PARAMETER_TYPES[definition["type"].lower()]

        def refuse(problem: str) -> TemplateError:
            return TemplateError(
                f"The provided value for the template parameter '{name}' is not valid: {problem}",
                where,
                "InvalidTemplateParameter",
            )

        if kind == "Int":
            if isinstance(value, str) and value.strip().lstrip("+-").isdigit() and len(value) < 20:
                value = int(value)
            if isinstance(value, bool) or not isinstance(value, int):
                raise refuse(f"expected an Integer, got a {type_name(value)}.")
        elif kind == "Bool":
            if isinstance(value, str) and value.lower() in ("true", "false"):
                value = value.lower() == "true"
            if not isinstance(value, bool):
                raise refuse(f"expected a Boolean, got a {type_name(value)}.")
        elif kind in ("String", "SecureString"):
            if not isinstance(value, str):
                raise refuse(f"expected a String, got a {type_name(value)}.")
        elif kind in ("Object", "SecureObject"):
            if not isinstance(value, dict):
                raise refuse(f"expected an Object, got a {type_name(value)}.")
        elif kind == "Array" and not isinstance(value, list):
            raise refuse(f"expected an Array, got a {type_name(value)}.")
        allowed = definition.get("allowedValues")
        if isinstance(allowed, list):
            candidates = value if isinstance(value, list) else [value]
            for candidate in candidates:
                if candidate not in allowed:
                    shown = "a secret value" if kind in SECURE_TYPES else f"'{candidate}'"
                    raise refuse(f"{shown} is not part of the allowed values {allowed}.")
        size = len(value) if isinstance(value, str | list) else None
        number = value if isinstance(value, int) and not isinstance(value, bool) else None
        for rule, measured, low in (
            ("minValue", number, True),
            ("maxValue", number, False),
            ("minLength", size, True),
            ("maxLength", size, False),
        ):
            limit = definition.get(rule)
            if measured is None or not isinstance(limit, int) or isinstance(limit, bool):
                continue
            if (measured < limit) if low else (measured > limit):
                raise refuse(f"the value breaks the rule {rule} {limit}.")
        return value

    def display_parameters(self) -> dict[str, Any]:
        """The parameters as the deployment shows them: ``{name: {type, value}}``, secure values left out."""
        shown: dict[str, Any] = {}
        for name in self._definitions:
            kind = self.parameter_type(name)
            shown[name] = {"type": kind} if kind in SECURE_TYPES else {"type": kind, "value": self.parameter(name)}
        return shown

    # --- variables ---------------------------------------------------------------------------------------

    def _variable_definitions(self) -> dict[str, Any]:
        raw = self.template.get("variables") or {}
        if not isinstance(raw, dict):
            raise TemplateError("The template's 'variables' must be an object.", "template.variables")
        return raw

    def variable(self, name: str) -> Any:
        definitions = self._variable_definitions()
        copies = definitions.get("copy")
        loop_names = {c.get("name", ""): c for c in copies if isinstance(c, dict)} if isinstance(copies, list) else {}
        key = next((n for n in list(definitions) + list(loop_names) if n.lower() == name.lower() and n != "copy"), None)
        if key is None:
            raise TemplateError(f"The template variable '{name}' is not found.")
        if key in self._variable_values:
            return self._variable_values[key]
        marker = "variable:" + key
        if marker in self._evaluating:
            raise TemplateError(f"The template variable '{key}' refers to itself.")
        self._evaluating.add(marker)
        try:
            if key in definitions:
                value = evaluate_value(definitions[key], self.scope, f"template.variables.{key}")
            else:
                copy = loop_names[key]
                where = "template.variables.copy"
                count = copy_count(evaluate_value(copy.get("count"), self.scope, f"{where}.count"), f"{where}.count")
                value = [
                    evaluate_value(copy.get("input"), self.scope.with_copy(key, i), f"{where}.input")
                    for i in range(count)
                ]
        finally:
            self._evaluating.discard(marker)
        self._variable_values[key] = value
        return value

    # --- resources ---------------------------------------------------------------------------------------

    def _id_by_name(self, name: str) -> str | None:
        matches = [r for r in self._all if r.name.lower() == name.lower()]
        return matches[0].id if len(matches) == 1 else None

    def _plan(self) -> list[ResourceInstance]:
        raw = self.template.get("resources")
        if raw is None:
            raw = []
        if not isinstance(raw, list):
            raise TemplateError(
                "The template's 'resources' must be an array (symbolic-name templates, languageVersion 2.0, are not "
                "supported).",
                "template.resources",
            )
        self._all = []
        self._loops: dict[str, list[ResourceInstance]] = {}
        self._skipped: set[str] = set()
        self._expand(raw, "template.resources", None, self.scope)
        if len(self._all) > MAX_RESOURCES:
            raise TemplateError(f"The template has more than {MAX_RESOURCES} resources.", "template.resources")
        self._resolve_dependencies()
        return self._ordered()

    def _expand(self, resources: list[Any], path: str, parent: ResourceInstance | None, scope: Scope) -> None:
        for position, resource in enumerate(resources):
            where = f"{path}[{position}]"
            if not isinstance(resource, dict):
                raise TemplateError("A resource must be an object.", where)
            for instance_scope, loop in self._instances(resource, scope, where):
                condition = evaluate_value(resource.get("condition", True), instance_scope, f"{where}.condition")
                if not isinstance(condition, bool):
                    raise TemplateError("A resource's condition must be a Boolean.", f"{where}.condition")
                instance = self._instance(resource, instance_scope, where, parent, loop)
                children = resource.get("resources")
                if not condition or (parent is not None and parent.id in self._skipped):
                    self._skipped.add(instance.id.lower())
                    self._skipped.add(instance.id)
                    continue
                self._all.append(instance)
                if len(self._all) > MAX_RESOURCES:
                    raise TemplateError(f"The template has more than {MAX_RESOURCES} resources.", where)
                if loop is not None:
                    self._loops.setdefault(loop.lower(), []).append(instance)
                if children is not None:
                    if not isinstance(children, list):
                        raise TemplateError("A resource's 'resources' must be an array.", f"{where}.resources")
                    self._expand(children, f"{where}.resources", instance, instance_scope)

    @staticmethod
    def _instances(resource: dict[str, Any], scope: Scope, where: str) -> Iterator[tuple[Scope, str | None]]:
        copy = resource.get("copy")
        if copy is None:
            yield scope, None
            return
        if not isinstance(copy, dict) or not isinstance(copy.get("name"), str) or not copy["name"]:
            raise TemplateError("A resource's copy needs a 'name' and a 'count'.", f"{where}.copy")
        count = copy_count(evaluate_value(copy.get("count"), scope, f"{where}.copy.count"), f"{where}.copy.count")
        mode = copy.get("mode", "Parallel")
        if not isinstance(mode, str) or mode.lower() not in ("parallel", "serial"):
            raise TemplateError("A copy's mode is Parallel or Serial.", f"{where}.copy.mode")
        for index in range(count):
            yield scope.with_copy(copy["name"], index, resource_loop=True), copy["name"]

    def _instance(
        self, resource: dict[str, Any], scope: Scope, where: str, parent: ResourceInstance | None, loop: str | None
    ) -> ResourceInstance:
        resource_type = evaluate_value(resource.get("type"), scope, f"{where}.type")
        name = evaluate_value(resource.get("name"), scope, f"{where}.name")
        if not isinstance(resource_type, str) or not resource_type.strip("/"):
            raise TemplateError("A resource needs a 'type'.", f"{where}.type")
        if not isinstance(name, str) or not name:
            raise TemplateError("A resource needs a 'name' (a non-empty string).", f"{where}.name")
        resource_type = resource_type.strip("/")
        if parent is not None:
            if "/" not in resource_type or "." not in resource_type.split("/")[0]:
                resource_type = f"{parent.type}/{resource_type}"
            if "/" not in name:
                name = f"{parent.name}/{name}"
        segments = resource_type.split("/")
        if len(segments) < 2 or "." not in segments[0]:
            raise TemplateError(f"The resource type '{resource_type}' is not valid.", f"{where}.type")
        if len(name.split("/")) != len(segments) - 1:
            raise TemplateError(
                f"The resource name '{name}' of type '{resource_type}' must have {len(segments) - 1} segment(s).",
                f"{where}.name",
            )
        api_version = evaluate_value(resource.get("apiVersion"), scope, f"{where}.apiVersion")
        if api_version is not None and not isinstance(api_version, str):
            raise TemplateError("A resource's apiVersion must be a string.", f"{where}.apiVersion")
        depends = resource.get("dependsOn") or []
        if not isinstance(depends, list):
            raise TemplateError("A resource's dependsOn must be an array.", f"{where}.dependsOn")
        depends_raw = [evaluate_value(d, scope, f"{where}.dependsOn[{i}]") for i, d in enumerate(depends)]
        if not all(isinstance(d, str) for d in depends_raw):
            raise TemplateError("dependsOn lists resource names or ids.", f"{where}.dependsOn")
        env = self.environment
        group_id = f"/subscriptions/{env.subscription_id}/resourceGroups/{env.resource_group['name']}"
        scope_key = next((key for key in resource if key.lower() == "scope"), None)
        scope_id = group_id if scope_key is None else self._scope_id(resource[scope_key], scope, f"{where}.scope")
        instance = ResourceInstance(
            type=resource_type,
            name=name,
            id=f"{scope_id}/{provider_path(resource_type, name)}",
            scope_id=scope_id,
            api_version=api_version,
            definition={k: v for k, v in resource.items() if k.lower() != "resources"},
            scope=scope,
            path=where,
            loop=loop,
            depends_on_raw=depends_raw,
        )
        if parent is not None:
            instance.depends_on.append(parent.id)
        return instance

    def _scope_id(self, raw: Any, scope: Scope, where: str) -> str:
        """The id of the resource an extension resource's ``scope`` names: a resource id, or the relative form
        ``Namespace/type/name`` (what Bicep writes) of a resource of the deployment's group. Deploying to another
        group or subscription is not supported (TemplateError)."""
        value = evaluate_value(raw, scope, where)
        if not isinstance(value, str) or not value.strip("/"):
            raise TemplateError("A resource's scope must be a resource id (a non-empty string).", where)
        env = self.environment
        group_id = f"/subscriptions/{env.subscription_id}/resourceGroups/{env.resource_group['name']}"
        if value.startswith("/"):
            trimmed = value.rstrip("/")
            if trimmed.lower() == group_id.lower():
                return group_id
            if not trimmed.lower().startswith(group_id.lower() + "/providers/"):
                raise TemplateError(
                    f"The scope '{value[:200]}' is outside the deployment's resource group '{group_id}': deploying "
                    "to another scope is not supported by this emulator.",
                    where,
                )
            return group_id + trimmed[len(group_id) :]
        parts = value.strip("/").split("/")
        if len(parts) < 3 or len(parts) % 2 == 0 or "." not in parts[0]:
            raise TemplateError(
                f"The scope '{value[:200]}' is not a resource id nor a resource's 'Namespace/type/name'.", where
            )
        return resource_id(
            env.subscription_id, env.resource_group["name"], "/".join([parts[0], *parts[1::2]]), "/".join(parts[2::2])
        )

    def _resolve_dependencies(self) -> None:
        by_id = {r.id.lower(): r for r in self._all}
        for instance in self._all:
            extended = by_id.get(instance.scope_id.lower())  # an extension resource deploys after what it extends
            if extended is not None and extended.id not in instance.depends_on:
                instance.depends_on.append(extended.id)
            for raw in instance.depends_on_raw:
                targets = self._dependency_targets(raw, by_id)
                if targets is None:
                    if raw.lower() in self._skipped or any(
                        s.lower().endswith("/" + raw.lower()) for s in self._skipped
                    ):
                        continue  # a resource whose condition is false: nothing to wait for
                    raise TemplateError(
                        f"The resource '{raw}' is not defined in the template.", f"{instance.path}.dependsOn"
                    )
                for target in targets:
                    if target.id != instance.id and target.id not in instance.depends_on:
                        instance.depends_on.append(target.id)

    def _dependency_targets(self, raw: str, by_id: dict[str, ResourceInstance]) -> list[ResourceInstance] | None:
        key = raw.lower().strip("/")
        if ("/" + key) in by_id:
            return [by_id["/" + key]]
        if key in self._loops:
            return self._loops[key]
        matches = [
            r
            for r in self._all
            if r.name.lower() == key
            or f"{r.type}/{r.name}".lower() == key
            or r.id.lower().endswith("/" + key)
            and "/providers/" in r.id.lower()
            and key.count("/") >= 1
        ]
        if not matches:
            matches = [r for r in self._all if r.name.lower().split("/")[-1] == key]
        return matches or None

    def _ordered(self) -> list[ResourceInstance]:
        by_id = {r.id: r for r in self._all}
        done: set[str] = set()
        visiting: set[str] = set()
        ordered: list[ResourceInstance] = []

        def visit(instance: ResourceInstance, trail: list[str]) -> None:
            if instance.id in done:
                return
            if instance.id in visiting:
                cycle = " -> ".join([*trail, instance.name])
                raise TemplateError(f"Deployment template validation failed: circular dependency {cycle}.")
            visiting.add(instance.id)
            for dependency in instance.depends_on:
                if dependency in by_id:
                    visit(by_id[dependency], [*trail, instance.name])
            visiting.discard(instance.id)
            done.add(instance.id)
            ordered.append(instance)

        for instance in self._all:
            visit(instance, [])
        # the same resource twice (same id) is one resource, as ARM merges them
        seen: set[str] = set()
        unique: list[ResourceInstance] = []
        for instance in ordered:
            if instance.id.lower() in seen:
                raise TemplateError(f"The resource '{instance.id}' is defined more than once in the template.")
            seen.add(instance.id.lower())
            unique.append(instance)
        return unique

    def body_of(self, instance: ResourceInstance) -> dict[str, Any]:
        """The resource's body (location, tags, sku, kind, properties…) evaluated now."""
        return {
            key: evaluate_value(value, instance.scope, f"{instance.path}.{key}")
            for key, value in instance.definition.items()
            if key.lower() not in _TEMPLATE_MEMBERS
        }

    # --- outputs -----------------------------------------------------------------------------------------

    def outputs(self) -> dict[str, Any]:
        """``{name: {type, value}}`` evaluated now (secure outputs show their type only)."""
        raw = self.template.get("outputs") or {}
        if not isinstance(raw, dict):
            raise TemplateError("The template's 'outputs' must be an object.", "template.outputs")
        result: dict[str, Any] = {}
        for name, output in raw.items():
            where = f"template.outputs.{name}"
            if not isinstance(output, dict):
                raise TemplateError("An output must be an object.", where)
            condition = evaluate_value(output.get("condition", True), self.scope, f"{where}.condition")
            if condition is not True:
                continue
            kind = str(output.get("type", "string"))
            shown = PARAMETER_TYPES.get(kind.lower(), kind)
            if "copy" in output and isinstance(output["copy"], dict):
                copy = output["copy"]
                count = copy_count(evaluate_value(copy.get("count"), self.scope, f"{where}.copy.count"), where)
                value = [
                    evaluate_value(copy.get("input"), self.scope.with_copy("", i), f"{where}.copy.input")
                    for i in range(count)
                ]
            else:
                value = evaluate_value(output.get("value"), self.scope, f"{where}.value")
            result[name] = {"type": shown} if shown in SECURE_TYPES else {"type": shown, "value": value}
        return result

    def output_types_check(self) -> None:
        """Static check of the outputs' shape (preflight)."""
        raw = self.template.get("outputs") or {}
        if not isinstance(raw, dict):
            raise TemplateError("The template's 'outputs' must be an object.", "template.outputs")
