"""Answer as Azure answered: the real service's recorded traffic (recordings/, SOURCES.md) replayed against
a started emulator on each store; every exchange matches or is explained by a stated rule
(conformance_replay.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from conformance_replay import Replayer, load_sessions, rules_text
from conftest import EmulatorPool, ServerProcess

CLOCK_START = "2015-06-30T00:00:00Z"  # before the oldest recording; the clock only moves forward


@pytest.fixture(scope="module")
def emulator(own_database: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """An emulator on the virtual clock whose jobs' HTTP actions may reach loopback only: nothing recorded
    (bing.com, example.org) can be called, whatever the replay makes due."""
    with EmulatorPool() as pool:
        yield pool.start(
            tmp_path_factory.mktemp("conformance"),
            "--clock",
            "virtual",
            "--clock-start",
            CLOCK_START,
            "--outbound-allow",
            "127.0.0.0/8",
            database_url=own_database,
            log_level="warning",
        )


def test_every_recorded_exchange_matches_or_is_explained(emulator: ServerProcess) -> None:
    sessions = load_sessions()
    assert len(sessions) >= 14, "the recordings are missing"
    with emulator.client() as client:
        report = Replayer(client).run(sessions)
    print(report.summary())
    problems = "\n".join(f"{outcome.exchange.label}: {outcome.detail}" for outcome in report.unexplained)
    assert not report.unexplained, f"{report.summary()}\nunexplained:\n{problems}\nrules:\n{rules_text()}"
    # every exchange counted; the rules explain differences, they do not hide whole surfaces
    assert report.count("arm", "match") >= 1 and report.count("classic", "match") >= 1, report.summary()
