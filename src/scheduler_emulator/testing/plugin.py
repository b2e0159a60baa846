"""The pytest plugin (registered through the ``pytest11`` entry point when the package is installed).

Fixtures: ``scheduler_emulator`` — one emulator per test session on the virtual clock (started on first
use, or the one given with ``--scheduler-emulator-url``), reset before each test that uses it;
``scheduler_target`` — a fresh recording ``HttpTarget`` per test. Nothing starts unless a test asks.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from scheduler_emulator.testing import Emulator, HttpTarget


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("scheduler-emulator")
    group.addoption(
        "--scheduler-emulator-url",
        default=None,
        help="Use the Azure Scheduler emulator running at this URL (e.g. a compose service) instead of starting one.",
    )
    group.addoption("--scheduler-emulator-token", default=None, help="Bearer token for that emulator (--auth-token).")


@pytest.fixture(scope="session")
def _scheduler_emulator_session(request: pytest.FixtureRequest) -> Iterator[Emulator]:
    url = request.config.getoption("--scheduler-emulator-url")
    token = request.config.getoption("--scheduler-emulator-token")
    if url:
        yield Emulator.attach(url, token=token)
        return
    with Emulator(clock="virtual") as emulator:
        yield emulator


@pytest.fixture
def scheduler_emulator(_scheduler_emulator_session: Emulator) -> Emulator:
    """The session's emulator, emptied (``reset``) before this test."""
    _scheduler_emulator_session.reset()
    return _scheduler_emulator_session


@pytest.fixture
def scheduler_target() -> Iterator[HttpTarget]:
    """A recording HTTP target on 127.0.0.1 for this test's jobs."""
    with HttpTarget() as target:
        yield target
