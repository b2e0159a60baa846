"""The overview's attempt counts (service.overview.AttemptCounts) on each store: after any change to the
history they equal a full count, and between two calls with nothing but new entries they read only those."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import delete, insert
from support.scratch_store import BACKENDS, add_collection, add_job, scratch_database

from scheduler_emulator.service.overview import AttemptCounts
from scheduler_emulator.store import overview as queries
from scheduler_emulator.store.database import Database
from scheduler_emulator.store.models import JobHistoryRow

NOW = datetime(2030, 1, 7, 8, 42, tzinfo=UTC)
EDGES = [datetime(2030, 1, 7, 7, 45, tzinfo=UTC) + timedelta(minutes=5 * i) for i in range(13)]


def add_entry(database: Database, job: int, minutes_ago: float, status: str, **columns: Any) -> int:
    moment = NOW - timedelta(minutes=minutes_ago)
    row = {
        "job_id": job,
        "history_id": f"h{moment.timestamp()}{status}",
        "start_time": moment,
        "end_time": moment,
        "expected_execution_time": moment,
        "action_name": "MainAction",
        "status": status,
        "message": "",
        "retry_count": 0,
        "repeat_count": 0,
        **columns,
    }
    with database.session() as session:
        return int(session.execute(insert(JobHistoryRow).returning(JobHistoryRow.id), row).scalar_one())


def full(database: Database, edges: list[datetime]) -> dict[tuple[int, str], int]:
    with database.session() as session:
        return queries.attempts_by_bucket(session, edges)


def counted(database: Database, tally: AttemptCounts, edges: list[datetime]) -> dict[tuple[int, str], int]:
    with database.session() as session:
        return tally.count(session, "hour", edges)


@pytest.mark.parametrize("kind", BACKENDS)
def test_counts_are_kept_between_calls_and_recounted_when_the_history_changes_otherwise(
    kind: str, tmp_path: Path
) -> None:
    with scratch_database(kind, tmp_path) as database:
        job = add_job(database, add_collection(database), "j", None)
        add_entry(database, job, 1, "Completed")
        add_entry(database, job, 2, "Failed")
        add_entry(database, job, 3, "Postponed")  # not a try
        add_entry(database, job, 3, "Failed", action_name="ErrorAction")  # not a try of the job's action
        add_entry(database, job, 70, "Completed")  # before the window
        tally = AttemptCounts()

        assert counted(database, tally, EDGES) == full(database, EDGES) == {(11, "Completed"): 1, (11, "Failed"): 1}
        assert tally.full_counts == 1

        last = add_entry(database, job, 0.5, "Failed")
        add_entry(database, job, 31, "Completed")
        assert counted(database, tally, EDGES) == full(database, EDGES)
        assert counted(database, tally, EDGES)[(11, "Failed")] == 2
        assert tally.full_counts == 1  # only the new entries were read

        with database.session() as session:  # retention or a deleted job: fewer entries than expected
            session.execute(delete(JobHistoryRow).where(JobHistoryRow.id == last))
        assert counted(database, tally, EDGES) == full(database, EDGES)
        assert tally.full_counts == 2

        gap = add_entry(database, job, 1, "Completed", id=last + 100)
        assert counted(database, tally, EDGES) == full(database, EDGES)
        assert tally.full_counts == 2
        add_entry(database, job, 1, "Failed", id=gap - 50)  # committed late with a lower id
        assert counted(database, tally, EDGES) == full(database, EDGES)
        assert tally.full_counts == 3

        moved = [edge + timedelta(minutes=5) for edge in EDGES]  # the window moves on: counted afresh
        assert counted(database, tally, moved) == full(database, moved)
        assert tally.full_counts == 4
