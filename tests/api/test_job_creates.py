"""A job create into a collection the serving process has written into before. On PostgreSQL a new job is read and
validated before its collection's write lock is taken and inserted by a guarded insert that checks the collection's
row version, the name and the job count (store.repository.insert_job_if_unchanged, service.jobs.put_locking_late).
What another process changes meanwhile must still rule the next create: a new quota, the collection deleted and
made again, a job of the same name. The in-process API (``app``) serves the creates; the session's server process
(``http``), on the same store, makes the changes."""

from __future__ import annotations

import httpx
from starlette.testclient import TestClient
from support.api_calls import (
    assert_arm_error,
    collection_body,
    create_collection,
    create_job,
    delete,
    expect_ok,
    get,
    http_action,
    job_body,
    list_all,
    put,
)
from support.names import Names


def _changed(response: httpx.Response) -> None:
    """A collection PUT by the other process went through (the service answers a replace 201 as well)."""
    assert response.status_code in (200, 201), response.text


def _job_names(client: httpx.Client, names: Names) -> list[str]:
    jobs, _ = list_all(client, names.collection_path + "/jobs")
    return sorted(job["name"].rsplit("/", 1)[-1] for job in jobs)


def test_a_quota_set_by_another_process_rules_the_next_create(app: TestClient, http: httpx.Client) -> None:
    names = Names()
    create_collection(app, names)
    create_job(app, names, "first")
    _changed(put(http, names.collection_path, collection_body(quota={"maxJobCount": 1})))
    assert_arm_error(put(app, names.job_path("second"), job_body()), 409, "Conflict", message_contains="holds 1 jobs")
    assert _job_names(app, names) == ["first"]
    _changed(put(http, names.collection_path, collection_body(quota={"maxJobCount": 2})))
    create_job(app, names, "second")  # the raised quota rules too
    assert _job_names(http, names) == ["first", "second"]


def test_the_job_limit_holds_for_creates_that_do_not_read_the_collection(app: TestClient, http: httpx.Client) -> None:
    names = Names()
    create_collection(app, names, quota={"maxJobCount": 3})
    create_job(app, names, "first")
    create_job(http, names, "by-the-other-process")
    create_job(app, names, "third")
    assert_arm_error(put(app, names.job_path("fourth"), job_body()), 409, "Conflict", message_contains="holds 3 jobs")
    assert _job_names(http, names) == ["by-the-other-process", "first", "third"]


def test_a_collection_deleted_and_made_again_by_another_process_gets_the_next_job(
    app: TestClient, http: httpx.Client
) -> None:
    names = Names()
    create_collection(app, names, sku="Standard")
    create_job(app, names, "old")
    expect_ok(delete(http, names.collection_path))
    create_collection(http, names, sku="P10Premium")
    created = create_job(app, names, "new")
    assert created["name"].endswith("/new")
    assert _job_names(http, names) == ["new"]
    # and the new collection's plan rules it: a P10Premium collection allows a one-minute recurrence
    every_minute = job_body(recurrence={"frequency": "Minute", "interval": 1})
    expect_ok(put(app, names.job_path("every-minute"), every_minute), 201)


def test_a_collection_deleted_by_another_process_is_not_found(app: TestClient, http: httpx.Client) -> None:
    names = Names()
    create_collection(app, names)
    create_job(app, names, "first")
    expect_ok(delete(http, names.collection_path))
    assert_arm_error(put(app, names.job_path("second"), job_body()), 404, "ResourceNotFound")
    assert get(http, names.collection_path).status_code == 404


def test_a_put_of_a_name_taken_after_a_create_replaces_that_job(app: TestClient, http: httpx.Client) -> None:
    names = Names()
    create_collection(app, names)
    create_job(app, names, "first")
    create_job(http, names, "Twin")
    replaced = put(app, names.job_path("twin"), job_body(recurrence={"frequency": "Hour", "interval": 2}))
    body = expect_ok(replaced, 200)
    assert body["name"].endswith("/Twin") and body["properties"]["recurrence"]["interval"] == 2
    assert _job_names(http, names) == ["Twin", "first"]
    again = expect_ok(put(app, names.job_path("first"), job_body(recurrence={"frequency": "Hour", "interval": 3})))
    assert again["properties"]["recurrence"]["interval"] == 3
    assert _job_names(app, names) == ["Twin", "first"]


def test_creates_refused_for_their_definition_leave_the_next_creates_working(app: TestClient) -> None:
    """A refused create rolls its transaction back, which once expired the collection's row the process kept
    (a 500 for every later create into that collection)."""
    names = Names()
    create_collection(app, names)
    too_large = job_body(action=http_action(body="x" * 17_000))
    assert put(app, names.job_path("big"), too_large).status_code == 400
    create_job(app, names, "first")
    assert put(app, names.job_path("big"), too_large).status_code == 400
    assert_arm_error(put(app, names.job_path("bad"), job_body(startTime="soon")), 400, "BadRequest")
    create_job(app, names, "second")
    assert _job_names(app, names) == ["first", "second"]
