"""Waking dispatchers after an API write: the write notes when the jobs it changed may be due (``note_due``); at
commit the API decides whether dispatchers must look now (``wake_needed``, ``earliest_noted``) and tells the other
processes sharing the database, through the database (store.write_scope's ``announce_change``):

- PostgreSQL: ``notify_dispatchers`` (NOTIFY), heard by ``PostgresWakeups`` (LISTEN);
- a SQLite file: ``announce_in_file`` counts the change in one row (``WAKE_ROW``, with what NOTIFY's payload says),
  and ``SqliteWakeups`` watches the file for a commit by any connection (``PRAGMA data_version``, a read of the
  file's header) and reads the row only then.

A process that serves the API wakes its own dispatcher directly as well (dispatcher/host.py); the dispatcher's
polling stays as the fallback."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from sqlalchemy import func, select
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session

from scheduler_emulator.store import repository as repo

log = logging.getLogger("scheduler_emulator.dispatcher")

WAKE_CHANNEL = "scheduler_emulator_wake"
WAKE_AT_ONCE = ""  # a notification's payload when dispatchers must look at once (see wake_payload)
EVERY_CHANGE = datetime.max.replace(tzinfo=UTC)  # a wake horizon no due time reaches (store.write_scope)
WAKE_ROW = "dispatcher_wake"  # emulator_settings' row that counts a SQLite file's announced changes (announce_in_file)
# Seconds between two looks of SqliteWakeups at the file's change counter: a wake-up is this late at most, and an
# idle dispatcher child spends about 0.8 % of a core (the looks, its heartbeats; measured over 30 s idle).
PROBE_SECONDS = 0.025
_DUE = "scheduler_emulator.due"  # session.info key: when the jobs this transaction changed may be due


def note_due(session: Session, *moments: datetime | None, at_once: bool = False) -> None:
    """Record that this transaction changed a job whose occurrences may be due at ``moments`` (None: never),
    or that a dispatcher must look ``at_once`` (an occurrence of the job is claimed: it must re-check it).
    A transaction that changes jobs without noting anything wakes dispatchers at once (see wake_needed)."""
    notes: list[datetime | None] = session.info.setdefault(_DUE, [])
    notes.extend([None] if at_once else [m if m is not None else datetime.max.replace(tzinfo=UTC) for m in moments])


def wake_needed(session: Session, horizon: datetime) -> bool:
    """Whether dispatchers must look now: something changed that no note describes, or a noted job may be
    due before ``horizon`` (the time by which every dispatcher looks again by itself: its poll interval plus
    how far ahead it claims). Skipping the rest saves every dispatcher a claim cycle per API write."""
    notes: list[datetime | None] | None = session.info.get(_DUE)
    return not notes or any(moment is None or moment < horizon for moment in notes)


def earliest_noted(session: Session) -> datetime | None:
    """The earliest time a job this transaction changed may be due, when every change was noted and none
    concerns a claimed occurrence (see note_due); None when dispatchers must look at once and re-check what
    they claimed."""
    notes: list[datetime | None] | None = session.info.get(_DUE)
    if not notes or any(moment is None for moment in notes):
        return None
    return min(m for m in notes if m is not None)


def notify_dispatchers(session: Session, not_before: datetime | None = None) -> None:
    """Tell every dispatcher process sharing this PostgreSQL database to look for due work (NOTIFY, delivered at
    commit); ``not_before`` (see earliest_noted) goes with it as the payload, so that a dispatcher that looks by
    itself before then can ignore it. PostgreSQL only: store.write_scope calls it where the database is one
    (a SQLite file: announce_in_file)."""
    payload = WAKE_AT_ONCE if not_before is None else not_before.isoformat()
    session.execute(select(func.pg_notify(WAKE_CHANNEL, payload)))


def wake_payload(payload: str) -> datetime | None:
    """The ``not_before`` a notification carries (None: none, or unreadable: look at once)."""
    try:
        moment = datetime.fromisoformat(payload) if payload else None
    except ValueError:
        return None
    return moment if moment is not None and moment.tzinfo is not None else None


class Wakeups(Protocol):
    """A watcher that calls back on changes other processes announce (PostgresWakeups, SqliteWakeups)."""

    def start(self) -> None: ...

    async def stop(self) -> None: ...


@dataclass(frozen=True, slots=True)
class FileWakeNote:
    """What ``WAKE_ROW`` holds: ``changes`` announced so far, of which ``at_once`` asked dispatchers to look at
    once (notify_dispatchers' None), and the earliest ``not_before`` of the others still ahead (None: none)."""

    changes: int = 0
    at_once: int = 0
    not_before: datetime | None = None

    @classmethod
    def parse(cls, value: str | None) -> FileWakeNote:
        parts = (value or "").split(" ")
        if len(parts) != 3 or not (parts[0].isdigit() and parts[1].isdigit()):
            return cls()
        return cls(int(parts[0]), int(parts[1]), wake_payload(parts[2]))

    def render(self) -> str:
        return f"{self.changes} {self.at_once} {'' if self.not_before is None else self.not_before.isoformat()}"


def announce_in_file(session: Session, not_before: datetime | None = None) -> None:
    """As notify_dispatchers, on a SQLite file: count one more change in ``WAKE_ROW`` (a FileWakeNote) within the
    writer's transaction, which holds the file's write turn; SqliteWakeups reads it. The earliest ``not_before``
    still ahead is kept, so that changes announced between two of its looks wake it as their earliest would."""
    note = FileWakeNote.parse(repo.read_setting(session, WAKE_ROW))
    if not_before is None:
        note = FileWakeNote(note.changes + 1, note.at_once + 1, note.not_before)
    else:
        kept = note.not_before
        if kept is None or kept <= datetime.now(UTC) or not_before < kept:
            kept = not_before
        note = FileWakeNote(note.changes + 1, note.at_once, kept)
    repo.write_setting(session, WAKE_ROW, note.render())


class SqliteWakeups:
    """Calls ``on_wake`` for the changes other processes announce in the SQLite file at ``path``
    (announce_in_file): every PROBE_SECONDS it reads the file's change counter on a connection of its own, which
    moves when any other connection commits (the dispatcher's own writes too), and only then ``WAKE_ROW``: a
    change that asked for a look at once wakes at once, the others with their earliest ``not_before``. Runs on
    the event loop: both reads are of a page or two, and a WAL reader waits for no writer."""

    def __init__(self, path: str, on_wake: Callable[[datetime | None], None]) -> None:
        self.path = path
        self.on_wake = on_wake
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._watch(), name="sqlite-wakeups")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _watch(self) -> None:
        connection: sqlite3.Connection | None = None
        version: int | None = None
        seen: FileWakeNote | None = None
        try:
            while True:
                try:
                    if connection is None:
                        connection = sqlite3.connect(
                            f"file:{self.path}?mode=ro", uri=True, isolation_level=None, timeout=0.1
                        )
                    now = connection.execute("PRAGMA data_version").fetchone()[0]
                    if now != version:
                        version = now
                        seen = self._read(connection, seen)
                except sqlite3.Error as exc:  # a moment of contention, or the file away: the poll covers it
                    log.debug("watching %s for changes failed (%s); retrying", self.path, exc)
                    if connection is not None:
                        connection.close()
                    connection, version = None, None
                await asyncio.sleep(PROBE_SECONDS)
        finally:
            if connection is not None:
                connection.close()

    def _read(self, connection: sqlite3.Connection, seen: FileWakeNote | None) -> FileWakeNote:
        """Wake for the changes counted in WAKE_ROW since ``seen`` (None: the first look: at once, for anything
        announced before this watcher began); the note now."""
        row = connection.execute("SELECT value FROM emulator_settings WHERE name = ?", (WAKE_ROW,)).fetchone()
        note = FileWakeNote.parse(row[0] if row is not None else None)
        if seen is None or note.at_once != seen.at_once:
            self.on_wake(None)
        elif note.changes != seen.changes:
            self.on_wake(note.not_before)
        return note


class PostgresWakeups:
    """Calls ``on_wake`` for every notification, with the time before which the change makes nothing due when
    the notification says (notify_dispatchers), else None; reconnects (after a pause) when the
    connection is lost."""

    def __init__(
        self,
        database_url: str,
        on_wake: Callable[[datetime | None], None],
        parameters: Mapping[str, Any] | None = None,
    ) -> None:
        """``parameters``: further libpq connection parameters (keepalives, server options)."""
        url = make_url(database_url).set(drivername="postgresql")
        self.conninfo = url.render_as_string(hide_password=False)
        self.parameters = dict(parameters or {})
        self.on_wake = on_wake
        self._task: asyncio.Task[None] | None = None
        self.connected = asyncio.Event()

    def start(self) -> None:
        self._task = asyncio.create_task(self._listen(), name="postgres-wakeups")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _listen(self) -> None:
        import psycopg  # here, not at the top: a process on SQLite never needs it (~0.15 s of imports)

        pause = 0.5
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(
                    self.conninfo, autocommit=True, connect_timeout=5, **self.parameters
                ) as connection:
                    await connection.execute(f"LISTEN {WAKE_CHANNEL}")
                    self.connected.set()
                    pause = 0.5
                    self.on_wake(None)  # anything announced while we were not listening
                    async for notification in connection.notifies():
                        self.on_wake(wake_payload(notification.payload))
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - any failure: reconnect, polling covers the gap
                self.connected.clear()
                log.warning("listening for wake-ups failed (%s); retrying in %.1f s", str(exc).splitlines()[0], pause)
            await asyncio.sleep(pause)
            pause = min(pause * 2, 10.0)
