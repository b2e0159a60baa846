"""Shared fixtures: a real server process per store backend (SQLite file, PostgreSQL), HTTPS with its
self-signed certificate, and clients for it (httpx, the official azure-mgmt-scheduler SDK)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import httpx
import pytest
from support.api_client import API, create_job
from support.names import Names
from support.server import EmulatorPool, ServerProcess, emulator_command
from support.waiting import unique, wait_until
from target_server import TargetServer

__all__ = [
    "API",
    "IN_CI",
    "PG_ADMIN_DSN",
    "TEST_SECRET_KEY",
    "Backend",
    "EmulatorPool",
    "Names",
    "PostgresDatabase",
    "ServerProcess",
    "create_job",
    "emulator_command",
    "fresh_database",
    "require_postgres",
    "unique",
    "wait_until",
]

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
PG_ADMIN_DSN = os.environ.get("SCHEDULER_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")
# The session server's key for stored secrets, so that tests reading its database directly can open them.
TEST_SECRET_KEY = "8Jm0nWv3kqy7cGk1c4mQb2mJ0d9h0b3x2y1z0a9b8c4="


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
class Backend:
    name: str
    database_url: str


@contextmanager
def fresh_database(kind: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The URL of a new, empty store of this kind: ``sqlite`` (a file in a new directory) or ``postgresql``
    (a database on the test server, dropped on leaving; skipped or failed as ``require_postgres`` says)."""
    if kind == "sqlite":
        yield f"sqlite:///{tmp_path_factory.mktemp('sqlite') / 'scheduler.db'}"
        return
    require_postgres()
    database = PostgresDatabase().create()
    try:
        yield database.url
    finally:
        database.drop()


@pytest.fixture(scope="session", params=["sqlite", "postgresql"])
def backend(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Backend]:
    """Each store the API tests run on."""
    with fresh_database(request.param, tmp_path_factory) as url:
        yield Backend(request.param, url)


@pytest.fixture(scope="module")
def own_database(backend: Backend, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A fresh database of the backend's kind for a module that starts its own emulator: the session
    ``server`` runs a dispatcher too, and must not see (and fire) that module's jobs."""
    with fresh_database(backend.name, tmp_path_factory) as url:
        yield url


@pytest.fixture(scope="session")
def server(backend: Backend, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A running HTTPS server (self-signed certificate) on the backend's store."""
    with EmulatorPool() as pool:
        yield pool.start(
            tmp_path_factory.mktemp("data"),
            "--allowed-hosts",
            "scheduler.example.test",  # as if behind a reverse proxy of that name (test_history's nextLink)
            https=True,
            database_url=backend.database_url,
            log_level="warning",
            env={"SCHEDULER_SECRET_KEY": TEST_SECRET_KEY},
        )


@pytest.fixture
def http(server: ServerProcess) -> Iterator[httpx.Client]:
    with server.client() as client:
        yield client


@pytest.fixture
def names() -> Names:
    return Names()


@pytest.fixture
def target() -> Iterator[TargetServer]:
    """A recording HTTP target on loopback (see target_server.py), for one test."""
    server = TargetServer().start()
    yield server
    server.stop()


@pytest.fixture
def emulators() -> Iterator[EmulatorPool]:
    """Starts emulator processes for one test (``emulators.start(data_dir, *args, https=..., ...)``) and
    stops every one it started when the test ends."""
    with EmulatorPool() as pool:
        yield pool


# The modules that take minutes, longest first. `make test` runs with --dist loadfile --no-loadscope-reorder,
# so workers take modules in collection order: starting with these keeps one worker from being left alone
# with a long module at the end (xdist's own order, most tests first, put them last: a 4-minute tail).
SLOW_MODULES_FIRST = (
    "tests/api/test_schemathesis.py",
    "tests/test_cli.py",  # collected last otherwise: ~24 process starts, a long tail on one worker
    "tests/e2e/test_firing.py",
    "tests/e2e/test_scale_out.py",
    "tests/e2e/test_faults.py",
    "tests/e2e/test_dispatcher_settings.py",
    "tests/e2e/test_client_matrix.py",
    "tests/e2e/test_classic_clients.py",
    "tests/testing/test_kit.py",  # collected last otherwise
    "tests/e2e/test_secrets_at_rest.py",
    "tests/e2e/test_observability.py",
    "tests/e2e/test_azure_cli.py",  # 30 s; the first run installs azure-cli first (75-170 s)
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {path: place for place, path in enumerate(SLOW_MODULES_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))  # stable: the rest keep their order
