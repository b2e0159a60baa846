"""Shared fixtures (only fixtures and collection hooks: helpers live in tests/support/, imported as
``from support.<module> import ...``): a real server process per store backend (SQLite file, PostgreSQL),
HTTPS with its self-signed certificate, and clients for it."""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator
from datetime import UTC, datetime

import httpx
import pytest
from support import forkserver
from support.clocks import SetClock
from support.databases import TEST_SECRET_KEY, Backend, fresh_database
from support.names import Names
from support.server import EmulatorPool, ServerProcess
from support.target_server import TargetServer

from scheduler_emulator.app import create_app
from scheduler_emulator.config import Settings

# The ~170 emulators a run starts are forked from one pre-imported process per worker (support/forkserver.py):
# ~0.85 s of CPU less each, about a fifth of the suite's CPU. tests/testing/test_forkserver.py compares the two ways.
os.environ.setdefault(forkserver.ENABLE, "1")

with warnings.catch_warnings():
    # Starlette asks for httpx2 under its TestClient; with httpx (what the suite uses) it works the same and warns.
    warnings.filterwarnings("ignore", "Using `httpx` with `starlette.testclient`")
    from starlette.testclient import TestClient


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


@pytest.fixture(scope="session")
def app_clock() -> SetClock:
    """The in-process API's clock: set to the session's start (a whole second) and moved only by a test."""
    return SetClock(datetime.now(UTC).replace(microsecond=0))


@pytest.fixture(scope="session")
def app(backend: Backend, app_clock: SetClock, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    """The API tier in this process: ``create_app(settings, clock)`` over the backend's store on ``app_clock``,
    without a dispatcher, driven by Starlette's TestClient (an httpx.Client that runs the app's lifespan, so
    the store is opened and migrated as a started server does it; httpx.ASGITransport is async-only and runs
    no lifespan). For request-response contracts where nothing process-level (TLS, the access log, process
    start, outbound firing) is under test. It shares the backend's store (and secret key) with the session
    ``server`` when both run, as two processes of one deployment do."""
    settings = Settings(
        data_dir=tmp_path_factory.mktemp("app"),
        database_url=backend.database_url,
        dispatcher=False,
        secret_key=TEST_SECRET_KEY,
        allowed_hosts="scheduler.example.test",  # as the session server (test_history's nextLink)
        log_level="warning",
    )
    # https in the base URL: the app sees the scheme the HTTPS session server's requests have (next links)
    with TestClient(create_app(settings, app_clock), base_url="https://127.0.0.1") as client:
        yield client


@pytest.fixture
def names() -> Names:
    return Names()


@pytest.fixture
def target() -> Iterator[TargetServer]:
    """A recording HTTP target on loopback (see support/target_server.py), for one test."""
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
    "tests/e2e/test_docs_examples.py",  # 60-90 s: every page's examples, the Azure CLI's among them
    "tests/e2e/test_azure_cli.py",  # the first run installs azure-cli first (75-170 s)
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {path: place for place, path in enumerate(SLOW_MODULES_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))  # stable: the rest keep their order


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """After a run that included tests/e2e/test_docs_examples.py: how many of the pages' examples it ran and how
    many are only illustrative (counted from the pages here, so that it shows under xdist too)."""
    ran = [r for reports in terminalreporter.stats.values() for r in reports if hasattr(r, "nodeid")]
    if not any(r.nodeid.startswith("tests/e2e/test_docs_examples.py::test_the_examples") for r in ran):
        return
    from support.doc_blocks import summary  # only when that module ran

    terminalreporter.write_sep("-", "docs examples")
    terminalreporter.write_line(summary())
