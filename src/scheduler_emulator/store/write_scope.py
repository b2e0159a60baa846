"""What one API write may ask of the store beyond reading and writing rows through its session: to hold write
locks (a job collection's, or any named one), (PostgreSQL) to insert a new job under its collection's lock in one
round trip, and to tell the other processes' dispatchers that something changed. The API context builds the scope
around the request's transaction, which it owns; the service sees neither a dialect, a lock's name nor a commit.
One class per database, chosen once by ``write_scope`` from ``Database.dialect``: nothing here asks a session
which database it is on."""

from __future__ import annotations

import threading
import weakref
from datetime import datetime
from typing import Protocol

from sqlalchemy.orm import Session

from scheduler_emulator.store import repository as repo
from scheduler_emulator.store.database import Database
from scheduler_emulator.store.loop_reads import LoopReads
from scheduler_emulator.store.models import JobCollectionRow, JobRow
from scheduler_emulator.store.wakeups import EVERY_CHANGE, WAKE_AT_ONCE, announce_in_file, notify_dispatchers


class NamedCollection(Protocol):
    """Where a job collection lives (service.collections.CollectionRef, or its row)."""

    @property
    def subscription_id(self) -> str: ...

    @property
    def resource_group(self) -> str: ...

    @property
    def name(self) -> str: ...


def collection_lock(subscription: str, resource_group: str, name: str) -> str:
    """The name of a collection's write lock (names compare case-insensitively, as in ARM)."""
    return f"collection:{subscription.lower()}/{resource_group.lower()}/{name.lower()}"


class KnownCollections:
    """The collections a process read last, each with its row's version (store.repository's
    ``_collection_version``: PostgreSQL's ``xmin``), by name: a new job may be built from one without reading
    the collection again, because the insert that writes it checks the version (insert_if_unchanged). A stale
    entry costs only that check's failure, after which the job is written the long way and the entry
    forgotten. Shared by the process's threads; holds at most ``LIMIT`` collections (those read from the
    database longest ago go first)."""

    LIMIT = 4096

    def __init__(self) -> None:
        self._rows: dict[str, tuple[JobCollectionRow, str]] = {}
        self._guard = threading.Lock()

    def get(self, collection: NamedCollection) -> tuple[JobCollectionRow, str] | None:
        """The collection's row as last read (detached from its session: read it, never change it or add it to
        a session) and its version; None when not known."""
        return self._rows.get(_key(collection))

    def remember(self, collection: NamedCollection, row: JobCollectionRow, version: str) -> None:
        with self._guard:
            self._rows[_key(collection)] = (row, version)
            while len(self._rows) > self.LIMIT:
                del self._rows[next(iter(self._rows))]

    def forget(self, collection: NamedCollection) -> None:
        with self._guard:
            self._rows.pop(_key(collection), None)


def _key(collection: NamedCollection) -> str:
    return collection_lock(collection.subscription_id, collection.resource_group, collection.name)


class WriteScope:
    """An in-memory SQLite database's: one session writes at a time already, so there is no lock to take, a new
    job is never inserted before it (``inserts_before_locking`` False), and the only dispatcher is this
    process's, which the API wakes itself. The base of the others."""

    inserts_before_locking = False

    def __init__(self, session: Session, wake_horizon: datetime | None = None) -> None:
        """``wake_horizon``: set when the write may wake the dispatchers (see write_scope)."""
        self.session = session
        self.wake_horizon = wake_horizon

    def known_collection(self, collection: NamedCollection) -> tuple[JobCollectionRow, str] | None:
        """Only where ``inserts_before_locking``: see KnownCollections."""
        return None

    def remember_collection(self, collection: NamedCollection, row: JobCollectionRow, version: str) -> None:
        """Only where ``inserts_before_locking``: see KnownCollections."""

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


class _KnowingWriteScope(WriteScope):
    """A store's where a new job may be inserted before its collection's lock, built from a collection this
    process read before (KnownCollections)."""

    inserts_before_locking = True

    def __init__(self, session: Session, known: KnownCollections, wake_horizon: datetime | None = None) -> None:
        super().__init__(session, wake_horizon)
        self.known = known

    def known_collection(self, collection: NamedCollection) -> tuple[JobCollectionRow, str] | None:
        return self.known.get(collection)

    def remember_collection(self, collection: NamedCollection, row: JobCollectionRow, version: str) -> None:
        # Out of the session, first: what the session does next (a rollback, expire_all after a refused insert,
        # the same row read again under the lock) must not expire or change the row other threads now read.
        self.session.expunge(row)
        self.known.remember(collection, row, version)


class SqliteFileWriteScope(_KnowingWriteScope):
    """A SQLite file's: the transaction holds the write turn from its first statement (store.database.WriteTurn),
    so there is no lock to take; a new job into a collection this process knows is inserted without reading the
    collection again, by the guarded insert (store.repository.insert_job_if_unchanged: the name free, the
    collection's row as known, fewer jobs than the limit). Reading the collection and the job into ORM objects
    was a quarter of the writer thread's work per job create (bench/README, issue 33, thirteenth session). A change
    is announced in the file itself (store.wakeups.announce_in_file)."""

    def announce_change(self, not_before: datetime | None = None) -> None:
        announce_in_file(self.session, not_before)

    def insert_if_unchanged(
        self, job: JobRow, *, collection: NamedCollection, collection_version: str, max_jobs: int
    ) -> bool:
        inserted = repo.insert_job_if_unchanged(
            self.session, job, collection_version=collection_version, max_jobs=max_jobs
        )
        if not inserted:
            self.known.forget(collection)
        return inserted


class PostgresWriteScope(_KnowingWriteScope):
    """PostgreSQL's: the lock is an advisory lock held to the end of the transaction; a new job read and
    validated before it may be inserted by ``insert_if_unchanged``."""

    def __init__(self, session: Session, known: KnownCollections, wake_horizon: datetime | None = None) -> None:
        super().__init__(session, known, wake_horizon)
        self._locked: set[str] = set()
        self._announced = False  # a change announced with a new job's insert (insert_if_unchanged)

    def hold(self, *keys: str) -> None:
        for key in keys:
            if key not in self._locked:
                repo.advisory_lock(self.session, key)
                self._locked.add(key)

    def announce_change(self, not_before: datetime | None = None) -> None:
        if self._announced:
            return  # with the insert, which ended the transaction: nothing was written after it
        notify_dispatchers(self.session, not_before)

    def insert_if_unchanged(
        self, job: JobRow, *, collection: NamedCollection, collection_version: str, max_jobs: int
    ) -> bool:
        """Take ``collection``'s lock, insert the new ``job`` and end the transaction, in one round trip, if what
        the job was built from still holds (store.repository.insert_job_locked_and_commit: its name free, the
        collection still at ``collection_version``, fewer than ``max_jobs`` jobs). True: inserted; False: nothing
        written, and the collection is no longer taken as known. Either way what follows runs in a new
        transaction, without the lock. A job due before the wake horizon is announced to the dispatchers in the
        same round trip (else a NOTIFY after the commit took a transaction and three round trips of its own)."""
        key = collection_lock(collection.subscription_id, collection.resource_group, collection.name)
        notice = self._notice(job)
        inserted = repo.insert_job_locked_and_commit(
            self.session, job, collection_version=collection_version, max_jobs=max_jobs, locks=[key], notify=notice
        )
        if not inserted:
            self.known.forget(collection)
        self._announced = inserted and notice is not None
        return inserted

    def _notice(self, job: JobRow) -> str | None:
        return _notice(job, self.wake_horizon)


def _notice(job: JobRow, wake_horizon: datetime | None) -> str | None:
    """What announcing the new ``job`` would tell the dispatchers (store.wakeups.notify_dispatchers: when it is
    due, or WAKE_AT_ONCE under a virtual clock, whose due times no wall-clock horizon bounds); None when the
    write wakes no one, or the job is not due before the horizon. The API decides the same from the job's note
    afterwards (store.wakeups.wake_needed, earliest_noted), and then finds it announced."""
    if wake_horizon is None:
        return None
    if wake_horizon == EVERY_CHANGE:
        return WAKE_AT_ONCE
    due = job.next_execution_time
    return due.isoformat() if due is not None and due < wake_horizon else None


class LoopCreate:
    """PostgreSQL's create of a new job into a collection this process knows (KnownCollections), on the event
    loop: the same guarded insert as PostgresWriteScope.insert_if_unchanged, with the lock, the announcement and
    the COMMIT in one round trip, over store.loop_reads' connections instead of a worker thread's session. A
    PUT that creates a job left the loop for a worker thread and came back; the hand-overs (the executor's
    queue, the thread's wake-up, the interpreter lock each way) and the ORM session cost the API's process
    a fifth to a third of a create's CPU (bench/README, issue 33, thirteenth session). Anything else (a collection not
    known, a name taken, the insert refused) is left to the session's way, as before."""

    def __init__(self, reads: LoopReads, known: KnownCollections, wake_horizon: datetime | None) -> None:
        self.reads = reads
        self.known = known
        self.wake_horizon = wake_horizon
        self.announced: str | None = None  # the announcement sent with the insert (see _notice), if any

    def known_collection(self, collection: NamedCollection) -> tuple[JobCollectionRow, str] | None:
        return self.known.get(collection)

    async def insert_if_unchanged(
        self, job: JobRow, *, collection: NamedCollection, collection_version: str, max_jobs: int
    ) -> bool:
        """As PostgresWriteScope.insert_if_unchanged, on the event loop."""
        key = collection_lock(collection.subscription_id, collection.resource_group, collection.name)
        notice = _notice(job, self.wake_horizon)
        inserted = await repo.insert_job_locked_and_commit_on_loop(
            self.reads, job, collection_version=collection_version, max_jobs=max_jobs, locks=[key], notify=notice
        )
        if not inserted:
            self.known.forget(collection)
        self.announced = notice if inserted else None
        return inserted


def loop_create(database: Database, wake_horizon: datetime | None = None) -> LoopCreate | None:
    """A LoopCreate over ``database`` where it has reads on the event loop (PostgreSQL), None elsewhere.
    ``wake_horizon``: as write_scope's."""
    if database.loop_reads is None:
        return None
    return LoopCreate(database.loop_reads, known_collections(database), wake_horizon)


_KNOWN: weakref.WeakKeyDictionary[Database, KnownCollections] = weakref.WeakKeyDictionary()
_KNOWN_GUARD = threading.Lock()


def write_scope(database: Database, session: Session, wake_horizon: datetime | None = None) -> WriteScope:
    """The write scope of ``database``'s kind over ``session`` (the caller's transaction; no lock held yet).
    ``wake_horizon``: the write may wake the dispatchers, which look again by themselves for jobs due before
    then (store.wakeups.wake_needed); ``store.wakeups.EVERY_CHANGE``: every change wakes them (a virtual
    clock); None: the write wakes no one."""
    if database.dialect == "postgresql":
        return PostgresWriteScope(session, known_collections(database), wake_horizon)
    if database.on_disk:
        return SqliteFileWriteScope(session, known_collections(database), wake_horizon)
    return WriteScope(session, wake_horizon)


def known_collections(database: Database) -> KnownCollections:
    """The collections this process knows on ``database`` (one KnownCollections per Database)."""
    with _KNOWN_GUARD:
        known = _KNOWN.get(database)
        if known is None:
            known = _KNOWN[database] = KnownCollections()
        return known
