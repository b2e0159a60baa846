"""The dashboard's "Failing now" (store.overview.failing_jobs) on each store: a job is in it when it is Faulted
or its last try of the main action failed, whatever entries that are not tries (Postponed, the error
action's) came after that try; shown with that try."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import insert
from support.scratch_store import BACKENDS, add_collection, add_job, scratch_database

from scheduler_emulator.store import overview as queries
from scheduler_emulator.store.database import Database
from scheduler_emulator.store.models import JobHistoryRow

T0 = datetime(2030, 1, 7, 8, 0, tzinfo=UTC)


def add_entries(database: Database, job: int, *entries: tuple[int, str, str]) -> None:
    """History entries of ``job`` in the order given (ids ascending): (minutes after T0, action, status), each
    with a message naming it."""
    rows: list[dict[str, Any]] = []
    for minutes, action, status in entries:
        moment = T0 + timedelta(minutes=minutes)
        rows.append(
            {
                "job_id": job,
                "history_id": f"{job}-{minutes}-{action}-{status}",
                "start_time": moment,
                "end_time": moment,
                "expected_execution_time": moment,
                "action_name": action,
                "status": status,
                "message": f"{action} {status} at +{minutes} min",
                "retry_count": 0,
                "repeat_count": 0,
            }
        )
    with database.session() as session:
        for row in rows:  # one at a time: the ids follow the order written
            session.execute(insert(JobHistoryRow), row)


@pytest.mark.parametrize("kind", BACKENDS)
def test_failing_now_looks_past_entries_that_are_not_tries(kind: str, tmp_path: Path) -> None:
    with scratch_database(kind, tmp_path) as database:
        collection = add_collection(database)

        def job(name: str, *entries: tuple[int, str, str], state: str = "Enabled") -> None:
            failures = sum(1 for _, action, status in entries if action == "MainAction" and status == "Failed")
            made = add_job(database, collection, name, None, state=state, failure_count=failures)
            add_entries(database, made, *entries)

        main, error = "MainAction", "ErrorAction"
        # Every retry failed, then the instants that came due meanwhile were recorded as one Postponed entry.
        job("retries-failed", (0, main, "Failed"), (2, main, "Failed"), (4, main, "Failed"), (4, main, "Postponed"))
        job("error-action-ran", (1, main, "Failed"), (1, error, "Completed"), (2, main, "Postponed"))
        job("failed-again", (0, main, "Completed"), (3, main, "Failed"))
        job("recovered", (0, main, "Failed"), (1, main, "Completed"), (5, main, "Postponed"))
        job("faulted", (0, main, "Failed"), (6, main, "Postponed"), state="Faulted")
        job("never-failed", (0, main, "Completed"), (7, main, "Postponed"))

        with database.session() as session:
            shown = [
                (row.name, last.status if last else None, last.message if last else None)
                for row, _, last in queries.failing_jobs(session, 25)
            ]

    assert shown == [  # newest failed try first
        ("retries-failed", "Failed", "MainAction Failed at +4 min"),
        ("failed-again", "Failed", "MainAction Failed at +3 min"),
        ("error-action-ran", "Failed", "MainAction Failed at +1 min"),
        ("faulted", "Failed", "MainAction Failed at +0 min"),
    ]
