"""schemathesis against the Microsoft.Scheduler 2016-03-01 contract, as sdk_openapi.py rebuilds it from the
official SDK (azure-mgmt-scheduler 7.0.0, generated from the official scheduler.json, which may not be committed
here), served at the test server's host and scheme: every operation gets generated valid and invalid requests,
against existing resources and arbitrary names. No answer may be a server error; responses must conform to the
schemas except for the deviations listed in ALLOWED_VIOLATIONS (each with its reason)."""

from __future__ import annotations

import base64
import gzip
import hashlib
import importlib.metadata
import json
import os
import time
from pathlib import Path
from typing import Any

import requests
from support.api_calls import collection_body, create_collection, create_job, job_body
from support.api_client import API
from support.names import Names
from support.sdk_openapi import build_spec
from support.server import ServerProcess

# per operation and variant: 150 make ~5,400 requests per store, so CI sends more than 10,000 over both (issue 13)
EXAMPLES = int(os.environ.get("SCHEDULER_TEST_SCHEMATHESIS_EXAMPLES", "150"))

# Contract deviations the emulator keeps on purpose, by a substring of schemathesis' failure text.
# Only response bodies are checked against schemas: the spec documents no error responses (every 4xx
# would be "undocumented"), and body-less 200s rightly carry no Content-Type.
ALLOWED_VIOLATIONS: dict[str, str] = {
    # docs/reference/arm-api.md#enumerations: enumerations are answered in the service's spelling ("enabled", "week",
    # "fixed": recorded), the action type as the client sent it ("http"), as the real service did; the SDK enums are
    # PascalCase.
    "is not one of": "enumerations are answered as Azure wrote them (recorded), not as the SDK spells them",
}


def _count(violations: dict[str, int], label: str, text: str) -> None:
    """Count one failed check under the allowed deviation it matches, or under its own text."""
    allowed = next((key for key in ALLOWED_VIOLATIONS if key in text), None)
    key = allowed or f"{label}: {text[:400]}"
    violations[key] = violations.get(key, 0) + 1


def test_sdk_contract_covers_the_api():
    """The document sdk_openapi.py reads out of the SDK: all 15 operations, with their parameters and models."""
    spec = build_spec("scheduler.example.test", "https")
    operations = {op["operationId"]: op for path in spec["paths"].values() for op in path.values()}
    assert len(operations) == 15, sorted(operations)
    top = next(p for p in operations["Jobs_ListJobHistory"]["parameters"] if p["name"] == "$top")
    assert (top["in"], top["required"], top["minimum"], top["maximum"]) == ("query", False, 1, 100)
    assert operations["Jobs_CreateOrUpdate"]["responses"]["201"]["schema"] == {"$ref": "#/definitions/JobDefinition"}
    assert set(operations["JobCollections_Delete"]["responses"]) == {"200", "202"}
    definitions = spec["definitions"]
    assert definitions["HttpAuthentication"]["discriminator"] == "type"
    assert definitions["JobDefinition"]["properties"]["id"]["readOnly"] is True
    assert "Saturday" in definitions["JobRecurrenceSchedule"]["properties"]["weekDays"]["items"]["enum"]
    assert definitions["JobRecurrenceScheduleMonthlyOccurrence"]["properties"]["Occurrence"] == {"type": "integer"}


# The pinned names, and the cases hypothesis generates for them (per operation and variant). Generation is
# derandomized and blind to the suite's own modules (see _generate): for one contract, one set of names and one
# version of hypothesis and schemathesis it gives the same cases, and it was most of the module's cost (about a
# minute of CPU). So the cases are stored in CASES_FILE under a key of all four and read back as the same requests
# (test_stored_cases_are_what_generation_gives generates two operations' variants afresh and compares); they are
# generated afresh whenever the key differs. To write the file anew, run this module with
# SCHEDULER_TEST_SCHEMATHESIS_STORE=1. Each store's server is sent them over HTTP in turn.
_PINNED_NAMES = Names(
    subscription="5c4e3a2b-7d1f-4e6a-9b8c-0d2e4f6a8b1c", resource_group="rg-schemathesis", collection="jc-schemathesis"
)
CASES_FILE = Path(__file__).with_name("schemathesis_cases.json.gz")
_SPEC_HOST = ("scheduler.example.test", "https")  # where the generated requests are sent instead: case.call's base_url
_GENERATED: list[list[Any]] = []


def _pinned() -> dict[str, str]:
    return {
        "subscriptionId": _PINNED_NAMES.subscription,
        "resourceGroupName": _PINNED_NAMES.resource_group,
        "jobCollectionName": _PINNED_NAMES.collection,
        "jobName": "victim",
    }


def _schema() -> tuple[Any, str]:
    """The contract as schemathesis reads it, and the key of the cases generated from it."""
    import hypothesis
    import schemathesis

    spec = build_spec(*_SPEC_HOST)
    assert spec["info"]["version"] == API, spec["info"]
    material = {
        "spec": spec,
        "pinned": _pinned(),
        "examples": EXAMPLES,
        "hypothesis": hypothesis.__version__,
        "schemathesis": importlib.metadata.version("schemathesis"),
    }
    key = hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()
    return schemathesis.openapi.from_dict(spec), key


def _variants(operation: Any) -> list[Any]:
    """A valid variant on the pinned (existing) resources, an invalid one, and a valid one on arbitrary names."""
    from schemathesis import GenerationMode

    params = {name: value for name, value in _pinned().items() if f"{{{name}}}" in operation.path}
    return [
        operation.as_strategy(GenerationMode.POSITIVE, path_parameters=params, query={"api-version": API}),
        operation.as_strategy(GenerationMode.NEGATIVE, path_parameters=params),
        operation.as_strategy(GenerationMode.POSITIVE),
    ]


def _generate(strategy: Any) -> list[Any]:
    """EXAMPLES cases of one variant (fewer where hypothesis runs out of distinct ones). Hypothesis mixes into what
    it draws the literals of every local module imported so far (``providers._get_local_constants``), so the cases
    depended on which of the suite's modules the worker had loaded (a full run's differed from this module's
    alone); here it is given none."""
    from unittest import mock

    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis.internal.conjecture import providers
    from hypothesis.internal.floats import float_to_int
    from sortedcontainers import SortedSet

    def no_local_constants() -> Any:
        return providers.Constants(
            integers=SortedSet(), floats=SortedSet(key=float_to_int), bytes=SortedSet(), strings=SortedSet()
        )

    cases: list[Any] = []

    @settings(
        max_examples=EXAMPLES,
        phases=[Phase.generate],
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    @given(case=strategy)
    def collect(case: Any) -> None:
        cases.append(case)

    with mock.patch.object(providers, "_get_local_constants", no_local_constants):
        collect()
    return cases


def _stored(case: Any) -> dict[str, Any]:
    from schemathesis.core import NotSet

    kept = {
        "operation": case.operation.label,
        "path_parameters": case.path_parameters,
        "headers": dict(case.headers) if case.headers is not None else None,
        "cookies": case.cookies,
        "query": case.query,
        "media_type": case.media_type,
    }
    if isinstance(case.body, bytes):
        kept["body_base64"] = base64.b64encode(case.body).decode()
    elif not isinstance(case.body, NotSet):
        kept["body"] = case.body
    return kept


def _case(operations: dict[str, Any], kept: dict[str, Any]) -> Any:
    body: dict[str, Any] = {}
    if "body_base64" in kept:
        body["body"] = base64.b64decode(kept["body_base64"])
    elif "body" in kept:
        body["body"] = kept["body"]
    return operations[kept["operation"]].Case(
        path_parameters=kept["path_parameters"],
        headers=kept["headers"],
        cookies=kept["cookies"],
        query=kept["query"],
        media_type=kept["media_type"],
        **body,
    )


def _read_stored(key: str) -> list[list[dict[str, Any]]] | None:
    if not CASES_FILE.exists():
        return None
    stored = json.loads(gzip.decompress(CASES_FILE.read_bytes()))
    return stored["variants"] if stored["key"] == key else None


def _generated_cases() -> list[list[Any]]:
    """Per operation and variant, its cases: read from CASES_FILE when its key matches, else generated."""
    if _GENERATED:
        return _GENERATED
    schema, key = _schema()
    operations = [result.ok() for result in schema.get_all_operations()]
    storing = os.environ.get("SCHEDULER_TEST_SCHEMATHESIS_STORE") == "1"
    stored = None if storing else _read_stored(key)
    if stored is not None:
        by_label = {operation.label: operation for operation in operations}
        _GENERATED[:] = [[_case(by_label, kept) for kept in variant] for variant in stored]
        return _GENERATED
    _GENERATED[:] = [_generate(strategy) for operation in operations for strategy in _variants(operation)]
    if storing:
        variants = [[_stored(case) for case in variant] for variant in _GENERATED]
        CASES_FILE.write_bytes(gzip.compress(json.dumps({"key": key, "variants": variants}).encode(), 9, mtime=0))
    else:
        print(
            f"{CASES_FILE.name} is not for this contract and these versions: the cases were generated (to store "
            "them: SCHEDULER_TEST_SCHEMATHESIS_STORE=1)"
        )
    return _GENERATED


def _request(case: Any) -> dict[str, Any]:
    """What a case sends, but for the random test-case id schemathesis adds to each."""
    sent = case.as_transport_kwargs(base_url="https://scheduler.example.test")
    sent["headers"] = {k: v for k, v in sent["headers"].items() if k != "X-Schemathesis-TestCaseId"}
    return sent


def test_stored_cases_are_what_generation_gives():
    """The stored cases are the ones generation gives: the first two operations' variants generated afresh send
    the same requests."""
    schema, key = _schema()
    stored = _read_stored(key)
    assert stored is not None, (
        f"{CASES_FILE.name} is not for this contract and these versions of hypothesis and schemathesis: "
        "store it anew with SCHEDULER_TEST_SCHEMATHESIS_STORE=1"
    )
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(stored) == 3 * len(operations)
    by_label = {operation.label: operation for operation in operations}
    fresh = [_generate(strategy) for operation in operations[:2] for strategy in _variants(operation)]
    for index, cases in enumerate(fresh):  # valid and invalid variants of two operations
        assert [_request(case) for case in cases] == [_request(_case(by_label, kept)) for kept in stored[index]]


def test_generated_requests_never_get_a_server_error(server: ServerProcess):
    from schemathesis.checks import response_schema_conformance

    names = _PINNED_NAMES
    pinned = _pinned()
    session = requests.Session()
    session.verify = str(server.cert_path) if server.cert_path else True
    sent = 0
    in_calls = 0.0
    started = time.perf_counter()
    server_errors: list[str] = []
    violations: dict[str, int] = {}

    def restore() -> None:
        with server.client() as client:
            client.put(names.collection_path, params={"api-version": API}, json=collection_body())
            if client.get(names.job_path("victim"), params={"api-version": API}).status_code != 200:
                create_job(client, names, "victim", job_body())

    with server.client() as client:
        create_collection(client, names)
        create_job(client, names, "victim", job_body())

    generated = _generated_cases()
    generating = time.perf_counter() - started
    for cases in generated:
        restore()
        for case in cases:
            began = time.perf_counter()
            response = case.call(base_url=server.url, session=session, timeout=30, verify=session.verify)
            sent += 1
            in_calls += time.perf_counter() - began
            label = f"{case.method} {case.formatted_path}"
            if response.status_code >= 500:
                server_errors.append(f"{label}: {response.status_code} {response.text[:300]}")
                continue
            on_victims = all(pinned.get(k) == v for k, v in (case.path_parameters or {}).items())
            if response.status_code < 300 and on_victims:
                try:
                    case.validate_response(response, checks=[response_schema_conformance])
                except BaseExceptionGroup as group:  # several distinct failures: schemathesis' FailureGroup
                    for failure in group.exceptions:
                        _count(violations, label, str(failure))
                except Exception as exc:  # noqa: BLE001 - a failed check is what is recorded
                    _count(violations, label, str(exc))
    print(
        f"schemathesis sent {sent} requests in {time.perf_counter() - started:.1f} s ({generating:.1f} s reading or "
        f"generating them, {in_calls:.1f} s waiting for answers); {len(server_errors)} server errors; "
        f"violations {violations}"
    )
    assert not server_errors, "\n".join(server_errors[:20])
    unexplained = {key: count for key, count in violations.items() if key not in ALLOWED_VIOLATIONS}
    assert not unexplained, json.dumps(unexplained, indent=1)[:4000]
    assert sent >= 15 * 3 * min(EXAMPLES, 100) // 2, sent
