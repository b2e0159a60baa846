"""The hostile-input corpus (hostile_cases.py) against a started server on each store: every case is
answered with a client error in the ARM error shape, nothing stored changes, and lists still answer."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from support.api_calls import collection_body, create_collection, create_job, expect_ok, get, job_body, snapshot
from support.hostile_cases import CASES
from support.names import Names
from support.raw_http import RawClient
from support.server import ServerProcess


@pytest.fixture(scope="module")
def victims(server: ServerProcess) -> Iterator[Names]:
    """A collection holding one job, which the cases try to change."""
    names = Names()
    with server.client() as client:
        create_collection(client, names)
        create_job(client, names, "victim", job_body())
    yield names


def _paths(names: Names) -> dict[str, str]:
    return {
        "{rg}": names.rg_path,
        "{jc}": names.collection_path,
        "{job}": names.job_path("victim"),
        "{sub}": names.subscription,
    }


def _stored(client: Any, names: Names) -> list[tuple[int, Any]]:
    """Everything a client can read about the victims and their neighbourhood."""
    return snapshot(
        client,
        (
            names.collection_path,
            names.job_path("victim"),
            names.collection_path + "/jobs",
            names.job_path("victim") + "/history",
            names.rg_path + "/jobCollections",
            f"/subscriptions/{names.subscription}/providers/Microsoft.Scheduler/jobCollections",
            names.collection_path + "/jobs/fresh-job",
            names.rg_path + "/jobCollections/fresh-collection",
        ),
    )


def _problem(case: dict[str, Any], status: int, data: bytes, content_type: str) -> str | None:
    """Why the answer to ``case`` is wrong, or None."""
    expected = case["status"]
    if expected == "4xx":
        if not 400 <= status < 500:
            return f"status {status}, expected a 4xx"
    elif status != expected:
        return f"status {status}, expected {expected}"
    if not content_type.startswith("application/json"):
        return f"content type {content_type!r}"
    try:
        body = json.loads(data)
    except ValueError:
        return f"body is not JSON: {data[:200]!r}"
    error = body.get("error") if isinstance(body, dict) else None
    if set(body) != {"error"} or not isinstance(error, dict) or not error.get("code") or not error.get("message"):
        return f"not the ARM error shape: {body}"
    if case["code"] is not None and error["code"] != case["code"]:
        return f"code {error['code']}, expected {case['code']}"
    return None


def test_the_corpus_is_large_and_varied():
    ids = [case["id"] for case in CASES]
    assert len(ids) == len(set(ids)), "case ids repeat"
    assert len(CASES) >= 500
    categories = {case_id.split(":")[0].split("-")[0] for case_id in ids}
    assert {"job0", "collection", "preview", "body", "name", "content", "query", "size", "rule"} <= categories


def test_every_hostile_request_is_refused_and_changes_nothing(server: ServerProcess, victims: Names):
    paths = _paths(victims)
    raw = RawClient(server)
    with server.client() as client:
        before = _stored(client, victims)
        problems = []
        for case in CASES:
            path = case["path"]
            for placeholder, value in paths.items():
                path = path.replace(placeholder, value)
            target = path + (f"?{case['query']}" if case["query"] else "")
            body = case["body"].encode("utf-8", "surrogateescape") if case["body"] is not None else None
            status, data, content_type = raw.request(case["method"], target, case["headers"], body)
            problem = _problem(case, status, data, content_type)
            if problem:
                problems.append(f"{case['id']}: {problem}: {data[:300]!r}")
        raw.close()
        after = _stored(client, victims)
        assert not problems, f"{len(problems)} of {len(CASES)} cases answered wrongly:\n" + "\n".join(problems)
        assert after == before
        # lists still answer, the victim is still readable and still replaceable
        for listing in (victims.collection_path + "/jobs", victims.rg_path + "/jobCollections"):
            expect_ok(get(client, listing))
        expect_ok(
            client.put(victims.collection_path, params={"api-version": "2016-03-01"}, json=collection_body()), 201
        )
