"""PostgreSQL's planner statistics of the dispatcher's tables, kept by the dispatcher (DispatchStore
.refresh_statistics, every few seconds of its loop). Without them (autovacuum off, or a table too small for its
threshold, as a few dozen collections always are) the planner joined every collection's jobs for each claim: 60-130
ms a claim at 30,000 jobs where the due-time index answers in about one."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import text
from support.scratch_store import add_collection, add_job, scratch_database

from scheduler_emulator.config import Settings
from scheduler_emulator.dispatcher.definitions import read_definition
from scheduler_emulator.dispatcher.firing import Actions
from scheduler_emulator.dispatcher.loop import Dispatcher
from scheduler_emulator.domain.clock import WallClock
from scheduler_emulator.metrics import Metrics
from scheduler_emulator.store.database import Database
from scheduler_emulator.store.dispatch_port import DispatchStore
from scheduler_emulator.store.models import JOBS

COLLECTIONS = 30
JOBS_EACH = 200

# The claim's query for due jobs, as dispatching.due_jobs builds it (the columns trimmed).
DUE = (
    "EXPLAIN SELECT jobs.id, jobs.definition FROM jobs JOIN job_collections ON jobs.collection_id = "
    "job_collections.id WHERE jobs.next_execution_time <= :until AND jobs.lease_owner IS NULL AND jobs.state = "
    "'Enabled' AND job_collections.state = 'Enabled' ORDER BY jobs.next_execution_time LIMIT 200 "
    "FOR UPDATE OF jobs SKIP LOCKED"
)


@pytest.fixture
def database(tmp_path: Path) -> Iterator[Database]:
    with scratch_database("postgresql", tmp_path) as scratch:
        yield scratch


def _fill(database: Database, start: datetime) -> None:
    """COLLECTIONS collections of JOBS_EACH jobs, due a millisecond apart from ``start``."""
    for index in range(COLLECTIONS):
        collection = add_collection(database, f"c{index}")
        first = add_job(database, collection, f"c{index}-0", start + timedelta(milliseconds=index))
        with database.session() as session:  # the rest copied from the first in one statement
            columns = [column.name for column in JOBS.columns if column.name != "id"]
            copied = ", ".join(
                {
                    "name": "name || '-' || g",
                    "name_key": "name_key || '-' || g",
                    "next_execution_time": f"next_execution_time + g * interval '{COLLECTIONS} ms'",
                }.get(column, column)
                for column in columns
            )
            session.execute(
                text(
                    f"INSERT INTO jobs ({', '.join(columns)}) SELECT {copied} FROM jobs, "
                    f"generate_series(1, {JOBS_EACH - 1}) AS g WHERE id = :first"
                ),
                {"first": first},
            )


def _flush_counters(database: Database) -> None:
    """This backend's activity counters into pg_stat_user_tables now (else when its session ends)."""
    with database.session() as session:
        session.execute(text("SELECT pg_stat_force_next_flush()"))


def _plan(database: Database, until: datetime) -> str:
    with database.session() as session:
        return "\n".join(session.execute(text(DUE), {"until": until}).scalars())


def _analyzed(database: Database) -> dict[str, bool]:
    with database.session() as session:
        rows = session.execute(
            text(
                "SELECT relname, last_analyze IS NOT NULL FROM pg_stat_user_tables "
                "WHERE relname IN ('jobs', 'job_collections')"
            )
        ).all()
    return {str(name): bool(done) for name, done in rows}


def test_the_store_analyzes_tables_whose_statistics_are_missing_and_the_claim_then_uses_the_due_time_index(
    database: Database,
) -> None:
    start = datetime.now(UTC) + timedelta(hours=1)
    _fill(database, start)
    store = DispatchStore(database, "owner", read_definition=read_definition)
    _flush_counters(database)
    analyzed = store.refresh_statistics()
    assert {"jobs", "job_collections"} <= set(analyzed), analyzed
    assert _analyzed(database) == {"jobs": True, "job_collections": True}
    _flush_counters(database)
    assert store.refresh_statistics() == []  # nothing changed since
    plan = _plan(database, start + timedelta(seconds=1))
    assert "ix_jobs_next_execution_time" in plan, plan


def test_a_running_dispatcher_keeps_them(database: Database, tmp_path: Path) -> None:
    _fill(database, datetime.now(UTC) + timedelta(hours=1))
    settings = Settings(database_url=database.url, data_dir=tmp_path, poll_interval=0.2)

    async def scenario() -> dict[str, bool]:
        actions = Actions(settings.outbound)
        dispatcher = Dispatcher(
            database, clock=WallClock(), dispatch=settings.dispatch, actions=actions, metrics=Metrics()
        )
        dispatcher.start()
        try:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and not all((seen := _analyzed(database)).values()):
                await asyncio.sleep(0.2)
            return seen
        finally:
            await dispatcher.stop()
            await actions.close()

    assert asyncio.run(scenario()) == {"jobs": True, "job_collections": True}
