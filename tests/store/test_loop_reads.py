"""Reads of one statement on the event loop (store.loop_reads), on PostgreSQL: what a GET of a job reads there.
A job read on the loop is the job the ORM reads (every column, its secret opened, its times in UTC); a missing
job or collection reads as missing; a connection the server ended while it sat idle costs no error; a server
that does not answer makes the read fail within its bound as the database's state (OperationalError), while the
loop goes on; one LoopReads serves one event loop after another."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Iterator
from datetime import UTC, timedelta
from typing import Any

import pytest
from sqlalchemy import inspect, text
from sqlalchemy.exc import OperationalError
from support.databases import sealing_postgres_database
from support.scratch_store import T0, add_collection

from scheduler_emulator.store import repository as repo
from scheduler_emulator.store.database import Database
from scheduler_emulator.store.loop_reads import LoopReads
from scheduler_emulator.store.models import JobCollectionRow, JobRow

PASSWORD = "pw-6b2e-loop-read-secret"
BOUND = 30.0  # seconds: only a read that hangs takes this long


@pytest.fixture
def database(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Database]:
    with sealing_postgres_database(tmp_path_factory) as database:
        yield database


def add_job(database: Database, collection_id: int, name: str) -> None:
    definition: dict[str, Any] = {
        "startTime": (T0 + timedelta(days=1)).isoformat(),
        "action": {
            "type": "Http",
            "request": {
                "uri": "http://127.0.0.1:1/",
                "method": "GET",
                "authentication": {"type": "Basic", "username": "u", "password": PASSWORD},
            },
        },
        "recurrence": {"frequency": "Hour", "interval": 2},
    }
    with database.session() as session:
        session.add(
            JobRow(
                collection_id=collection_id,
                name=name,
                name_key=name.lower(),
                definition=definition,
                state="Enabled",
                series_origin=T0 + timedelta(days=1),
                next_execution_time=T0 + timedelta(days=1),
                last_execution_time=T0,
                execution_count=3,
                failure_count=1,
                faulted_count=0,
                created_at=T0,
                updated_at=T0 + timedelta(seconds=5),
            )
        )


def read_on_loop(reads: LoopReads, job: str, collection: str = "c") -> tuple[Any, ...] | None:
    async def read() -> tuple[Any, ...] | None:
        async with asyncio.timeout(BOUND):
            return await repo.find_collection_with_job_on_loop(reads, "S", "G", collection, job)

    return asyncio.run(read())


def columns(row: object) -> dict[str, Any]:
    return {prop.key: getattr(row, prop.key) for prop in inspect(type(row)).column_attrs}


def test_a_job_read_on_the_loop_is_the_job_the_orm_reads(database: Database) -> None:
    add_job(database, add_collection(database), "Job-1")
    assert database.loop_reads is not None
    found = read_on_loop(database.loop_reads, "JOB-1")
    assert found is not None
    collection, job = found
    with database.statement_session() as session:
        expected = repo.find_collection_with_job(session, "s", "g", "c", "job-1")
    assert expected is not None and expected[1] is not None
    assert isinstance(collection, JobCollectionRow) and isinstance(job, JobRow)
    assert columns(collection) == columns(expected[0])
    assert columns(job) == columns(expected[1])
    assert job.definition["action"]["request"]["authentication"]["password"] == PASSWORD  # opened, as the ORM's
    assert job.next_execution_time == T0 + timedelta(days=1) and job.next_execution_time.tzinfo is UTC
    with database.session() as session:  # and it is sealed in the table
        stored = session.execute(text("SELECT definition::text FROM jobs")).scalar_one()
    assert PASSWORD not in stored


def test_a_missing_job_or_collection_reads_as_missing(database: Database) -> None:
    add_job(database, add_collection(database), "job-1")
    assert database.loop_reads is not None
    found = read_on_loop(database.loop_reads, "job-2")
    assert found is not None and found[0].name == "c" and found[1] is None
    assert read_on_loop(database.loop_reads, "job-1", collection="other") is None


def test_a_connection_the_server_ended_while_idle_costs_no_error(database: Database) -> None:
    add_job(database, add_collection(database), "job-1")
    reads = database.loop_reads
    assert reads is not None

    async def scenario() -> list[str | None]:
        names = []
        first = await repo.find_collection_with_job_on_loop(reads, "s", "g", "c", "job-1")
        names.append(first[1].name if first and first[1] else None)
        with database.session() as session:  # end every other session of this database (the idle loop read's)
            ended = session.execute(
                text(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                    " WHERE datname = current_database() AND pid <> pg_backend_pid()"
                )
            ).scalar_one()
        assert ended >= 1
        again = await repo.find_collection_with_job_on_loop(reads, "s", "g", "c", "job-1")
        names.append(again[1].name if again and again[1] else None)
        return names

    assert asyncio.run(scenario()) == ["job-1", "job-1"]


def test_a_server_that_does_not_answer_fails_the_read_within_its_bound_and_the_loop_goes_on(
    database: Database,
) -> None:
    """A listener that accepts and never answers stands for a hung server: the read fails as the database's state
    (OperationalError, which the API answers 503) after its bound, and the loop runs other work meanwhile."""
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    try:
        port = silent.getsockname()[1]
        hung = Database(f"postgresql://postgres@127.0.0.1:{port}/test")
        assert hung.loop_reads is not None
        reads = LoopReads(hung.engine, {}, timeout=0.5)

        async def scenario() -> tuple[BaseException | None, int]:
            ticks = 0
            stop = asyncio.Event()

            async def tick() -> None:
                nonlocal ticks
                while not stop.is_set() and ticks < 100_000:
                    ticks += 1
                    await asyncio.sleep(0.01)

            ticker = asyncio.create_task(tick())
            failure: BaseException | None = None
            try:
                async with asyncio.timeout(BOUND):
                    await repo.find_collection_with_job_on_loop(reads, "s", "g", "c", "job-1")
            except OperationalError as exc:
                failure = exc
            stop.set()
            await ticker
            return failure, ticks

        started = time.monotonic()
        try:
            failure, ticks = asyncio.run(scenario())
        finally:
            hung.dispose()
        assert isinstance(failure, OperationalError), "the read failed as the database's state"
        assert time.monotonic() - started < BOUND, "within its bound, not the test's"
        assert ticks >= 2, "the loop ran other work while the read waited"
    finally:
        silent.close()


def test_one_loop_reads_serves_one_event_loop_after_another(database: Database) -> None:
    add_job(database, add_collection(database), "job-1")
    assert database.loop_reads is not None
    for _ in range(3):  # each asyncio.run is a new loop; the connections of the last one are left behind
        found = read_on_loop(database.loop_reads, "job-1")
        assert found is not None and found[1] is not None and found[1].name == "job-1"
