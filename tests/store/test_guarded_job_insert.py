"""A new job's insert on PostgreSQL (store.repository.insert_job_if_unchanged, under the lock taken by
store.write_scope.PostgresWriteScope): the job is read and validated before the collection's write lock is taken,
so the insert itself must check that what it was built from still holds once the lock is granted — the name free,
the collection unchanged, the job count under the limit — and write nothing when one no longer does (the API then
decides the write again under the lock, from what is stored then)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import event, func, select, text, update
from sqlalchemy.exc import OperationalError
from support.databases import sealing_postgres_database
from support.scratch_store import T0, add_collection, add_job

from scheduler_emulator.domain.errors import Conflict
from scheduler_emulator.service import jobs
from scheduler_emulator.service.refs import CollectionRef
from scheduler_emulator.store import repository as repo
from scheduler_emulator.store.database import Database
from scheduler_emulator.store.models import JobCollectionRow, JobRow
from scheduler_emulator.store.write_scope import write_scope

LOCK = "collection:s/g/c"
REF = CollectionRef(subscription_id="s", resource_group="g", name="c")
PASSWORD = "pw-4f1c9d0e-never-stored-plain"


@pytest.fixture
def database(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Database]:
    with sealing_postgres_database(tmp_path_factory) as database:
        yield database


def read_version(database: Database, collection_id: int) -> str:
    with database.session() as session:
        basis = repo.find_create_basis(session, "s", "g", "c", "new")
        assert basis is not None and basis.collection.id == collection_id and basis.existing_id is None
        return basis.version


def new_job(collection_id: int, name: str = "new") -> JobRow:
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
    }
    return JobRow(
        collection_id=collection_id,
        name=name,
        name_key=name.lower(),
        definition=definition,
        state="Enabled",
        series_origin=T0,
        next_execution_time=T0 + timedelta(days=1),
        execution_count=0,
        failure_count=0,
        faulted_count=0,
        repeat_count=0,
        version=1,
        created_at=T0,
        updated_at=T0,
    )


def insert(database: Database, job: JobRow, version: str, max_jobs: int = 10) -> bool:
    with database.session() as session:
        repo.find_collection(session, "s", "g", "c")  # the transaction has begun, as in the API
        return write_scope(database, session).insert_if_unchanged(
            job, collection=REF, collection_version=version, max_jobs=max_jobs
        )


def job_names(database: Database, collection_id: int) -> list[str]:
    with database.session() as session:
        return sorted(session.scalars(select(JobRow.name).where(JobRow.collection_id == collection_id)))


def test_inserts_the_job_as_the_orm_would_with_its_secrets_sealed(database: Database) -> None:
    collection = add_collection(database)
    job = new_job(collection)
    assert insert(database, job, read_version(database, collection))
    with database.session() as session:
        stored = session.scalars(select(JobRow).where(JobRow.id == job.id)).one()
        raw = session.execute(text("SELECT definition::text FROM jobs WHERE id = :id"), {"id": job.id}).scalar_one()
    assert stored.definition == job.definition  # opened again on the way out
    assert (stored.next_execution_time, stored.series_origin, stored.version) == (T0 + timedelta(days=1), T0, 1)
    assert PASSWORD not in raw and "password" in raw


def test_nothing_is_written_when_the_collection_changed_after_it_was_read(database: Database) -> None:
    collection = add_collection(database)
    version = read_version(database, collection)
    with database.session() as session:  # a plan change committed between the read and the lock
        session.execute(update(JobCollectionRow).where(JobCollectionRow.id == collection).values(sku="P10Premium"))
    assert not insert(database, new_job(collection), version)
    assert job_names(database, collection) == []
    assert insert(database, new_job(collection), read_version(database, collection))  # read again: it goes in


def test_nothing_is_written_when_the_name_was_taken_meanwhile(database: Database) -> None:
    collection = add_collection(database)
    version = read_version(database, collection)
    add_job(database, collection, "NEW", T0)  # names are case-insensitive
    assert not insert(database, new_job(collection), version)
    with database.session() as session:
        [stored] = session.scalars(select(JobRow).where(JobRow.collection_id == collection))
    assert stored.name == "NEW" and stored.definition["action"]["request"].get("authentication") is None


def test_nothing_is_written_at_the_job_limit(database: Database) -> None:
    collection = add_collection(database)
    version = read_version(database, collection)
    add_job(database, collection, "first", T0)
    add_job(database, collection, "second", T0)
    assert not insert(database, new_job(collection), version, max_jobs=2)
    assert job_names(database, collection) == ["first", "second"]
    assert insert(database, new_job(collection), version, max_jobs=3)
    assert job_names(database, collection) == ["first", "new", "second"]


def test_the_insert_waits_for_the_lock_and_counts_what_its_holder_committed(database: Database) -> None:
    """The limit is checked after the lock is granted: a write holding it when the insert is sent, and adding
    the job that reaches the limit, makes the insert write nothing — although the job was read and built
    when there was room."""
    collection = add_collection(database)
    version = read_version(database, collection)
    outcome: list[bool] = []
    holder = database.session()
    session = holder.__enter__()
    try:
        repo.advisory_lock(session, LOCK)
        waiter = threading.Thread(target=lambda: outcome.append(insert(database, new_job(collection), version, 1)))
        waiter.start()
        waiter.join(1.0)
        assert waiter.is_alive() and outcome == [], "the insert went ahead while another write held the lock"
        session.execute(  # the holder's own job, counted once it commits
            text("INSERT INTO jobs (collection_id, name, name_key, definition, state, series_origin, execution_count,"
                 " failure_count, faulted_count, version, repeat_count, created_at, updated_at) VALUES (:c, 'held',"
                 " 'held', '{}', 'Disabled', now(), 0, 0, 0, 1, 0, now(), now())"),
            {"c": collection},
        )  # fmt: skip
    finally:
        holder.__exit__(None, None, None)
    waiter.join(30)
    assert outcome == [False]
    assert job_names(database, collection) == ["held"]
    with database.session() as session:
        assert session.scalar(select(func.count()).select_from(JobRow)) == 1


# -- the API's job create around it (service.jobs.put) -------------------------------------------------------


def put_job(database: Database, name: str) -> tuple[JobRow, bool]:
    raw = {"startTime": (T0 + timedelta(days=1)).isoformat(), "action": {"type": "Http", "request": {
        "uri": "http://127.0.0.1:1/", "method": "GET"}}}  # fmt: skip
    with database.session() as session:
        _, job, created = jobs.put_locking_late(
            write_scope(database, session), REF, name, raw, moment=T0, floor=timedelta(0)
        )
        return job, created


def test_a_create_whose_collection_changed_meanwhile_is_decided_again_under_the_lock(
    database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A quota set between the job's read and its insert: the insert writes nothing, and the create done again
    under the lock reads the collection afresh and refuses the job (not: inserts it by the plan read before)."""
    collection = add_collection(database)
    add_job(database, collection, "first", T0)
    guarded = repo.insert_job_if_unchanged

    def quota_set_meanwhile(session: Any, job: JobRow, **guard: Any) -> bool:
        with database.session() as other:
            other.execute(
                update(JobCollectionRow)
                .where(JobCollectionRow.id == collection)
                .values(properties={"state": "Enabled", "quota": {"maxJobCount": 1}})
            )
        return guarded(session, job, **guard)

    monkeypatch.setattr(repo, "insert_job_if_unchanged", quota_set_meanwhile)
    with pytest.raises(Conflict, match="already holds 1 jobs"):
        put_job(database, "second")
    assert job_names(database, collection) == ["first"]


def test_a_create_whose_name_was_taken_meanwhile_replaces_that_job(
    database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    collection = add_collection(database)
    guarded = repo.insert_job_if_unchanged

    def created_meanwhile(session: Any, job: JobRow, **guard: Any) -> bool:
        add_job(database, collection, "Twin", T0)
        return guarded(session, job, **guard)

    monkeypatch.setattr(repo, "insert_job_if_unchanged", created_meanwhile)
    job, created = put_job(database, "twin")
    assert not created and job.name == "Twin" and job.version == 2
    assert job_names(database, collection) == ["Twin"]


def test_a_lock_not_granted_in_time_is_sqlalchemys_error(database: Database) -> None:
    """The lock and the insert go through the session: a lock not granted within the session's lock_timeout is
    SQLAlchemy's OperationalError (the database's state: the API answers 503), the transaction writes nothing,
    and the pool's connection serves the next insert."""
    collection = add_collection(database)
    version = read_version(database, collection)
    with database.session() as holder:
        repo.advisory_lock(holder, LOCK)
        with pytest.raises(OperationalError, match="lock timeout"), database.session() as session:
            session.execute(text("SET LOCAL lock_timeout = '200ms'"))
            write_scope(database, session).insert_if_unchanged(
                new_job(collection), collection=REF, collection_version=version, max_jobs=10
            )
    assert job_names(database, collection) == []
    assert insert(database, new_job(collection), version)


def test_creates_into_one_collection_follow_its_changes(database: Database) -> None:
    """Each create reads the collection with the job's name in one statement before the lock: a change of plan
    between two creates rules the next (the create route's statements: that read, then the guarded insert, which
    takes the lock itself)."""
    collection = add_collection(database)
    statements: list[str] = []
    record = lambda _conn, _cursor, statement, *_: statements.append(statement)  # noqa: E731
    event.listen(database.engine, "before_cursor_execute", record)
    try:
        put_job(database, "first")
        assert [s.lstrip().split()[0] for s in statements] == ["SELECT", "INSERT"], statements
        assert "job_collections" in statements[0] and "scheduler_job_slot" in statements[1]
        with database.session() as session:  # a change of plan: the next create reads it
            session.execute(update(JobCollectionRow).where(JobCollectionRow.id == collection).values(sku="P10Premium"))
        job, created = put_job(database, "second")
        assert created and job.id is not None
    finally:
        event.remove(database.engine, "before_cursor_execute", record)
    assert job_names(database, collection) == ["first", "second"]


def test_a_create_commits_each_statement_until_it_takes_the_lock_which_a_transaction_then_holds(
    database: Database,
) -> None:
    """PostgresWriteScope.commit_each_statement_until_locked, as a create uses it on the event loop: before the lock
    each statement is a transaction of its own (no BEGIN, no COMMIT sent), so nothing is held between them; the
    first lock opens the transaction that holds it, and every statement after it is in that one transaction."""

    def work(session: Any) -> tuple[list[int], list[int], int]:
        scope = write_scope(database, session)
        scope.commit_each_statement_until_locked()
        before = [session.execute(text("SELECT txid_current()")).scalar() for _ in range(2)]
        scope.hold(LOCK)
        after = [session.execute(text("SELECT txid_current()")).scalar() for _ in range(2)]
        held = session.execute(
            text("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()")
        ).scalar()
        return before, after, held

    async def run() -> tuple[list[int], list[int], int]:
        try:
            return await database.in_transaction_on_loop(work)
        finally:
            await database.dispose_on_loop()

    before, after, held = asyncio.run(run())
    assert before[0] != before[1], before  # each its own transaction
    assert after[0] == after[1] and after[0] not in before, (before, after)  # one transaction from the lock on
    assert held == 1
