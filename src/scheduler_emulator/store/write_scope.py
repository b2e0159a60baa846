"""What one API write may ask of the store beyond reading and writing rows through its session: to hold write
locks (a job collection's, or any named one), (PostgreSQL) to insert a new job read and validated before its
collection's lock was taken, and to tell the other processes' dispatchers that something changed. The API context
builds the scope around the request's transaction, which it owns; the service sees neither a dialect, a lock's name
nor a commit. One class per database, chosen once by ``write_scope`` from ``Database.dialect``: nothing here asks a
session which database it is on, and a job create takes one route per database (service.jobs.put_locking_late)."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from sqlalchemy.orm import Session

from scheduler_emulator.store import repository as repo
from scheduler_emulator.store.database import Database
from scheduler_emulator.store.models import JobRow
from scheduler_emulator.store.wakeups import announce_in_file, notify_dispatchers


class NamedCollection(Protocol):
    """Where a job collection lives (service.refs.CollectionRef, or its row)."""

    @property
    def subscription_id(self) -> str: ...

    @property
    def resource_group(self) -> str: ...

    @property
    def name(self) -> str: ...


def collection_lock(subscription: str, resource_group: str, name: str) -> str:
    """The name of a collection's write lock (names compare case-insensitively, as in ARM)."""
    return f"collection:{subscription.lower()}/{resource_group.lower()}/{name.lower()}"


class WriteScope:
    """SQLite's (a file or in memory): the transaction holds the write turn from its first statement
    (store.database.WriteTurn), so there is no lock to take and a new job is never inserted before one
    (``inserts_before_locking`` False). In memory no other process shares it: nothing to announce. The base of
    the SQLite file's and PostgreSQL's."""

    inserts_before_locking = False

    def __init__(self, session: Session) -> None:
        self.session = session

    def hold(self, *keys: str) -> None:
        """Hold the write locks named ``keys`` (``collection_lock``, ``subscription:{id}``), taken in that order,
        until the transaction ends."""

    def lock(self, collection: NamedCollection) -> None:
        """Hold ``collection``'s write lock until the transaction ends."""
        self.hold(collection_lock(collection.subscription_id, collection.resource_group, collection.name))

    def announce_change(self, not_before: datetime | None = None) -> None:
        """Tell the dispatchers of every other process sharing the database, at commit, that jobs changed
        (``not_before``: store.wakeups.earliest_noted)."""

    def insert_if_unchanged(
        self, job: JobRow, *, collection: NamedCollection, collection_version: str, max_jobs: int
    ) -> bool:
        """Only where ``inserts_before_locking``: see PostgresWriteScope."""
        raise NotImplementedError("this store inserts a new job under its collection's lock, as any write")

    def commit_each_statement_until_locked(self) -> None:
        """Only where ``inserts_before_locking``, called before the scope's first statement: see
        PostgresWriteScope."""
        raise NotImplementedError("this store's transaction holds its write turn from the first statement")


class SqliteFileWriteScope(WriteScope):
    """A SQLite file's: as WriteScope, and a change is announced in the file itself (store.wakeups.announce_in_file),
    which the dispatchers of other processes sharing it watch."""

    def announce_change(self, not_before: datetime | None = None) -> None:
        announce_in_file(self.session, not_before)


class PostgresWriteScope(WriteScope):
    """PostgreSQL's: the lock is an advisory lock held to the end of the transaction; a new job read and
    validated before it is inserted by ``insert_if_unchanged``, so that writes into one collection queue on its
    lock only for the INSERT and the COMMIT."""

    inserts_before_locking = True

    def __init__(self, session: Session) -> None:
        super().__init__(session)
        self._locked: set[str] = set()
        self._each_statement_commits = False

    def commit_each_statement_until_locked(self) -> None:
        """Until the first lock is taken (``hold``, ``lock``), each statement commits by itself: a create that
        reads its basis and inserts in one statement each then sends neither BEGIN nor COMMIT, two of its four
        round trips (bench/README.md#the-apis-way-into-postgresql). Nothing read before the lock is protected
        in any case: the guarded insert checks that it still holds. The first lock opens the transaction that
        holds it to the end, as from the start otherwise."""
        self.session.connection(execution_options={"isolation_level": "AUTOCOMMIT"})
        self._each_statement_commits = True

    def hold(self, *keys: str) -> None:
        for key in keys:
            if key not in self._locked:
                if self._each_statement_commits:
                    # The driver sends no BEGIN of its own in autocommit; this one opens the transaction, which the
                    # session's commit (or rollback) then ends as any other.
                    self.session.connection().exec_driver_sql("BEGIN")
                    self._each_statement_commits = False
                repo.advisory_lock(self.session, key)
                self._locked.add(key)

    def announce_change(self, not_before: datetime | None = None) -> None:
        notify_dispatchers(self.session, not_before)

    def insert_if_unchanged(
        self, job: JobRow, *, collection: NamedCollection, collection_version: str, max_jobs: int
    ) -> bool:
        """Take ``collection``'s lock and insert the new ``job`` if what it was built from still holds, in one
        statement (store.repository.insert_job_if_unchanged: its name free, the collection still at
        ``collection_version``, fewer than ``max_jobs`` jobs). True: inserted; False: nothing written, the lock
        held, the session's objects expired (the caller reads them again under the lock). While each statement
        commits by itself (commit_each_statement_until_locked), the insert's lock ends with it: the caller's
        ``lock`` takes it again, in a transaction."""
        key = collection_lock(collection.subscription_id, collection.resource_group, collection.name)
        inserted = repo.insert_job_if_unchanged(
            self.session, job, lock=key, collection_version=collection_version, max_jobs=max_jobs
        )
        if not self._each_statement_commits:
            self._locked.add(key)  # taken by the insert, inserted or not, and held to the transaction's end
        return inserted


def write_scope(database: Database, session: Session) -> WriteScope:
    """The write scope of ``database``'s kind over ``session`` (the caller's transaction; no lock held yet)."""
    if database.dialect == "postgresql":
        return PostgresWriteScope(session)
    if database.on_disk:
        return SqliteFileWriteScope(session)
    return WriteScope(session)
