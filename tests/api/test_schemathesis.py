"""schemathesis against the Microsoft.Scheduler 2016-03-01 contract, as sdk_openapi.py rebuilds it from the
official SDK (azure-mgmt-scheduler 7.0.0, generated from the official scheduler.json, which may not be committed
here), served at the test server's host and scheme: every operation gets generated valid and invalid requests,
against existing resources and arbitrary names. No answer may be a server error; responses must conform to the
schemas except for the deviations listed in ALLOWED_VIOLATIONS (each with its reason)."""

from __future__ import annotations

import json
import os
import time
from typing import Any
from urllib.parse import urlsplit

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
    # SPEC §2: enumerations are answered in the service's spelling ("enabled", "week", "fixed": recorded), the
    # action type as the client sent it ("http"), as the real service did; the SDK enums are PascalCase.
    "is not one of": "enumerations are answered as Azure wrote them (recorded), not as the SDK spells them",
}


def _count(violations: dict[str, int], label: str, text: str) -> None:
    """Count one failed check under the allowed deviation it matches, or under its own text."""
    allowed = next((key for key in ALLOWED_VIOLATIONS if key in text), None)
    key = allowed or f"{label}: {text[:400]}"
    violations[key] = violations.get(key, 0) + 1


def _spec(server: ServerProcess) -> dict[str, Any]:
    parts = urlsplit(server.url)
    spec = build_spec(parts.netloc, parts.scheme)
    assert spec["info"]["version"] == API, spec["info"]
    return spec


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


# The pinned names, and the cases hypothesis generated for them (per operation and variant): derandomized, so every
# store was always sent the same cases; they are generated once per run (generation is most of the cost) and sent
# over HTTP to each store's server in turn.
_PINNED_NAMES = Names()
_GENERATED: list[list[Any]] = []


def _pinned() -> dict[str, str]:
    return {
        "subscriptionId": _PINNED_NAMES.subscription,
        "resourceGroupName": _PINNED_NAMES.resource_group,
        "jobCollectionName": _PINNED_NAMES.collection,
        "jobName": "victim",
    }


def _generated_cases(server: ServerProcess) -> list[list[Any]]:
    """Per operation, a valid variant on the pinned (existing) resources, an invalid one, and a valid one on
    arbitrary names: EXAMPLES cases each (fewer where hypothesis runs out of distinct ones)."""
    if _GENERATED:
        return _GENERATED
    import schemathesis
    from hypothesis import HealthCheck, Phase, given, settings
    from schemathesis import GenerationMode

    schema = schemathesis.openapi.from_dict(_spec(server))
    pinned = _pinned()
    generated: list[list[Any]] = []
    for result in schema.get_all_operations():
        operation = result.ok()
        params = {name: value for name, value in pinned.items() if f"{{{name}}}" in operation.path}
        variants = [
            operation.as_strategy(GenerationMode.POSITIVE, path_parameters=params, query={"api-version": API}),
            operation.as_strategy(GenerationMode.NEGATIVE, path_parameters=params),
            operation.as_strategy(GenerationMode.POSITIVE),
        ]
        for strategy in variants:
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
                cases.append(case)  # noqa: B023 - run at once, for this variant

            collect()
            generated.append(cases)
    _GENERATED[:] = generated
    return _GENERATED


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

    generated = _generated_cases(server)
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
        f"schemathesis sent {sent} requests in {time.perf_counter() - started:.1f} s ({generating:.1f} s generating "
        f"them, {in_calls:.1f} s waiting for answers); {len(server_errors)} server errors; violations {violations}"
    )
    assert not server_errors, "\n".join(server_errors[:20])
    unexplained = {key: count for key, count in violations.items() if key not in ALLOWED_VIOLATIONS}
    assert not unexplained, json.dumps(unexplained, indent=1)[:4000]
    assert sent >= 15 * 3 * min(EXAMPLES, 100) // 2, sent
