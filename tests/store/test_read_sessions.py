"""Readers (Database.read_session), on a SQLite file and on PostgreSQL: a read completes while a writer holds its
transaction open (on SQLite it takes no turn on the process's write lock), sees only what was committed, sees a
write once it is committed, reads one snapshot for the whole of its transaction, and cannot write. An in-memory
SQLite database (one shared connection) keeps reads behind the lock.

One snapshot matters on PostgreSQL too: a read of several statements (a classic job's history, which shows the
job's state beside each entry) read at READ COMMITTED saw a dispatcher's commit between two statements, the new
history entry beside the job's state from before it."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from support.databases import fresh_database

from scheduler_emulator.store.database import Database

BOUND = 60.0  # seconds: only a reader that is blocked waits this long


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Database]:
    with fresh_database(request.param, tmp_path_factory) as url:
        db = Database(url)
        try:
            db.migrate()
            with db.session() as session:
                session.execute(text("CREATE TABLE probe (value INTEGER NOT NULL)"))
                session.execute(text("INSERT INTO probe (value) VALUES (1)"))
            yield db
        finally:
            db.dispose()


def _values(db: Database) -> list[int]:
    with db.read_session() as session:
        return [row[0] for row in session.execute(text("SELECT value FROM probe ORDER BY value"))]


def _read_in_thread(db: Database) -> list[int] | None:
    """The values a read on another thread returned, or None when it did not finish within BOUND."""
    seen: list[list[int]] = []
    reader = threading.Thread(target=lambda: seen.append(_values(db)), daemon=True)
    reader.start()
    reader.join(BOUND)
    return seen[0] if seen else None


def test_a_read_is_not_blocked_by_a_writer_holding_its_transaction_and_sees_only_committed_rows(
    database: Database,
) -> None:
    written = threading.Event()
    release = threading.Event()
    failures: list[BaseException] = []

    def write() -> None:
        try:
            with database.session() as session:  # holds the write lock and an open write transaction
                session.execute(text("INSERT INTO probe (value) VALUES (2)"))
                session.flush()
                written.set()
                release.wait(BOUND)
        except BaseException as exc:  # noqa: BLE001 - reported by the test below
            failures.append(exc)
            written.set()

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    try:
        assert written.wait(BOUND)
        assert _read_in_thread(database) == [1], "the read finished while the writer held its transaction"
    finally:
        release.set()
        writer.join(BOUND)
    assert not failures
    assert _values(database) == [1, 2], "once committed, the write is seen"


def test_a_read_transaction_reads_one_snapshot(database: Database) -> None:
    with database.read_session() as session:
        first = session.execute(text("SELECT count(*) FROM probe")).scalar_one()
        with database.session() as writer:
            writer.execute(text("INSERT INTO probe (value) VALUES (3)"))
        again = session.execute(text("SELECT count(*) FROM probe")).scalar_one()
    assert (first, again) == (1, 1)
    assert _values(database) == [1, 3]


def test_a_one_statement_read_holds_no_transaction_and_leaves_the_pool_as_it_was(database: Database) -> None:
    """Database.statement_connection (a GET of one job or collection): no BEGIN, so each statement reads what was
    committed before it; the connection goes back to the pool with its transactions as before."""
    for _ in range(3):  # more reads than the pool's idle connections, so a connection it used is used again
        with database.statement_connection() as connection:
            first = connection.execute(text("SELECT count(*) FROM probe")).scalar_one()
            with database.session() as writer:
                writer.execute(text("INSERT INTO probe (value) VALUES (6)"))
            again = connection.execute(text("SELECT count(*) FROM probe")).scalar_one()
        assert again == first + 1
    with database.read_session() as session:
        first = session.execute(text("SELECT count(*) FROM probe")).scalar_one()
        with database.session() as writer:
            writer.execute(text("INSERT INTO probe (value) VALUES (7)"))
        assert session.execute(text("SELECT count(*) FROM probe")).scalar_one() == first
    with pytest.raises(DBAPIError, match="readonly|read-only"), database.read_session() as session:
        session.execute(text("INSERT INTO probe (value) VALUES (8)"))


def test_a_write_through_a_read_session_fails(database: Database) -> None:
    with pytest.raises(DBAPIError, match="readonly|read-only"), database.read_session() as session:
        session.execute(text("INSERT INTO probe (value) VALUES (4)"))
    assert _values(database) == [1]


def test_in_memory_reads_share_the_one_connection_and_its_lock() -> None:
    db = Database("sqlite://")
    db.migrate()
    try:
        with db.session() as session:
            session.execute(text("CREATE TABLE probe (value INTEGER NOT NULL)"))
            session.execute(text("INSERT INTO probe (value) VALUES (5)"))
        assert _values(db) == [5]
        assert db.read_engine is db.engine
    finally:
        db.dispose()


def test_only_a_sqlite_files_reads_have_reader_threads_of_their_own(database: Database) -> None:
    """A SQLite file's API reads run on its two reader threads (Database.reader); PostgreSQL's run side by side on
    the shared worker threads, as many as its pool allows, and so does an in-memory database's."""
    reader = database.reader()
    if database.dialect == "sqlite":
        assert reader is not None and reader is database.reader()
        names = {reader.submit(lambda: threading.current_thread().name).result(BOUND) for _ in range(8)}
        assert names and all(name.startswith("sqlite-reader") for name in names), names
    else:
        assert reader is None
    memory = Database("sqlite://")
    try:
        assert memory.reader() is None
    finally:
        memory.dispose()


def test_postgresqls_api_transactions_run_side_by_side_on_the_databases_worker_threads(database: Database) -> None:
    """The API's transactions without a thread of their own (PostgreSQL's; an in-memory database's reads) run on
    the database's worker threads (Database.workers): one executor, several transactions at once (each waits
    here until all have started), and closed with the database."""
    if database.dialect == "sqlite":
        assert database.writer() is not None  # a SQLite file's writes take turns on its one writer thread
    workers = database.workers()
    assert workers is database.workers()
    started = threading.Barrier(4, timeout=BOUND)

    def read_while_the_others_read() -> str:
        with database.read_session() as session:
            session.execute(text("SELECT value FROM probe")).all()
            started.wait()  # all four are inside a transaction at the same time
        return threading.current_thread().name

    names = [f.result(BOUND) for f in [workers.submit(read_while_the_others_read) for _ in range(4)]]
    assert len(set(names)) == 4 and all(name.startswith("db-worker") for name in names), names
    database.dispose()
    with pytest.raises(RuntimeError):
        workers.submit(lambda: None)
