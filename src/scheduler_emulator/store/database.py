"""Engine, sessions and schema migrations. One `Database` per process, created at start-up."""

from __future__ import annotations

import ast
import fcntl
import functools
import math
import os
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, ThreadPoolExecutor
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar, cast

from sqlalchemy import (
    JSON,
    Connection,
    Engine,
    Table,
    create_engine,
    event,
    insert,
    inspect,
    select,
    text,
    type_coerce,
    update,
)
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DisconnectionError, OperationalError
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, create_async_engine
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import StaticPool

from scheduler_emulator.store.models import EmulatorSettingRow, JobRow
from scheduler_emulator.store.secrets import SecretBox, SecretKeyMismatch, secret_values

SECRET_KEY_CHECK = "secret-key-check"  # sealed into emulator_settings: proves a key is the database's


def migrations_dir() -> Path:
    """The Alembic scripts: inside the installed package, or the repository's top-level folder."""
    here = Path(__file__).resolve().parent.parent
    packaged = here / "migrations"
    return packaged if packaged.is_dir() else here.parent.parent / "migrations"


_REVISION_LINE = re.compile(r"^(revision|down_revision)\s*(?::[^=\n]*)?=\s*(.+?)\s*$", re.MULTILINE)


@functools.cache
def head_revisions() -> frozenset[str] | None:
    """The newest revision(s) of the migration scripts, read from their ``revision = ...`` and
    ``down_revision = ...`` lines without loading Alembic (its imports and scripts cost a start ~0.3 s of CPU);
    None when a script does not state them as plain literals (Alembic then decides, as before)."""
    revisions: set[str] = set()
    parents: set[str] = set()
    for script in (migrations_dir() / "versions").glob("*.py"):
        found = dict(_REVISION_LINE.findall(script.read_text()))
        try:
            revision = ast.literal_eval(found["revision"])
            down = ast.literal_eval(found["down_revision"])
        except (KeyError, ValueError, SyntaxError):
            return None
        downs = (down,) if isinstance(down, str) else () if down is None else down
        if not isinstance(revision, str) or not isinstance(downs, tuple | list):
            return None
        if not all(isinstance(parent, str) for parent in downs):
            return None
        revisions.add(revision)
        parents.update(downs)
    heads = revisions - parents
    return frozenset(heads) or None


T = TypeVar("T")
READERS = 2  # a SQLite file's reader threads (Database.reader)
SQLITE_BUSY_SECONDS = 30.0  # how long a SQLite write waits for its turn (the driver's timeout, and WriteTurn's)
WORKERS = 30  # threads for the API's transactions of an in-memory SQLite database (Database.workers)
# PostgreSQL pools (connections kept open, then opened beyond them for a while). A pool smaller than the requests
# in flight opens a connection and closes it again for every request beyond it: with 16 clients creating jobs
# through a pool of 10 that cost PostgreSQL's processes about twice the CPU per create (a new backend each time;
# bench/api_process_cpu.py, bench/README.md#the-apis-way-into-postgresql).
POOL_SIZE = 20
POOL_OVERFLOW = 10
IDLE_PING_SECONDS = 1.0  # a pooled connection unused this long is checked before it is handed out


def _ping_when_idle(engine: Engine) -> None:
    """Check a pooled PostgreSQL connection before use only when it sat idle (SQLAlchemy's pre-ping recipe,
    gated by idleness): connections that were idle while the server restarted are replaced before a request
    sees them, while a busy pool pays no round trip per transaction (pre-ping on every checkout cost an API
    write ~25 % of its CPU and every dispatcher transaction one more round trip). A connection that breaks
    while busy is invalidated with the rest of the pool by SQLAlchemy at its first failure."""

    @event.listens_for(engine, "checkin")
    def _returned(_dbapi_connection: Any, record: Any) -> None:
        record.info["returned"] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _check_if_idle(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        returned = record.info.get("returned")
        if returned is not None and time.monotonic() - returned > IDLE_PING_SECONDS:
            try:
                engine.dialect.do_ping(dbapi_connection)
            except Exception as exc:  # noqa: BLE001 - any failure: the pool replaces it and retries
                raise DisconnectionError(str(exc)) from exc


@dataclass(frozen=True, slots=True)
class LoopEngines:
    """PostgreSQL's async engine (Database.loop_engines) and its two views: read transactions as Database.read_session's
    (one snapshot, read-only), and reads of one statement outside a transaction (as statement_connection's)."""

    writes: AsyncEngine
    reads: AsyncEngine
    statements: AsyncEngine


@dataclass(frozen=True, slots=True)
class ConnectionBounds:
    """Time bounds set on every PostgreSQL connection a process opens, in seconds (0: none), so that no process,
    frozen (SIGSTOP, a paused VM) or cut off (a network partition), holds row or advisory locks for longer than
    a lease: PostgreSQL ends a session left idle inside a transaction (``idle_in_transaction_session_timeout``),
    a wait for a lock (``lock_timeout``) and a statement (``statement_timeout``) past their bound, and both ends
    probe a silent connection with TCP keepalives (and ``tcp_user_timeout`` for unacknowledged data), so a dead
    peer is noticed within ``keepalive`` seconds instead of the system's two hours. Set at connection start (no
    round trip per transaction). Migrations lift the three timeouts for their own transaction."""

    statement: float
    lock: float
    idle_in_transaction: float
    keepalive: float

    @classmethod
    def for_lease(
        cls,
        lease: float,
        *,
        statement: float | None = None,
        lock: float | None = None,
        idle_in_transaction: float | None = None,
        keepalive: float | None = None,
    ) -> ConnectionBounds:
        """The bounds for dispatchers whose leases last ``lease`` seconds; each one given (not None) wins. Defaults:
        a statement may run one lease; a lock wait and an idle transaction end after a third of one (at least
        1 s), so that a frozen process's claim is released well within the lease others wait for before they
        take over; a dead peer is noticed within half a lease (at least 3 s)."""
        third = max(1.0, lease / 3)
        return cls(
            statement=lease if statement is None else statement,
            lock=third if lock is None else lock,
            idle_in_transaction=third if idle_in_transaction is None else idle_in_transaction,
            keepalive=max(3.0, lease / 2) if keepalive is None else keepalive,
        )

    def server_options(self) -> str:
        """libpq's ``options``: the server-side settings of the session."""
        settings = {
            "statement_timeout": _milliseconds(self.statement),
            "lock_timeout": _milliseconds(self.lock),
            "idle_in_transaction_session_timeout": _milliseconds(self.idle_in_transaction),
        }
        if self.keepalive > 0:
            idle, interval, count = self._probes()
            settings.update(
                tcp_keepalives_idle=idle,
                tcp_keepalives_interval=interval,
                tcp_keepalives_count=count,
                tcp_user_timeout=_milliseconds(self.keepalive),
            )
        return " ".join(f"-c {name}={value}" for name, value in settings.items())

    def client_parameters(self) -> dict[str, int]:
        """libpq's keepalive parameters for the client's end of the connection."""
        if self.keepalive <= 0:
            return {}
        idle, interval, count = self._probes()
        return {
            "keepalives": 1,
            "keepalives_idle": idle,
            "keepalives_interval": interval,
            "keepalives_count": count,
            "tcp_user_timeout": _milliseconds(self.keepalive),
        }

    def _probes(self) -> tuple[int, int, int]:
        """(idle, interval, count) in whole seconds: silent for half of ``keepalive``, then three probes over the
        other half."""
        idle = max(1, math.floor(self.keepalive / 2))
        interval = max(1, math.floor((self.keepalive - idle) / 3))
        return idle, interval, 3


def _milliseconds(seconds: float) -> int:
    return max(0, round(seconds * 1000))


class WriteTurn:
    """SQLite's one writer at a time: among this process's threads, a re-entrant lock; among the processes that
    share the file (the service's and its dispatcher child's: dispatcher/child.py), an exclusive ``flock`` on a file
    beside it (``<file>.lock``), held while the outermost turn lasts. A turn begins before the transaction's first
    statement, so the reads a write depends on (a claim's due jobs, a PUT's current job) see what no other process
    can change until it commits. Without it, each process's statements interleaved: the driver begins a
    transaction only at the first write, so a SELECT before it read outside any, and the database's own lock
    arbitrated only with its busy handler's sleeps (1 to 100 ms). The file lock is polled rather than waited on in
    the kernel so that a process frozen while it holds it (SIGSTOP) cannot stall this one's writers for longer than
    ``SQLITE_BUSY_SECONDS``: the write then fails as the database's own lock would have ("database is locked").
    ``path`` None (a database in memory, one process's): the thread lock alone."""

    POLL_FIRST = 0.0001  # seconds: the first wait for a file lock another process holds, doubled up to POLL_MOST
    POLL_MOST = 0.001

    def __init__(self, path: Path | None, patience: float = SQLITE_BUSY_SECONDS) -> None:
        self._lock = threading.RLock()
        self._path = path
        self._patience = patience
        self._fd: int | None = None
        self._owner = 0  # the pid that opened _fd: a forked child opens its own (a shared one would not exclude it)
        self._depth = 0

    def __enter__(self) -> None:
        self._lock.acquire()
        if self._path is None or self._depth:
            self._depth += 1
            return
        try:
            self._take_file_lock()
        except BaseException:
            self._lock.release()
            raise
        self._depth = 1

    def __exit__(self, *_exc: object) -> None:
        self._depth -= 1
        try:
            if self._depth == 0 and self._fd is not None:
                fcntl.flock(self._fd, fcntl.LOCK_UN)
        finally:
            self._lock.release()

    def _take_file_lock(self) -> None:
        assert self._path is not None
        if self._fd is None or self._owner != os.getpid():
            self._fd = os.open(self._path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            self._owner = os.getpid()
        deadline = time.monotonic() + self._patience
        pause = self.POLL_FIRST
        while True:
            try:
                fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise OperationalError(
                        "(write turn)",
                        None,
                        sqlite3.OperationalError(
                            f"database is locked: another process held its write lock for {self._patience:g} s"
                        ),
                    ) from None
                time.sleep(pause)
                pause = min(pause * 2, self.POLL_MOST)

    def close(self) -> None:
        with self._lock:
            if self._fd is not None and self._owner == os.getpid():
                os.close(self._fd)
            self._fd = None


MIGRATION_LOCK = "SELECT pg_advisory_xact_lock(hashtext('scheduler-emulator:migrations'))"


def hold_migration_lock(connection: Connection) -> None:
    """On PostgreSQL, take the migrations' advisory lock for the rest of ``connection``'s transaction (the upgrade
    and its commit), waiting as long as another process holds it, and lift this session's time bounds for that
    transaction: a migration (and a wait for another's) may take longer than a dispatcher's statement. Without
    the lock, processes started together on an empty database each ran ``CREATE TABLE alembic_version`` and all
    but one crashed on PostgreSQL's unique index of type names (issue 29). Elsewhere a no-op (SQLite: the
    migration holds the write turn, and the service migrates before its dispatcher's process starts)."""
    if connection.dialect.name != "postgresql":
        return
    for name in ("lock_timeout", "statement_timeout", "idle_in_transaction_session_timeout"):
        connection.exec_driver_sql(f"SET LOCAL {name} = 0")
    connection.exec_driver_sql(MIGRATION_LOCK)


class Database:
    """Owns the engine and hands out sessions; applies migrations with :meth:`migrate`."""

    def __init__(self, url: str, secret_box: SecretBox | None = None, bounds: ConnectionBounds | None = None) -> None:
        """``bounds``: time bounds for PostgreSQL connections (see ConnectionBounds); None: the server's own."""
        self.url = url
        self.bounds = bounds
        self.secret_box = secret_box
        self.dialect = url.split(":", 1)[0].split("+", 1)[0]
        kwargs: dict[str, Any] = {}
        self._lock: WriteTurn | None = None
        if self.dialect == "sqlite":
            kwargs["connect_args"] = {"check_same_thread": False, "timeout": SQLITE_BUSY_SECONDS}
            # SQLite has one writer at a time; queueing on a lock here is fairer and faster than its busy
            # handler's back-off sleeps (and avoids "database is locked" when a reader upgrades to a writer).
            if url in ("sqlite://", "sqlite:///:memory:"):
                kwargs["poolclass"] = StaticPool  # one shared connection holds the in-memory database
                self._lock = WriteTurn(None)
            else:
                file = Path(url.removeprefix("sqlite:///"))
                file.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
                self._lock = WriteTurn(file.with_name(file.name + ".lock"))
        elif self.dialect == "postgresql":
            url = url.replace("postgresql://", "postgresql+psycopg://", 1) if "+" not in url.split(":")[0] else url
            connect_args: dict[str, Any] = {"connect_timeout": 5}
            if bounds is not None:
                connect_args.update(bounds.client_parameters())
                given = make_url(url).query.get("options")  # the operator's own (in the URL) come last: they win
                own = bounds.server_options()
                connect_args["options"] = f"{own} {given}" if isinstance(given, str) and given else own
            kwargs.update(pool_size=POOL_SIZE, max_overflow=POOL_OVERFLOW, pool_timeout=10, connect_args=connect_args)
        # hide_parameters: a failed statement's error (logged) never shows its values: job definitions, secrets.
        self.engine: Engine = create_engine(url, hide_parameters=True, **kwargs)
        # Read by the definition column's type (store.models.SealedJSON); without a box, secrets pass as they are.
        self.engine.dialect.scheduler_secret_box = secret_box  # type: ignore[attr-defined]
        if self.dialect == "sqlite":
            event.listen(self.engine, "connect", _sqlite_pragmas)
        elif self.dialect == "postgresql":
            _ping_when_idle(self.engine)
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)
        self._loop_url = url if self.dialect == "postgresql" else None
        self._loop_kwargs = kwargs
        self._loop_engines: LoopEngines | None = None
        self._writer: ThreadPoolExecutor | None = None
        self._reader: ThreadPoolExecutor | None = None
        self._workers: ThreadPoolExecutor | None = None
        self._executors_guard = threading.Lock()
        self._read_sessions = self._sessions
        self._statement_engine: Engine | None = None
        self._read_lock: WriteTurn | None = self._lock
        self.read_engine: Engine = self.engine
        if self.dialect == "sqlite" and kwargs.get("poolclass") is not StaticPool:
            # Readers of a file database need no turn on the write lock: in WAL mode a reader works from the
            # last committed snapshot while one writer goes on. Their own engine, whose connections refuse
            # writes and read each transaction from one snapshot (see _sqlite_read_only).
            self.read_engine = create_engine(url, hide_parameters=True, **kwargs)
            self.read_engine.dialect.scheduler_secret_box = secret_box  # type: ignore[attr-defined]
            event.listen(self.read_engine, "connect", _sqlite_read_only)
            event.listen(self.read_engine, "begin", _sqlite_begin)
            self._read_sessions = sessionmaker(self.read_engine, expire_on_commit=False)
            self._statement_engine = self.read_engine.execution_options(**{ONE_STATEMENT: True})
            self._read_lock = None
        elif self.dialect == "postgresql":
            # One snapshot for the whole read (REPEATABLE READ), read-only. At READ COMMITTED each statement saw
            # what had been committed before it, so a read of several statements could see a dispatcher's commit
            # halfway: a classic job's history showed the new entry beside the job's state from before it. A
            # read-only transaction at REPEATABLE READ never fails to serialize; the pool is the same.
            self.read_engine = self.engine.execution_options(
                isolation_level="REPEATABLE READ", postgresql_readonly=True
            )
            self._read_sessions = sessionmaker(self.read_engine, expire_on_commit=False)
            self._statement_engine = self.engine.execution_options(isolation_level="AUTOCOMMIT")

    @property
    def on_disk(self) -> bool:
        """Whether the store outlives this process (PostgreSQL, a SQLite file; not a database in memory)."""
        return self.url not in ("sqlite://", "sqlite:///:memory:")

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A session in a transaction: committed on success, rolled back on error."""
        with self._lock or nullcontext(), self._sessions() as session, session.begin():
            yield session

    @property
    def on_loop(self) -> bool:
        """Whether the API's store work runs on the event loop (PostgreSQL: ``in_transaction_on_loop`` and its
        two siblings) rather than on this database's threads (SQLite: ``writer``, ``reader``, ``workers``)."""
        return self._loop_url is not None

    def loop_engines(self) -> LoopEngines:
        """PostgreSQL's engines for the event loop: SQLAlchemy's async engine over psycopg's async connections,
        with the same pool bounds, connection settings, idle ping and secret box as ``engine``. Made at first use,
        on the loop that serves the API (a process that never serves it opens none)."""
        if self._loop_url is None:
            raise RuntimeError("only a PostgreSQL database runs its API work on the event loop")
        if self._loop_engines is None:
            engine = create_async_engine(self._loop_url, hide_parameters=True, **self._loop_kwargs)
            engine.sync_engine.dialect.scheduler_secret_box = self.secret_box  # type: ignore[attr-defined]
            _ping_when_idle(engine.sync_engine)
            self._loop_engines = LoopEngines(
                engine,
                engine.execution_options(isolation_level="REPEATABLE READ", postgresql_readonly=True),
                engine.execution_options(isolation_level="AUTOCOMMIT"),
            )
        return self._loop_engines

    async def in_transaction_on_loop(self, work: Callable[[Session], T]) -> T:
        """PostgreSQL: ``work`` in one transaction (as ``session``), run on the event loop by SQLAlchemy's async
        engine (``AsyncSession.run_sync``): the same synchronous code as on a thread, each statement awaited on
        the loop instead of blocking it. A create moved off a worker thread this way cost the API's process
        about a fifth less CPU: no hand-over to a thread and back, no interpreter lock passed between sixteen
        threads (bench/README.md#the-apis-way-into-postgresql). Committed on success, rolled back on error."""
        async with AsyncSession(self.loop_engines().writes, expire_on_commit=False) as session, session.begin():
            return await session.run_sync(work)

    async def in_read_transaction_on_loop(self, work: Callable[[Session], T]) -> T:
        """PostgreSQL: as ``read_session``, on the event loop (see in_transaction_on_loop)."""
        async with AsyncSession(self.loop_engines().reads, expire_on_commit=False) as session, session.begin():
            return await session.run_sync(work)

    async def on_statement_connection_on_loop(self, work: Callable[[Connection], T]) -> T:
        """PostgreSQL: as ``statement_connection``, on the event loop (see in_transaction_on_loop)."""
        async with self.loop_engines().statements.connect() as connection:
            return await connection.run_sync(work)

    async def dispose_on_loop(self) -> None:
        """``dispose``, closing the event loop's connections first, on the loop they belong to."""
        if self._loop_engines is not None:
            await self._loop_engines.writes.dispose()
            self._loop_engines = None
        self.dispose()

    def writer(self) -> Executor | None:
        """SQLite: the one thread that runs the API's transactions, one after another (None elsewhere). They
        take turns on the write lock anyway: queued for one thread that stays busy while they keep coming, they
        no longer hand the lock (and the interpreter's) from one waiting worker thread to the next, which was
        a sixth of a PUT's CPU with 16 clients. PostgreSQL's transactions run side by side on a pool."""
        if self._lock is None:
            return None
        with self._executors_guard:
            if self._writer is None:
                self._writer = ThreadPoolExecutor(1, thread_name_prefix="sqlite-writer")
            return self._writer

    def reader(self) -> Executor | None:
        """A SQLite file's two threads that run the API's reads (None elsewhere: PostgreSQL's reads and an
        in-memory database's run on the shared worker threads). Each read on a worker thread from a pool of
        forty woke a thread that had gone idle and handed the interpreter lock to it and back; two threads that
        stay busy while GETs keep coming cost a quarter less CPU per GET (bench/README.md#the-databases-threads).
        Two rather than one: a slow read (a large page, an export) does not hold up every other."""
        if self.dialect != "sqlite" or self._read_lock is not None:
            return None
        with self._executors_guard:
            if self._reader is None:
                self._reader = ThreadPoolExecutor(READERS, thread_name_prefix="sqlite-reader")
            return self._reader

    def workers(self) -> Executor:
        """The threads that run the API's other transactions (PostgreSQL's, side by side on the pool; an in-memory
        database's reads). A plain executor rather than anyio's worker threads (``run_in_threadpool``): with 16
        clients creating jobs on PostgreSQL, anyio's hand-over (its capacity limiter, cancel scope and queue) was
        a tenth of the event loop's share of a PUT (bench/README.md#the-databases-threads)."""
        with self._executors_guard:
            if self._workers is None:
                self._workers = ThreadPoolExecutor(WORKERS, thread_name_prefix="db-worker")
            return self._workers

    @contextmanager
    def read_session(self) -> Iterator[Session]:
        """A session for reads only, in one transaction that sees what was committed before it began. On a
        SQLite file it takes no turn on the write lock: it neither waits for a writer (or a dispatcher's claim)
        nor holds one up, and a write through it fails. On PostgreSQL (no such lock) it is a read-only
        REPEATABLE READ transaction: one snapshot, and a write through it fails. An in-memory SQLite database
        (one shared connection) reads through :meth:`session`."""
        with self._read_lock or nullcontext(), self._read_sessions() as session, session.begin():
            yield session

    @contextmanager
    def statement_connection(self) -> Iterator[Connection]:
        """A connection for a read of one statement (a job with its collection, a collection), outside any
        transaction and without an ORM session: the statement reads one snapshot by itself, and its rows are
        read as they are (store.repository's one-statement reads). A BEGIN and a COMMIT cost more than the
        read: on SQLite each is a call that lets go of the interpreter lock, to wait for it again behind the
        dispatcher's thread while fires run; on PostgreSQL each is a round trip. A session and the entities it
        builds cost more again: on PostgreSQL a job read through a session took 1.28 ms of CPU against 0.51 ms
        for the same select on a connection (bench/README.md#reads-of-one-statement). Reads of more than one
        statement use read_session. An in-memory SQLite database reads on its one connection, in turn."""
        if self._statement_engine is None:
            with self._read_lock or nullcontext(), self.engine.connect() as connection:
                yield connection
            return
        with self._statement_engine.connect() as connection:
            yield connection

    def migrate(self) -> None:
        """Bring the schema to the newest Alembic revision. On PostgreSQL the whole upgrade holds one
        advisory lock (see hold_migration_lock): processes started together on an empty database take turns,
        the first creates the schema and the others find it at the newest revision. A database already at the
        newest revision (every start but the first) is recognised with one query, without loading Alembic."""
        if self.at_head():
            return
        from alembic import command
        from alembic.config import Config

        config = Config()
        config.set_main_option("script_location", str(migrations_dir()))
        with self._lock or nullcontext(), self.engine.begin() as connection:
            hold_migration_lock(connection)
            config.attributes["connection"] = connection
            command.upgrade(config, "head")

    def at_head(self) -> bool:
        """Whether the schema is at the newest revision of the scripts (head_revisions). Alembic writes the
        revision in the transaction of the migration that reaches it, so a database that shows it is complete."""
        heads = head_revisions()
        if heads is None:
            return False
        with self._lock or nullcontext(), self.engine.connect() as connection:
            if not inspect(connection).has_table("alembic_version"):
                return False
            current = set(connection.scalars(text("SELECT version_num FROM alembic_version")))
        return current == heads

    def prepare_secrets(self) -> None:
        """Check the secret key against the database; SecretKeyMismatch when it is not the key the stored
        secrets were sealed with. On the first start with a key, seal the plaintext secrets written by
        earlier versions, once (one transaction, together with the key's check value)."""
        box = self.secret_box
        if box is None:
            return
        jobs = cast(Table, JobRow.__table__)
        settings = cast(Table, EmulatorSettingRow.__table__)
        with self._lock or nullcontext(), self.engine.begin() as connection:
            if self.dialect == "postgresql":  # processes starting together: one seals, the others check
                connection.execute(text("SELECT pg_advisory_xact_lock(hashtext('scheduler-emulator:secrets'))"))
            check = connection.scalar(select(settings.c.value).where(settings.c.name == SECRET_KEY_CHECK))
            if check is not None:
                if box.open(check) != SECRET_KEY_CHECK:
                    raise SecretKeyMismatch("the secret key's check value does not match")
                return
            # Read as plain JSON (no opening: nothing is sealed yet); writing through the column's type seals.
            raw = connection.execute(select(jobs.c.id, type_coerce(jobs.c.definition, JSON).label("definition")))
            sealed = 0
            for row in raw.all():
                if next(secret_values(row.definition), None) is not None:
                    sealed += 1
                    connection.execute(update(jobs).where(jobs.c.id == row.id).values(definition=row.definition))
            connection.execute(insert(settings).values(name=SECRET_KEY_CHECK, value=box.seal(SECRET_KEY_CHECK)))
        if sealed and self.dialect == "sqlite" and self.url not in ("sqlite://", "sqlite:///:memory:"):
            # SQLite leaves replaced rows' bytes in free pages and in the write-ahead log: rebuild the file and
            # empty the log, so the plaintext is gone from the disk too.
            with self._lock or nullcontext(), self.engine.connect() as connection:
                autocommit = connection.execution_options(isolation_level="AUTOCOMMIT")
                autocommit.exec_driver_sql("VACUUM")
                autocommit.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")

    def dispose(self) -> None:
        with self._executors_guard:
            executors = [self._writer, self._reader, self._workers]
            self._writer = self._reader = self._workers = None
        for executor in executors:
            if executor is not None:
                executor.shutdown(wait=True)
        self.engine.dispose()
        if self.read_engine is not self.engine:
            self.read_engine.dispose()
        if self._lock is not None:
            self._lock.close()


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


def _sqlite_read_only(dbapi_connection: Any, record: Any) -> None:
    """A reader's connection: the pragmas of every connection, then no writes (``query_only``), and
    transactions begun by _sqlite_begin rather than by the driver (which begins one only before a write, so
    each SELECT would otherwise read its own snapshot)."""
    _sqlite_pragmas(dbapi_connection, record)
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA query_only=ON")
    cursor.close()
    dbapi_connection.isolation_level = None


def _sqlite_begin(connection: Connection) -> None:
    """Begin a reader's transaction: its first SELECT takes the snapshot the rest of the transaction reads
    (SQLAlchemy's recipe for pysqlite's transactions); none for a read of one statement (statement_connection)."""
    if not connection.get_execution_options().get(ONE_STATEMENT):
        connection.exec_driver_sql("BEGIN")


ONE_STATEMENT = "scheduler_one_statement"  # an execution option: the connection reads one statement, no BEGIN
