"""The dispatcher store's batch statements: one writer class per database, chosen once when the store is built
(``batches_for``), fed the typed rows of store/dispatch_records.py. Each statement is written once, below, in
SQLAlchemy Core where that is the clearest; the writers turn rows into the driver's parameters right at the
statement, in the form measured fastest on their database:

- SQLite: one executemany of positional rows built here, each value through its column type's bind processor as
  SQLAlchemy would (SQLAlchemy's own executemany builds and processes a dict of parameters per row: half of a
  batch of completions' CPU, measured);
- PostgreSQL: one statement over arrays, ``… FROM unnest(arrays)``, each array bound as one text literal
  (``_pg_array``): an executemany is a round trip per row there, and psycopg's dumping of a Python list costs
  microseconds per element (measured: the claim and finish UPDATEs were the largest part of a PostgreSQL
  dispatcher's CPU at 3,000 fires/s).
"""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, ClassVar

from sqlalchemy import (
    BigInteger,
    DateTime,
    Integer,
    String,
    Table,
    any_,
    bindparam,
    column,
    func,
    insert,
    null,
    select,
    text,
    update,
)
from sqlalchemy import cast as sql_cast
from sqlalchemy.dialects import postgresql
from sqlalchemy.dialects.sqlite import dialect as sqlite_dialect
from sqlalchemy.orm import Session
from sqlalchemy.types import TypeEngine

from scheduler_emulator.store.dispatch_records import (
    AttemptRecord,
    JobFinish,
    JobMove,
    NewOccurrence,
    OccurrenceEnd,
    OccurrenceStep,
)
from scheduler_emulator.store.models import HISTORY, JOBS, OCCURRENCES

Row = tuple[Any, ...]  # one row's parameters, in the order of its statement's ``kinds`` (more may follow, unread)


class RowsUpdate:
    """An UPDATE of many rows by id, each with its own values: ``kinds`` names the parameters of a row, in the
    order of its tuple (the id first); ``values`` maps them (bound parameters, or the columns of an unnest) to the
    SET clause. Both forms are built here, once: ``by_row`` (one row's parameters) and ``over_arrays`` (a batch as
    one array per parameter, PostgreSQL)."""

    def __init__(
        self,
        table: Table,
        kinds: dict[str, TypeEngine[Any]],
        values: Callable[[Mapping[str, Any]], dict[Any, Any]],
    ) -> None:
        self.kinds = kinds
        key = next(iter(kinds))
        params = {name: bindparam(name, type_=kind) for name, kind in kinds.items()}
        self.by_row = update(table).where(table.c.id == params[key]).values(values(params))
        rows = _unnest(kinds)
        self.over_arrays = update(table).where(table.c.id == rows.c[key]).values(values(rows.c))


def _unnest(kinds: dict[str, TypeEngine[Any]]) -> Any:
    """``unnest(CAST(:name AS type[]), …) AS anon(name, …)``: rows sent as one array literal per column (bound
    as text, see _pg_array), to select from or join."""
    arrays = (sql_cast(bindparam(name, type_=String()), postgresql.ARRAY(kind)) for name, kind in kinds.items())
    return func.unnest(*arrays).table_valued(*(column(name, kind) for name, kind in kinds.items())).render_derived()


# -- the statements -----------------------------------------------------------------------------------------

# A claim (or a give-back) moves each job: JobMove's fields.
MOVE_JOBS = RowsUpdate(
    JOBS,
    {
        "job_id": JOBS.c.id.type,
        "next_time": JOBS.c.next_execution_time.type,
        "repeat_count": JOBS.c.repeat_count.type,
        "run_requested_at": JOBS.c.run_requested_at.type,
        "owner": JOBS.c.lease_owner.type,
    },
    lambda row: {
        JOBS.c.next_execution_time: row["next_time"],
        JOBS.c.repeat_count: row["repeat_count"],
        JOBS.c.run_requested_at: row["run_requested_at"],
        JOBS.c.lease_owner: row["owner"],
    },
)

# An occurrence's end for its job (JobFinish's fields): the lease, and what it adds to the job's counters.
_RELEASE_KINDS: dict[str, TypeEngine[Any]] = {
    "job_id": JOBS.c.id.type,
    "owner": JOBS.c.lease_owner.type,
    "executions": Integer(),
    "failures": Integer(),
    "faults": Integer(),
    "last_execution_time": JOBS.c.last_execution_time.type,
}


def _counted(row: Mapping[str, Any]) -> dict[Any, Any]:
    return {
        JOBS.c.execution_count: JOBS.c.execution_count + row["executions"],
        JOBS.c.failure_count: JOBS.c.failure_count + row["failures"],
        JOBS.c.faulted_count: JOBS.c.faulted_count + row["faults"],
        JOBS.c.last_execution_time: func.coalesce(row["last_execution_time"], JOBS.c.last_execution_time),
        JOBS.c.lease_owner: row["owner"],
    }


# Counters and lease only: an API write changed the job meanwhile, and that write stands.
RELEASE_JOBS = RowsUpdate(JOBS, _RELEASE_KINDS, _counted)
# Counters, lease and schedule: the job's next due time and state move on.
FINISH_JOBS = RowsUpdate(
    JOBS,
    {
        **_RELEASE_KINDS,
        "next_time": JOBS.c.next_execution_time.type,
        "state": JOBS.c.state.type,
        "finished_at": JOBS.c.finished_at.type,
    },
    lambda row: {
        **_counted(row),
        JOBS.c.next_execution_time: row["next_time"],
        JOBS.c.state: row["state"],
        JOBS.c.finished_at: func.coalesce(row["finished_at"], JOBS.c.finished_at),
    },
)
# OccurrenceEnd's fields.
CLOSE_OCCURRENCES = RowsUpdate(
    OCCURRENCES,
    {
        "occurrence_id": OCCURRENCES.c.id.type,
        "outcome": OCCURRENCES.c.outcome.type,
        "finished_at": OCCURRENCES.c.finished_at.type,
    },
    # A retry pending no more: NULL in the same statement, no parameter more.
    lambda row: {
        OCCURRENCES.c.finished_at: row["finished_at"],
        OCCURRENCES.c.outcome: row["outcome"],
        OCCURRENCES.c.retry_at: null(),
    },
)
# OccurrenceStep's fields: how far an occurrence got, written with the failed attempt that has more to come.
KEEP_PROGRESS = RowsUpdate(
    OCCURRENCES,
    {
        "occurrence_id": OCCURRENCES.c.id.type,
        "pending_action": OCCURRENCES.c.pending_action.type,
        "attempts_made": OCCURRENCES.c.attempts_made.type,
        "retry_at": OCCURRENCES.c.retry_at.type,
    },
    lambda row: {
        OCCURRENCES.c.pending_action: row["pending_action"],
        OCCURRENCES.c.attempts_made: row["attempts_made"],
        OCCURRENCES.c.retry_at: row["retry_at"],
    },
)

# History entries: AttemptRecord's fields, as the history table's columns.
_HISTORY_KINDS: dict[str, TypeEngine[Any]] = {
    name: HISTORY.c[name].type
    for name in (
        "job_id",
        "history_id",
        "start_time",
        "end_time",
        "expected_execution_time",
        "action_name",
        "status",
        "message",
        "retry_count",
        "repeat_count",
    )
}
INSERT_HISTORY = insert(HISTORY).values({name: bindparam(name, type_=kind) for name, kind in _HISTORY_KINDS.items()})
INSERT_HISTORY_FROM_ARRAYS = insert(HISTORY).from_select(list(_HISTORY_KINDS), select(*_unnest(_HISTORY_KINDS).c))

# New occurrences (NewOccurrence's fields), skipping those already recorded, returning the new ones' ids.
# PostgreSQL: three arrays in one short statement (the multi-row VALUES form SQLAlchemy sends otherwise is a
# statement thousands of parameters long, which the driver parses at every call: a quarter of the claim's CPU).
INSERT_OCCURRENCES_FROM_ARRAYS = text(
    "INSERT INTO job_occurrences (job_id, expected_time, repeat_count, owner, first_owner, claimed_at) "
    "SELECT v.job_id, v.expected_time, v.repeat_count, :owner, :owner, :now "
    "FROM unnest(CAST(:jobs AS BIGINT[]), CAST(:times AS TIMESTAMPTZ[]), CAST(:repeats AS INTEGER[])) "
    "AS v(job_id, expected_time, repeat_count) "
    "ON CONFLICT (job_id, expected_time) DO NOTHING RETURNING id, job_id, expected_time"
)
# SQLite: a multi-row VALUES statement with positional parameters built here, at most this many rows per
# statement (its host parameters stay far under SQLite's limit): SQLAlchemy's "insertmanyvalues" built and
# processed a dict of parameters per row, ~10 % of a claim's CPU (measured).
INSERT_OCCURRENCES_VALUES = (
    "INSERT INTO job_occurrences (job_id, expected_time, repeat_count, owner, first_owner, claimed_at) VALUES {rows} "
    "ON CONFLICT (job_id, expected_time) DO NOTHING RETURNING id, job_id, expected_time"
)
_OCCURRENCE_ROWS_PER_VALUES = 250


class LockedJobs:
    """Some columns of the jobs with the given ids, by id, locked until the transaction ends: an API write
    (disable, PATCH) then waits, and is never overwritten with what was read before it. Locked in id order,
    so that concurrent batches cannot deadlock on each other."""

    def __init__(self, *columns: Any) -> None:
        by_id = select(*columns).order_by(JOBS.c.id).with_for_update()
        self.listed = by_id.where(JOBS.c.id.in_(bindparam("ids", expanding=True)))
        # PostgreSQL: the ids as one array parameter. An IN list of a hundred ids is a statement SQLAlchemy
        # renders and psycopg parses anew at every batch (measured: a third of a completion's CPU); this is the
        # same text every time.
        self.over_array = by_id.where(
            JOBS.c.id == any_(sql_cast(bindparam("ids", type_=String()), postgresql.ARRAY(BigInteger())))
        )


# What finishing occurrences needs to know of their jobs; what giving occurrences back does.
JOBS_TO_FINISH = LockedJobs(JOBS.c.id, JOBS.c.version, JOBS.c.state, JOBS.c.lease_owner)
JOBS_TO_RESTORE = LockedJobs(
    JOBS.c.id,
    JOBS.c.version,
    JOBS.c.lease_owner,
    JOBS.c.next_execution_time,
    JOBS.c.repeat_count,
    JOBS.c.run_requested_at,
)


# -- the writers ----------------------------------------------------------------------------------------------


class Batches(ABC):
    """The batch statements on one kind of database, and what else the dispatcher store does differently there.
    Every method runs in the caller's session (its transaction) and takes the rows of a whole batch."""

    locks_rows: ClassVar[bool]  # row locks: skip those other claims hold, lock the jobs a takeover may race for
    listens: ClassVar[bool]  # other processes announce changes (LISTEN/NOTIFY)

    def move_jobs(self, session: Session, moves: Sequence[JobMove]) -> None:
        """Set each job's next due time, occurrence count, pending run request and lease."""
        if moves:
            self._update(session, MOVE_JOBS, moves)

    def finish_jobs(self, session: Session, finishes: Sequence[JobFinish]) -> None:
        """Write occurrences' ends to their jobs: counters and lease, and the schedule where it moves."""
        moved = [finish for finish in finishes if finish.schedule_moves]
        released = [finish for finish in finishes if not finish.schedule_moves]
        if moved:
            self._update(session, FINISH_JOBS, moved)
        if released:
            self._update(session, RELEASE_JOBS, released)

    def close_occurrences(self, session: Session, ends: Sequence[OccurrenceEnd]) -> None:
        """Mark occurrences finished, with their outcomes."""
        if ends:
            self._update(session, CLOSE_OCCURRENCES, ends)

    def keep_progress(self, session: Session, steps: Sequence[OccurrenceStep]) -> None:
        """Keep with each occurrence how far it got (the action whose attempt comes next, its attempts so far, when
        the next is due)."""
        if steps:
            self._update(session, KEEP_PROGRESS, steps)

    def add_history(self, session: Session, attempts: Sequence[AttemptRecord]) -> None:
        """Insert the attempts' history entries (their counters are not moved here)."""
        if attempts:
            self._insert_history(
                session,
                [
                    (
                        a.job_id,
                        a.history_id,
                        a.start_time,
                        a.end_time,
                        a.expected_time,
                        a.action_name,
                        a.status,
                        a.message,
                        a.retry_count,
                        a.repeat_count,
                    )
                    for a in attempts
                ],
            )

    def jobs_to_finish(self, session: Session, job_ids: list[int]) -> dict[int, Any]:
        """What finishing occurrences needs to know of their jobs, by id (deleted jobs are absent), locked."""
        return {row.id: row for row in self._locked(session, JOBS_TO_FINISH, job_ids)}

    def jobs_to_restore(self, session: Session, job_ids: list[int]) -> dict[int, Any]:
        """What giving occurrences back needs to know of their jobs, by id, locked."""
        return {row.id: row for row in self._locked(session, JOBS_TO_RESTORE, job_ids)}

    @abstractmethod
    def insert_occurrences(
        self, session: Session, occurrences: Sequence[NewOccurrence], owner: str, now: datetime
    ) -> dict[tuple[int, datetime], int]:
        """Record occurrences claimed by ``owner`` at ``now``; one already recorded is skipped by the unique key.
        Returns the new ones' ids by (job id, expected time)."""

    @abstractmethod
    def _update(self, session: Session, statement: RowsUpdate, rows: Sequence[Row]) -> None: ...

    @abstractmethod
    def _insert_history(self, session: Session, rows: Sequence[Row]) -> None: ...

    @abstractmethod
    def _locked(self, session: Session, jobs: LockedJobs, job_ids: list[int]) -> Sequence[Any]: ...


_SQLITE = sqlite_dialect()


class _SqliteMany:
    """A statement compiled once for SQLite, run as one executemany of positional rows: each value through its
    column type's bind processor, as SQLAlchemy would."""

    def __init__(self, statement: Any, kinds: dict[str, TypeEngine[Any]]) -> None:
        compiled = statement.compile(dialect=_SQLITE)
        self.sql = compiled.string
        index = {name: position for position, name in enumerate(kinds)}
        self.order = [
            (index[name], kinds[name].dialect_impl(_SQLITE).bind_processor(_SQLITE))
            for name in compiled.positiontup or ()
        ]

    def execute(self, session: Session, rows: Sequence[Row]) -> None:
        order = self.order
        values = [tuple([row[i] if process is None else process(row[i]) for i, process in order]) for row in rows]
        session.connection().exec_driver_sql(self.sql, values)


_SQLITE_TIME = OCCURRENCES.c.expected_time.type.dialect_impl(_SQLITE)
_SQLITE_TIME_IN: Callable[[datetime], str] = _SQLITE_TIME.bind_processor(_SQLITE)  # type: ignore[assignment]
_SQLITE_TIME_OUT: Callable[[str], datetime] = _SQLITE_TIME.result_processor(_SQLITE, None)  # type: ignore[assignment]


class SqliteBatches(Batches):
    """SQLite's: one writer at a time (its lock serialises claims), no LISTEN; batches as executemany."""

    locks_rows = False
    listens = False

    def __init__(self) -> None:
        self._many = {
            id(statement): _SqliteMany(statement.by_row, statement.kinds)
            for statement in (MOVE_JOBS, FINISH_JOBS, RELEASE_JOBS, CLOSE_OCCURRENCES, KEEP_PROGRESS)
        }
        self._history = _SqliteMany(INSERT_HISTORY, _HISTORY_KINDS)

    def _update(self, session: Session, statement: RowsUpdate, rows: Sequence[Row]) -> None:
        self._many[id(statement)].execute(session, rows)

    def _insert_history(self, session: Session, rows: Sequence[Row]) -> None:
        self._history.execute(session, rows)

    def _locked(self, session: Session, jobs: LockedJobs, job_ids: list[int]) -> Sequence[Any]:
        return session.execute(jobs.listed, {"ids": job_ids}).all()

    def insert_occurrences(
        self, session: Session, occurrences: Sequence[NewOccurrence], owner: str, now: datetime
    ) -> dict[tuple[int, datetime], int]:
        if not occurrences:
            return {}
        claimed_at = _SQLITE_TIME_IN(now)
        connection = session.connection()
        inserted: dict[tuple[int, datetime], int] = {}
        for start in range(0, len(occurrences), _OCCURRENCE_ROWS_PER_VALUES):
            chunk = occurrences[start : start + _OCCURRENCE_ROWS_PER_VALUES]
            values: list[Any] = []
            for job_id, expected, repeat in chunk:
                values += (job_id, _SQLITE_TIME_IN(expected), repeat, owner, owner, claimed_at)
            sql = INSERT_OCCURRENCES_VALUES.format(rows=", ".join(["(?, ?, ?, ?, ?, ?)"] * len(chunk)))
            for row_id, job_id, expected_text in connection.exec_driver_sql(sql, tuple(values)).all():
                inserted[(job_id, _SQLITE_TIME_OUT(expected_text))] = row_id
        return inserted


def _pg_array(values: Sequence[Any], kind: TypeEngine[Any]) -> str:
    """A PostgreSQL array literal of ``values`` of a column of type ``kind``, formatted here: psycopg's dumping of
    a Python list costs microseconds per element (7 µs per datetime, measured), more than the statement itself."""
    kind = getattr(kind, "impl", kind)  # UTCDateTime → DateTime
    if isinstance(kind, DateTime):
        items = []
        for value in values:
            if value is None:
                items.append("NULL")
            elif value.tzinfo is None:
                raise ValueError("naive datetime given to the store")
            else:
                # Digits, "-", ":", ".", "+" and "T": nothing to quote.
                items.append((value if value.tzinfo is UTC else value.astimezone(UTC)).isoformat())
    elif isinstance(kind, Integer):
        items = ["NULL" if value is None else str(int(value)) for value in values]
    else:
        items = [
            "NULL" if value is None else '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"' for value in values
        ]
    return "{" + ",".join(items) + "}"


def _as_arrays(kinds: dict[str, TypeEngine[Any]], rows: Sequence[Row]) -> dict[str, str]:
    """A batch's parameters as one array literal per parameter of ``kinds``."""
    return {name: _pg_array([row[i] for row in rows], kind) for i, (name, kind) in enumerate(kinds.items())}


def _named(kinds: dict[str, TypeEngine[Any]], row: Row) -> dict[str, Any]:
    """One row's parameters by name (SQLAlchemy's executemany)."""
    return {name: row[i] for i, name in enumerate(kinds)}


class PostgresBatches(Batches):
    """PostgreSQL's: row locks to skip, LISTEN/NOTIFY, and a batch as one statement over arrays."""

    locks_rows = True
    listens = True

    def _update(self, session: Session, statement: RowsUpdate, rows: Sequence[Row]) -> None:
        # Rows that repeat an id keep the executemany, whose updates apply one after another (a join would
        # apply only one); so does a single row.
        if len(rows) > 1 and len({row[0] for row in rows}) == len(rows):
            session.execute(statement.over_arrays, _as_arrays(statement.kinds, rows))
        else:
            session.execute(statement.by_row, [_named(statement.kinds, row) for row in rows])

    def _insert_history(self, session: Session, rows: Sequence[Row]) -> None:
        if len(rows) > 1:
            session.execute(INSERT_HISTORY_FROM_ARRAYS, _as_arrays(_HISTORY_KINDS, rows))
        else:
            session.execute(INSERT_HISTORY, [_named(_HISTORY_KINDS, row) for row in rows])

    def _locked(self, session: Session, jobs: LockedJobs, job_ids: list[int]) -> Sequence[Any]:
        return session.execute(jobs.over_array, {"ids": _pg_array(job_ids, JOBS.c.id.type)}).all()

    def insert_occurrences(
        self, session: Session, occurrences: Sequence[NewOccurrence], owner: str, now: datetime
    ) -> dict[tuple[int, datetime], int]:
        if not occurrences:
            return {}
        job_ids, times, repeats = zip(*occurrences, strict=True)
        found = session.execute(
            INSERT_OCCURRENCES_FROM_ARRAYS,
            {
                "jobs": _pg_array(job_ids, OCCURRENCES.c.job_id.type),
                "times": _pg_array(times, OCCURRENCES.c.expected_time.type),
                "repeats": _pg_array(repeats, OCCURRENCES.c.repeat_count.type),
                "owner": owner,
                "now": now,
            },
        )
        return {(job_id, expected): row_id for row_id, job_id, expected in found.all()}


@functools.cache
def batches_for(dialect: str) -> Batches:
    """The batch writer of a database of this kind (``Database.dialect``), built once per process."""
    return PostgresBatches() if dialect == "postgresql" else SqliteBatches()
