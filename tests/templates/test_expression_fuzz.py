"""Expression fuzzing: whatever text sits between the brackets, parsing and evaluating it ends in a value or
a TemplateError (never another exception), and at the API a deployment carrying it is answered below 500."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.server import EmulatorPool, ServerProcess

from scheduler_emulator.templates.errors import NeedsDeployment, TemplateError
from scheduler_emulator.templates.evaluation import Environment, Scope, evaluate_value
from scheduler_emulator.templates.functions import FUNCTIONS, call_function

ENV = Environment(
    subscription_id="s1",
    tenant_id="t1",
    resource_group={"id": "/subscriptions/s1/resourceGroups/rg", "name": "rg", "location": "westus"},
    deployment={"name": "d"},
    now=datetime(2024, 1, 1, tzinfo=UTC),
)
VALUES: dict[str, Any] = {"s": "text", "n": 7, "a": [1, "x", {"k": True}], "o": {"k": [1, 2]}, "z": None}
NAMES = sorted(FUNCTIONS) + ["listKeys", "nope", "reference"]


class Deferring:
    def reference(self, resource_id: str, api_version: str | None, full: bool) -> Any:
        raise NeedsDeployment(resource_id)

    def list_action(self, action: str, resource_id: str, api_version: str | None) -> Any:
        raise NeedsDeployment(resource_id)


def _lookup(name: str) -> Any:
    if name not in VALUES:
        raise TemplateError(f"'{name}' is not found.")
    return VALUES[name]


SCOPE = Scope(environment=ENV, functions=call_function, parameter=_lookup, variable=_lookup, lookup=Deferring())

literals = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.text(max_size=12).map(lambda t: "'" + t.replace("'", "''") + "'"),
    st.sampled_from(
        [
            "'s'",
            "'n'",
            "'a'",
            "'o'",
            "'z'",
            "'P1D'",
            "'2020-01-01T00:00:00Z'",
            "'{0}{1}'",
            "'[1,2]'",
            "'{0:N99}'",
            "'P99999999999999D'",
            "'-P1Y'",
        ]
    ),
)


def _extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    calls = st.tuples(st.sampled_from(NAMES), st.lists(inner, max_size=4)).map(lambda t: f"{t[0]}({', '.join(t[1])})")
    members = st.tuples(inner, st.sampled_from(["k", "name", "location", "x"])).map(lambda t: f"{t[0]}.{t[1]}")
    indexes = st.tuples(inner, inner).map(lambda t: f"{t[0]}[{t[1]}]")
    return st.one_of(calls, members, indexes)


expressions = st.recursive(literals, _extend, max_leaves=12)
noise = st.text(alphabet=st.sampled_from(list("()[]',.ab01 -'")), max_size=30)


def _evaluates_or_refuses(text: str) -> None:
    with contextlib.suppress(TemplateError, NeedsDeployment):
        evaluate_value(f"[{text}]", SCOPE, "x")


@settings(max_examples=800, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expressions)
def test_generated_expressions_evaluate_or_raise_template_errors(text: str) -> None:
    _evaluates_or_refuses(text)


@settings(max_examples=800, deadline=None)
@given(st.one_of(noise, st.text(max_size=40)))
def test_arbitrary_text_parses_or_raises_template_errors(text: str) -> None:
    _evaluates_or_refuses(text)


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with EmulatorPool() as pool:
        yield pool.start(tmp_path_factory.mktemp("fuzz"), "--no-dispatcher", in_memory=True, log_level="warning")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.one_of(expressions, noise))
def test_the_api_never_answers_5xx_to_an_expression(api: ServerProcess, text: str) -> None:
    base = "/subscriptions/s1/resourceGroups/fuzz"
    template = {
        "resources": [
            {
                "type": "Microsoft.Scheduler/jobCollections",
                "apiVersion": "2016-03-01",
                "name": f"[{text}]",
                "location": "westus",
            }
        ],
        "outputs": {"o": {"type": "string", "value": f"[{text}]"}},
    }
    with httpx.Client(base_url=api.url, timeout=30) as http:
        http.put(base, params={"api-version": "2021-04-01"}, json={"location": "westus"})
        for action in ("/validate", ""):
            answer = http.request(
                "POST" if action else "PUT",
                f"{base}/providers/Microsoft.Resources/deployments/f{action}",
                params={"api-version": "2021-04-01"},
                content=json.dumps({"properties": {"mode": "Incremental", "template": template}}),
                headers={"content-type": "application/json"},
            )
            assert answer.status_code < 500, answer.text
