"""Helpers shared by the raw-HTTP API tests: requests with an api-version, ARM error assertions, the
"a rejected request leaves the stored data unchanged" check, and valid bodies to start from."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx

from support.api_client import API
from support.api_client import create_job as put_new_job
from support.names import Names
from support.times import iso_seconds as iso

LOOPBACK_URI = "http://127.0.0.1:9/scheduler-test"
ACCEPTED_API_VERSIONS = ("2016-03-01", "2016-01-01", "2014-08-01-preview")


# --------------------------------------------------------------------------------------------- requests
def call(
    http: httpx.Client,
    method: str,
    path: str,
    body: Any = None,
    *,
    content: str | bytes | None = None,
    params: dict[str, str] | None = None,
    api_version: str | None = API,
    headers: dict[str, str] | None = None,
) -> httpx.Response:
    """One request with ``api-version`` (unless None); ``body`` is sent as JSON, ``content`` as is."""
    query = dict(params or {})
    if api_version is not None:
        query["api-version"] = api_version
    kwargs: dict[str, Any] = {"params": query, "headers": headers}
    if content is not None:
        kwargs["content"] = content
        kwargs["headers"] = {"content-type": "application/json", **(headers or {})}
    elif body is not None:
        kwargs["json"] = body
    return http.request(method, path, **kwargs)


def get(http: httpx.Client, path: str, **params: str) -> httpx.Response:
    return call(http, "GET", path, params=params)


def put(http: httpx.Client, path: str, body: Any) -> httpx.Response:
    return call(http, "PUT", path, body)


def patch(http: httpx.Client, path: str, body: Any) -> httpx.Response:
    return call(http, "PATCH", path, body)


def post(http: httpx.Client, path: str) -> httpx.Response:
    return call(http, "POST", path)


def delete(http: httpx.Client, path: str) -> httpx.Response:
    return call(http, "DELETE", path)


# ------------------------------------------------------------------------------------------- assertions
def assert_arm_error(
    response: httpx.Response,
    status: int,
    code: str,
    target: str | None = None,
    *,
    message_contains: str | None = None,
) -> dict[str, Any]:
    """``response`` is the ARM error ``{"error": {"code", "message", "target"?}}`` with this status/code.

    With ``target``, the error names that field path both as ``target`` and in its message."""
    assert response.status_code == status, f"expected {status}, got {response.status_code}: {response.text}"
    assert response.headers.get("content-type", "").startswith("application/json"), response.headers
    body = response.json()
    assert isinstance(body, dict) and set(body) == {"error"}, body
    error = body["error"]
    assert "detail" not in error, body
    assert error.get("code") == code, body
    assert isinstance(error.get("message"), str) and error["message"].strip(), body
    assert set(error) <= {"code", "message", "target", "details"}, body
    if target is not None:
        assert error.get("target") == target, body
        assert target in error["message"], body
    if message_contains is not None:
        assert message_contains in error["message"], body
    return error


def expect_ok(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, f"expected {status}, got {response.status_code}: {response.text}"
    return response.json() if response.content else None


def snapshot(http: httpx.Client, paths: tuple[str, ...]) -> list[tuple[int, Any]]:
    """(status, body) of a GET of each path."""
    result = []
    for path in paths:
        response = get(http, path)
        result.append((response.status_code, response.json() if response.content else None))
    return result


@contextmanager
def unchanged(http: httpx.Client, *paths: str) -> Iterator[list[tuple[int, Any]]]:
    """Asserts that GETs of ``paths`` answer exactly the same before and after the block (a rejected
    request must not change stored data)."""
    before = snapshot(http, paths)
    yield copy.deepcopy(before)
    after = snapshot(http, paths)
    for path, old, new in zip(paths, before, after, strict=True):
        assert new == old, f"GET {path} changed after a rejected request:\nbefore {old}\nafter  {new}"


# ------------------------------------------------------------------------------------------------ bodies
def future(days: float = 7) -> str:
    """A start time well ahead, on a whole hour, so nothing fires while a test runs."""
    moment = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) + timedelta(days=days)
    return iso(moment)


def http_action(
    uri: str = LOOPBACK_URI,
    method: str = "GET",
    *,
    retryPolicy: dict[str, Any] | None = None,  # noqa: N803
    **request: Any,
) -> dict[str, Any]:
    """An Http action; keyword arguments other than ``retryPolicy`` go into its ``request``."""
    action: dict[str, Any] = {"type": "Http", "request": {"uri": uri, "method": method, **request}}
    if retryPolicy is not None:
        action["retryPolicy"] = retryPolicy
    return action


def job_properties(**overrides: Any) -> dict[str, Any]:
    """A valid job's properties: an hourly HTTP GET to a loopback port, starting a week from now."""
    properties: dict[str, Any] = {
        "startTime": future(),
        "action": http_action(),
        "recurrence": {"frequency": "Hour", "interval": 1},
    }
    properties.update(overrides)
    return {k: v for k, v in properties.items() if v is not None}


def job_body(**overrides: Any) -> dict[str, Any]:
    return {"properties": job_properties(**overrides)}


def collection_body(
    sku: str | None = "Standard", location: str = "westus", quota: dict[str, Any] | None = None, **extra: Any
) -> dict[str, Any]:
    properties: dict[str, Any] = {}
    if sku is not None:
        properties["sku"] = {"name": sku}
    if quota is not None:
        properties["quota"] = quota
    body: dict[str, Any] = {"location": location, "properties": properties}
    body.update(extra)
    return body


def create_collection(http: httpx.Client, names: Names, **kwargs: Any) -> dict[str, Any]:
    body = expect_ok(put(http, names.collection_path, collection_body(**kwargs)), 201)
    assert isinstance(body, dict)
    return body


def create_job(http: httpx.Client, names: Names, job: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    """PUT ``body`` (``job_body()`` unless told) as a new job of an existing collection; asserts 201."""
    body = body or job_body()
    assert set(body) == {"properties"}, f"only properties go into a job body: {body}"
    return put_new_job(http, names, job, ensure_collection=False, **body["properties"])


def list_all(http: httpx.Client, path: str, **params: str) -> tuple[list[dict[str, Any]], list[str]]:
    """Every item of a list, following ``nextLink``s; also the nextLinks seen."""
    response = get(http, path, **params)
    items: list[dict[str, Any]] = []
    links: list[str] = []
    for _ in range(1000):
        body = expect_ok(response)
        assert set(body) <= {"value", "nextLink"}, body
        items.extend(body["value"])
        link = body.get("nextLink")
        if link is None:
            return items, links
        links.append(link)
        response = http.get(link)
    raise AssertionError("nextLink chain does not end")
