"""Shared fixtures: a real server process per store backend (SQLite file, PostgreSQL), HTTPS with its
self-signed certificate, and clients for it (httpx, the official azure-mgmt-scheduler SDK)."""

from __future__ import annotations

import os
import re
import ssl
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
from target_server import TargetServer

T = TypeVar("T")
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
PG_ADMIN_DSN = os.environ.get("SCHEDULER_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")
API = "2016-03-01"
# The session server's key for stored secrets, so that tests reading its database directly can open them.
TEST_SECRET_KEY = "8Jm0nWv3kqy7cGk1c4mQb2mJ0d9h0b3x2y1z0a9b8c4="


def wait_until(check: Callable[[], T], timeout: float, what: str | Callable[[], str]) -> T:
    """Poll ``check`` until it returns something truthy and return that; AssertionError after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() >= deadline:
            described = what() if callable(what) else what
            raise AssertionError(f"timed out after {timeout:.1f} s waiting for {described}")
        time.sleep(0.1)


def unique(prefix: str) -> str:
    """A name no other test uses."""
    return f"{prefix}{uuid.uuid4().hex[:10]}"


def require_postgres() -> None:
    """Skip locally, fail in CI, when the PostgreSQL server is not reachable."""
    import psycopg

    try:
        psycopg.connect(PG_ADMIN_DSN, connect_timeout=3).close()
    except Exception as exc:  # noqa: BLE001 - report whatever stops the connection
        message = f"PostgreSQL is needed at {PG_ADMIN_DSN} for this test and is unreachable: {exc}"
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)


@dataclass
class PostgresDatabase:
    """A fresh database on the test server, dropped afterwards."""

    name: str = field(default_factory=lambda: unique("sched_test_"))

    @property
    def url(self) -> str:
        base = PG_ADMIN_DSN.rsplit("/", 1)[0]
        return f"{base}/{self.name}"

    def create(self) -> PostgresDatabase:
        import psycopg

        with psycopg.connect(PG_ADMIN_DSN, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{self.name}"')
        return self

    def drop(self) -> None:
        import psycopg

        with psycopg.connect(PG_ADMIN_DSN, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')


@dataclass
class ServerProcess:
    """``scheduler-emulator`` started as a separate process; its output is collected for assertions."""

    args: list[str]
    env: dict[str, str] = field(default_factory=dict)
    process: subprocess.Popen[str] | None = None
    output: list[str] = field(default_factory=list)
    url: str = ""
    cert_path: Path | None = None

    def start(self, timeout: float = 30) -> ServerProcess:
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **self.env}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "scheduler_emulator", *self.args],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
        )
        ready = threading.Event()

        def pump() -> None:
            assert self.process is not None and self.process.stdout is not None
            for line in self.process.stdout:
                self.output.append(line.rstrip("\n"))
                if match := re.search(r"Listening on (\S+)", line):
                    self.url = match.group(1)
                    ready.set()
                if match := re.search(r"HTTPS certificate .*: (\S+)$", line.strip()):
                    self.cert_path = Path(match.group(1))
            ready.set()

        threading.Thread(target=pump, daemon=True).start()
        deadline = time.monotonic() + timeout
        while not ready.wait(0.1):
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("server did not start in time:\n" + self.log)
        if not self.url:
            self.stop()
            raise RuntimeError("server exited before listening:\n" + self.log)
        return self

    def wait_exit(self, timeout: float = 30) -> int:
        assert self.process is not None
        return self.process.wait(timeout)

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)

    @property
    def log(self) -> str:
        return "\n".join(self.output)

    @property
    def verify(self) -> ssl.SSLContext | bool:
        """What httpx needs to trust this server (its self-signed certificate)."""
        return ssl.create_default_context(cafile=str(self.cert_path)) if self.cert_path else True

    def client(self, **kwargs: Any) -> httpx.Client:
        return httpx.Client(base_url=self.url, verify=self.verify, timeout=30, **kwargs)


@dataclass
class Backend:
    name: str
    database_url: str


@pytest.fixture(scope="session", params=["sqlite", "postgresql"])
def backend(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Backend]:
    """Each store the API tests run on."""
    if request.param == "sqlite":
        yield Backend("sqlite", f"sqlite:///{tmp_path_factory.mktemp('sqlite') / 'scheduler.db'}")
        return
    require_postgres()
    database = PostgresDatabase().create()
    try:
        yield Backend("postgresql", database.url)
    finally:
        database.drop()


@pytest.fixture(scope="module")
def own_database(backend: Backend, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A fresh database of the backend's kind for a module that starts its own emulator: the session
    ``server`` runs a dispatcher too, and must not see (and fire) that module's jobs."""
    if backend.name == "sqlite":
        yield f"sqlite:///{tmp_path_factory.mktemp('own-sqlite') / 'scheduler.db'}"
        return
    database = PostgresDatabase().create()
    try:
        yield database.url
    finally:
        database.drop()


@pytest.fixture(scope="session")
def server(backend: Backend, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A running HTTPS server (self-signed certificate) on the backend's store."""
    data_dir = tmp_path_factory.mktemp("data")
    process = ServerProcess(
        [
            "--port",
            "0",
            "--https",
            "--data-dir",
            str(data_dir),
            "--database-url",
            backend.database_url,
            "--log-level",
            "warning",
            "--allowed-hosts",
            "scheduler.example.test",  # as if behind a reverse proxy of that name (test_history's nextLink)
        ],
        env={"SCHEDULER_SECRET_KEY": TEST_SECRET_KEY},
    ).start()
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture
def http(server: ServerProcess) -> Iterator[httpx.Client]:
    with server.client() as client:
        yield client


@dataclass
class Names:
    """Unique subscription, resource group and collection names for one test."""

    subscription: str = field(default_factory=lambda: str(uuid.uuid4()))
    resource_group: str = field(default_factory=lambda: unique("rg-"))
    collection: str = field(default_factory=lambda: unique("jc-"))

    @property
    def rg_path(self) -> str:
        return f"/subscriptions/{self.subscription}/resourceGroups/{self.resource_group}/providers/Microsoft.Scheduler"

    @property
    def collection_path(self) -> str:
        return f"{self.rg_path}/jobCollections/{self.collection}"

    def job_path(self, job: str) -> str:
        return f"{self.collection_path}/jobs/{job}"


@pytest.fixture
def names() -> Names:
    return Names()


@pytest.fixture
def target() -> Iterator[TargetServer]:
    """A recording HTTP target on loopback (see target_server.py), for one test."""
    server = TargetServer().start()
    yield server
    server.stop()


def create_job(client: httpx.Client, names: Names, job: str, action: dict[str, Any], **properties: object) -> None:
    """PUT a job (creating its collection first when needed); asserts 201."""
    params = {"api-version": API}
    if client.get(names.collection_path, params=params).status_code == 404:
        assert client.put(names.collection_path, params=params, json={"location": "westus"}).status_code == 201
    response = client.put(names.job_path(job), params=params, json={"properties": {"action": action, **properties}})
    assert response.status_code == 201, response.text
