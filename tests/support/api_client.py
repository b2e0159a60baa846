"""The emulator's API as the end-to-end tests use it: requests with the api-version, job history, and
waits for history entries and job states (bounded, with what was last seen in the failure message)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Self

import httpx

from support.names import Names
from support.server import ServerProcess, emulator_command
from support.waiting import wait_until

API = "2016-03-01"
# For suites that watch jobs fire: the store polled every second, retry intervals of a second allowed.
QUICK_DISPATCH: dict[str, Any] = {"poll_interval": 1, "min_retry_interval": 1}


def history_entries(client: httpx.Client, job_path: str, **params: str) -> list[dict[str, Any]]:
    """The history entries of the job at ``job_path`` (whole entries, newest first); asserts 200."""
    response = client.get(job_path + "/history", params={"api-version": API, **params})
    assert response.status_code == 200, f"GET {job_path}/history: {response.status_code} {response.text}"
    entries: list[dict[str, Any]] = response.json()["value"]
    return entries


def job_history(client: httpx.Client, names: Names, job: str, **params: str) -> list[dict[str, Any]]:
    """The ``properties`` of the job's history entries, newest first; asserts 200."""
    return [entry["properties"] for entry in history_entries(client, names.job_path(job), **params)]


def wait_history(
    client: httpx.Client,
    job_path: str,
    count: int,
    timeout: float,
    context: Callable[[], str] = lambda: "",
    **params: str,
) -> list[dict[str, Any]]:
    """The job's history entries (newest first) once there are at least ``count``; AssertionError after
    ``timeout`` naming what was there (and ``context()``, e.g. the server's log)."""
    last: list[dict[str, Any]] = []

    def check() -> list[dict[str, Any]] | None:
        nonlocal last
        last = history_entries(client, job_path, **params)
        return last if len(last) >= count else None

    return wait_until(check, timeout, lambda: f"{count} history entries of {job_path}; have {last}\n{context()}")


class EmulatorApi:
    """An emulator process (built by :func:`emulator_command` from the arguments given here) and one HTTP
    client for its API; :meth:`stop` then :meth:`start` restarts it on the same store."""

    history_timeout: float = 15  # what ``wait_history`` waits unless told
    state_timeout: float = 10  # what ``wait_state`` waits unless told

    def __init__(
        self, data_dir: Path | str, *extra_args: str, env: Mapping[str, str] | None = None, **options: Any
    ) -> None:
        self.command = emulator_command(data_dir, *extra_args, **options)
        self.env = dict(env or {})
        self.process: ServerProcess | None = None
        self.http: httpx.Client | None = None

    def start(self) -> Self:
        """Start a new process with the same arguments."""
        self.process = ServerProcess(self.command, self.env).start()
        self.http = self.process.client()
        return self

    def stop(self) -> None:
        """Close the client and stop the process."""
        if self.http is not None:
            self.http.close()
            self.http = None
        if self.process is not None:
            self.process.stop()

    def log_tail(self, lines: int = 40) -> str:
        """The server's latest log lines, without its access log."""
        return self.process.log_tail(lines) if self.process else ""

    def call(self, method: str, path: str, body: Any = None, **params: str) -> httpx.Response:
        """One request with the api-version."""
        assert self.http is not None, "the server is stopped"
        return self.http.request(method, path, params={"api-version": API, **params}, json=body)

    def ok(self, method: str, path: str, body: Any = None, **params: str) -> Any:
        """One request that must answer 200 or 201; its JSON body (None when empty)."""
        response = self.call(method, path, body, **params)
        assert response.status_code in (200, 201), f"{method} {path}: {response.status_code} {response.text}"
        return response.json() if response.content else None

    def collection(self, names: Names, location: str = "westus") -> dict[str, Any]:
        """PUT the Standard collection ``names`` holds."""
        result: dict[str, Any] = self.ok(
            "PUT", names.collection_path, {"location": location, "properties": {"sku": {"name": "Standard"}}}
        )
        return result

    def put_job(self, names: Names, job: str, properties: dict[str, Any]) -> dict[str, Any]:
        """PUT a job that must be created (201)."""
        response = self.call("PUT", names.job_path(job), {"properties": properties})
        assert response.status_code == 201, f"PUT job {job}: {response.status_code} {response.text}"
        created: dict[str, Any] = response.json()
        return created

    def job(self, names: Names, job: str) -> dict[str, Any]:
        """GET a job."""
        found: dict[str, Any] = self.ok("GET", names.job_path(job))
        return found

    def status(self, names: Names, job: str) -> dict[str, Any]:
        """The job's ``properties.status``."""
        status: dict[str, Any] = self.job(names, job)["properties"]["status"]
        return status

    def run(self, names: Names, job: str) -> None:
        """POST /run."""
        self.ok("POST", names.job_path(job) + "/run")

    def history(self, names: Names, job: str, **params: str) -> list[dict[str, Any]]:
        """The job's history entries (their ``properties``), newest first."""
        assert self.http is not None, "the server is stopped"
        return job_history(self.http, names, job, **{"$top": "100", **params})

    def wait_history(self, names: Names, job: str, count: int, timeout: float | None = None) -> list[dict[str, Any]]:
        """:meth:`history` once it has at least ``count`` entries."""
        assert self.http is not None, "the server is stopped"
        entries = wait_history(
            self.http, names.job_path(job), count, timeout or self.history_timeout, self.log_tail, **{"$top": "100"}
        )
        return [entry["properties"] for entry in entries]

    def wait_job(
        self, names: Names, job: str, condition: Callable[[dict[str, Any]], bool], timeout: float, what: str
    ) -> dict[str, Any]:
        """The job once ``condition`` holds for it."""
        last: dict[str, Any] = {}

        def check() -> dict[str, Any] | None:
            nonlocal last
            last = self.job(names, job)
            return last if condition(last) else None

        return wait_until(check, timeout, lambda: f"{what}; job is {last.get('properties')}\n{self.log_tail()}")

    def wait_state(self, names: Names, job: str, state: str, timeout: float | None = None) -> dict[str, Any]:
        """The job once it is in ``state``."""
        return self.wait_job(
            names, job, lambda j: j["properties"]["state"] == state, timeout or self.state_timeout, f"state {state}"
        )


def create_job(
    client: httpx.Client,
    names: Names,
    job: str,
    action: dict[str, Any],
    ensure_collection: bool = True,
    **properties: object,
) -> dict[str, Any]:
    """PUT a job with this action and properties; asserts 201 and returns the created job. Its collection is
    created first when missing, unless ``ensure_collection`` is False (then it must exist)."""
    params = {"api-version": API}
    if ensure_collection and client.get(names.collection_path, params=params).status_code == 404:
        assert client.put(names.collection_path, params=params, json={"location": "westus"}).status_code == 201
    response = client.put(names.job_path(job), params=params, json={"properties": {"action": action, **properties}})
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created
