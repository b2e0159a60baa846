"""The dispatcher's queries: find and lease due jobs, record attempts, release, clean up.

Claims follow the durable-scheduler pattern: select due rows (``FOR UPDATE SKIP LOCKED`` where the
database has it), lease them and insert their occurrence under a unique (job, expected time) key, commit —
and only then does the caller make the network call. No row lock is held across network I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import (
    BigInteger,
    DateTime,
    Integer,
    String,
    Table,
    Text,
    and_,
    any_,
    bindparam,
    column,
    delete,
    func,
    insert,
    select,
    text,
    update,
)
from sqlalchemy import cast as sql_cast
from sqlalchemy.dialects import postgresql
from sqlalchemy.dialects.sqlite import dialect as sqlite_dialect
from sqlalchemy.orm import Session
from sqlalchemy.types import TypeEngine

from scheduler_emulator.domain.states import FINAL_STATES, JobState
from scheduler_emulator.store.models import (
    COLLECTIONS,
    HISTORY,
    JOBS,
    OCCURRENCES,
    DispatcherRow,
    JobCollectionRow,
    JobHistoryRow,
    JobRow,
    OccurrenceRow,
)

_CLAIM_COLUMNS = (
    JOBS.c.id,
    JOBS.c.name,
    JOBS.c.definition,
    JOBS.c.state,
    JOBS.c.version,
    JOBS.c.series_origin,
    JOBS.c.next_execution_time,
    JOBS.c.run_requested_at,
    JOBS.c.repeat_count,
    JOBS.c.lease_owner,
    JOBS.c.execution_count,
    COLLECTIONS.c.name.label("collection_name"),
    COLLECTIONS.c.location,
    COLLECTIONS.c.sku,
    # As text: every job of a collection repeats it, so the caller decodes each distinct one once per claim.
    sql_cast(COLLECTIONS.c.properties, Text()).label("collection_properties"),
    COLLECTIONS.c.state.label("collection_state"),
)


def due_jobs(
    session: Session,
    now: datetime,
    limit: int,
    skip_locked: bool,
    owner: str,
    until: datetime | None = None,
    alive_at: datetime | None = None,
) -> list[Any]:
    """Rows of the jobs to claim now, earliest first: leased by a dispatcher whose heartbeat stopped, asked
    to run, or enabled and due by ``until`` (default: now). Three small index-backed queries rather than one
    OR that would scan every job. Our own leases are never "abandoned": those occurrences are still running
    here. Heartbeats are compared with ``alive_at`` (real time; default ``now``)."""
    alive = select(DispatcherRow.owner).where(
        DispatcherRow.owner == JOBS.c.lease_owner, DispatcherRow.expires_at >= (alive_at or now)
    )
    conditions = (
        (and_(JOBS.c.lease_owner.is_not(None), JOBS.c.lease_owner != owner, ~alive.exists()), JOBS.c.lease_owner),
        (and_(JOBS.c.run_requested_at.is_not(None), JOBS.c.lease_owner.is_(None)), JOBS.c.run_requested_at),
        (
            and_(
                JOBS.c.next_execution_time <= (until or now),
                JOBS.c.lease_owner.is_(None),
                JOBS.c.state == JobState.Enabled,
                COLLECTIONS.c.state == JobState.Enabled,
            ),
            JOBS.c.next_execution_time,
        ),
    )
    found: dict[int, Any] = {}
    for condition, order in conditions:
        if len(found) >= limit:
            break
        query = (
            select(*_CLAIM_COLUMNS)
            .join_from(JOBS, COLLECTIONS, JOBS.c.collection_id == COLLECTIONS.c.id)
            .where(condition)
            .order_by(order)
            .limit(limit - len(found))
        )
        if skip_locked:
            query = query.with_for_update(of=JOBS, skip_locked=True)
        for row in session.execute(query).all():  # one fetchall, not a fetchone per row
            found.setdefault(row.id, row)
    return list(found.values())


def _pg_array(values: list[Any], kind: TypeEngine[Any]) -> str:
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


def _unnest(kinds: dict[str, TypeEngine[Any]]) -> Any:
    """``unnest(CAST(:name AS type[]), …) AS anon(name, …)``: rows sent as one array literal per column (bound
    as text, see _pg_array), to select from or join."""
    arrays = (sql_cast(bindparam(name, type_=String()), postgresql.ARRAY(kind)) for name, kind in kinds.items())
    return func.unnest(*arrays).table_valued(*(column(name, kind) for name, kind in kinds.items())).render_derived()


class _SqliteMany:
    """A statement run on SQLite as one executemany of positional rows built here, each value through its
    column type's bind processor as SQLAlchemy would: SQLAlchemy's own executemany builds and processes a dict
    of parameters per row, which was half of a batch of completions' CPU on SQLite (measured). Compiled
    once; ``defaults``: values for keys a row may leave out."""

    def __init__(
        self, statement: Any, kinds: Mapping[str, TypeEngine[Any]], defaults: Mapping[str, Any] | None = None
    ) -> None:
        self.statement = statement
        compiled = statement.compile(dialect=_SQLITE)
        self.sql = compiled.string
        defaults = defaults or {}
        self.order = [
            (name, kinds[name].dialect_impl(_SQLITE).bind_processor(_SQLITE), name in defaults, defaults.get(name))
            for name in compiled.positiontup or ()
        ]

    def execute(self, session: Session, rows: Sequence[Mapping[str, Any]]) -> None:
        if session.get_bind().dialect.name != "sqlite":  # another database: SQLAlchemy's way, defaults applied
            named = [
                {name: row.get(name, default) if optional else row[name] for name, _, optional, default in self.order}
                for row in rows
            ]
            session.execute(self.statement, named)
            return
        values = [
            tuple(
                [
                    (row.get(name, default) if optional else row[name])
                    if process is None
                    else process(row.get(name, default) if optional else row[name])
                    for name, process, optional, default in self.order
                ]
            )
            for row in rows
        ]
        session.connection().exec_driver_sql(self.sql, values)


_SQLITE = sqlite_dialect()


class _RowsUpdate:
    """An UPDATE of many rows by id, each with its own values (a list of dicts, keyed as ``kinds``), defined
    once by ``values``: a function from the per-row values (bound parameters, or the columns of an unnest) to
    the SET clause. SQLite runs it as one executemany statement. PostgreSQL gets one statement over arrays,
    ``UPDATE … FROM unnest(arrays)``: an executemany is a round trip per row there (measured: the claim and
    finish UPDATEs were the largest part of a PostgreSQL dispatcher's CPU at 3,000 fires/s). Rows that repeat
    an id keep the executemany, whose updates apply one after another (a join would apply only one)."""

    def __init__(
        self,
        table: Table,
        key: str,
        kinds: dict[str, TypeEngine[Any]],
        values: Callable[[Mapping[str, Any]], dict[Any, Any]],
    ) -> None:
        self.key, self.kinds = key, kinds
        params = {name: bindparam(name, type_=kind) for name, kind in kinds.items()}
        self.statement = update(table).where(table.c.id == params[key]).values(values(params))
        self.sqlite = _SqliteMany(self.statement, kinds)
        rows = _unnest(kinds)
        self.array_statement = update(table).where(table.c.id == rows.c[key]).values(values(rows.c))

    def execute(self, session: Session, rows: list[dict[str, Any]], arrays: bool) -> None:
        """Run the update for ``rows``; ``arrays``: the database takes the array form (PostgreSQL)."""
        if not rows:
            return
        if not arrays:
            self.sqlite.execute(session, rows)
        elif len(rows) > 1 and len({row[self.key] for row in rows}) == len(rows):
            session.execute(
                self.array_statement,
                {name: _pg_array([row[name] for row in rows], kind) for name, kind in self.kinds.items()},
            )
        else:
            session.execute(self.statement, rows)


_MOVE_JOBS = _RowsUpdate(
    JOBS,
    "job_id",
    {
        "job_id": JOBS.c.id.type,
        "next_time": JOBS.c.next_execution_time.type,
        "repeat": JOBS.c.repeat_count.type,
        "run_requested_at": JOBS.c.run_requested_at.type,
        "owner": JOBS.c.lease_owner.type,
    },
    lambda row: {
        JOBS.c.next_execution_time: row["next_time"],
        JOBS.c.repeat_count: row["repeat"],
        JOBS.c.run_requested_at: row["run_requested_at"],
        JOBS.c.lease_owner: row["owner"],
    },
)


def move_jobs_on(session: Session, moves: list[dict[str, Any]], arrays: bool) -> None:
    """Set each claimed job's next due time, occurrence count, pending run request and lease, in one
    executemany UPDATE (keys: job_id, next_time, repeat, run_requested_at, owner)."""
    _MOVE_JOBS.execute(session, moves, arrays)


def take_over_occurrence(session: Session, job_id: int, owner: str, now: datetime) -> tuple[int, datetime, int] | None:
    """Make ``owner`` the runner of the occurrence a stopped dispatcher left unfinished for this job:
    (occurrence id, expected time, repeat count), or None when there is none."""
    row = session.execute(
        select(OCCURRENCES.c.id, OCCURRENCES.c.expected_time, OCCURRENCES.c.repeat_count)
        .where(OCCURRENCES.c.job_id == job_id, OCCURRENCES.c.finished_at.is_(None))
        .order_by(OCCURRENCES.c.id.desc())
        .limit(1)
    ).first()
    if row is None:
        return None
    session.execute(update(OCCURRENCES).where(OCCURRENCES.c.id == row.id).values(owner=owner, claimed_at=now))
    return row.id, row.expected_time, row.repeat_count


_CLOSE_OCCURRENCES = _RowsUpdate(
    OCCURRENCES,
    "b_id",
    {"b_id": OCCURRENCES.c.id.type, "b_now": OCCURRENCES.c.finished_at.type, "b_outcome": OCCURRENCES.c.outcome.type},
    lambda row: {OCCURRENCES.c.finished_at: row["b_now"], OCCURRENCES.c.outcome: row["b_outcome"]},
)
_COUNTER_KINDS: dict[str, TypeEngine[Any]] = {
    "job_id": JOBS.c.id.type,
    "owner": JOBS.c.lease_owner.type,
    "b_exec": Integer(),
    "b_fail": Integer(),
    "b_fault": Integer(),
    "b_last": JOBS.c.last_execution_time.type,
}


def _counters(row: Mapping[str, Any]) -> dict[Any, Any]:
    """An occurrence's end for its job: counters and lease."""
    return {
        JOBS.c.execution_count: JOBS.c.execution_count + row["b_exec"],
        JOBS.c.failure_count: JOBS.c.failure_count + row["b_fail"],
        JOBS.c.faulted_count: JOBS.c.faulted_count + row["b_fault"],
        JOBS.c.last_execution_time: func.coalesce(row["b_last"], JOBS.c.last_execution_time),
        JOBS.c.lease_owner: row["owner"],
    }


# An occurrence's end, in one UPDATE per job: counters, lease, and (when the definition did not change
# meanwhile) the next due time and state; or counters and lease only.
_FINISH_JOBS = _RowsUpdate(
    JOBS,
    "job_id",
    {
        **_COUNTER_KINDS,
        "next_time": JOBS.c.next_execution_time.type,
        "state": JOBS.c.state.type,
        "finished_at": JOBS.c.finished_at.type,
    },
    lambda row: {
        **_counters(row),
        JOBS.c.next_execution_time: row["next_time"],
        JOBS.c.state: row["state"],
        JOBS.c.finished_at: func.coalesce(row["finished_at"], JOBS.c.finished_at),
    },
)
_RELEASE_JOBS = _RowsUpdate(JOBS, "job_id", _COUNTER_KINDS, _counters)


def close_occurrences(session: Session, outcomes: list[tuple[int, str]], now: datetime, arrays: bool) -> None:
    """Mark occurrences (id, outcome) finished now."""
    _CLOSE_OCCURRENCES.execute(session, [{"b_id": i, "b_now": now, "b_outcome": o} for i, o in outcomes], arrays)


def delete_occurrences(session: Session, occurrence_ids: list[int]) -> None:
    if occurrence_ids:
        session.execute(delete(OCCURRENCES).where(OCCURRENCES.c.id.in_(occurrence_ids)))


def still_current(session: Session, job_id: int) -> Any:
    """The job's version and states (its own, its collection's), or None when it is gone."""
    return session.execute(
        select(JOBS.c.version, JOBS.c.state, COLLECTIONS.c.state.label("collection_state"))
        .join_from(JOBS, COLLECTIONS, JOBS.c.collection_id == COLLECTIONS.c.id)
        .where(JOBS.c.id == job_id)
    ).first()


def jobs_to_finish(session: Session, job_ids: list[int]) -> dict[int, Any]:
    """What finishing occurrences needs to know of their jobs, by id (deleted jobs are absent), locked."""
    return _TO_FINISH.rows(session, job_ids)


def jobs_to_restore(session: Session, job_ids: list[int]) -> dict[int, Any]:
    """What giving occurrences back needs to know of their jobs, by id, locked."""
    return _TO_RESTORE.rows(session, job_ids)


class _LockedJobs:
    """Some columns of the jobs with the given ids, by id, locked until the transaction ends: an API write
    (disable, PATCH) then waits, and is never overwritten with what was read before it. Locked in id order,
    so that concurrent batches cannot deadlock on each other. Both statements are built once."""

    def __init__(self, *columns: Any) -> None:
        by_id = select(*columns).order_by(JOBS.c.id).with_for_update()
        self.listed = by_id.where(JOBS.c.id.in_(bindparam("ids", expanding=True)))
        # PostgreSQL: the ids as one array parameter. An IN list of a hundred ids is a statement SQLAlchemy
        # renders and psycopg parses anew at every batch (measured: a third of a completion's CPU); this is the
        # same text every time.
        self.array = by_id.where(
            JOBS.c.id == any_(sql_cast(bindparam("ids", type_=String()), postgresql.ARRAY(BigInteger())))
        )

    def rows(self, session: Session, job_ids: list[int]) -> dict[int, Any]:
        if session.get_bind().dialect.name == "postgresql":
            result = session.execute(self.array, {"ids": _pg_array(job_ids, JOBS.c.id.type)})
        else:
            result = session.execute(self.listed, {"ids": job_ids})
        return {row.id: row for row in result.all()}


_TO_FINISH = _LockedJobs(JOBS.c.id, JOBS.c.version, JOBS.c.state, JOBS.c.lease_owner)
_TO_RESTORE = _LockedJobs(
    JOBS.c.id,
    JOBS.c.version,
    JOBS.c.lease_owner,
    JOBS.c.next_execution_time,
    JOBS.c.repeat_count,
    JOBS.c.run_requested_at,
)


def add_history(session: Session, entries: list[tuple[int, dict[str, Any]]], arrays: bool | None = None) -> None:
    """Insert history entries (job id, JobHistoryRow's columns); ``arrays``: in one statement over arrays
    (PostgreSQL; default: decided from the session's database, for callers outside the dispatcher)."""
    if not entries:
        return
    if arrays is None:
        arrays = session.get_bind().dialect.name == "postgresql"
    if len(entries) > 1 and arrays:
        columns = {"job_id": _pg_array([job_id for job_id, _ in entries], HISTORY.c.job_id.type)}
        for name, (kind, default) in _HISTORY_COLUMNS.items():
            columns[name] = _pg_array([entry.get(name, default) for _, entry in entries], kind)
        session.execute(_PG_INSERT_HISTORY, columns)
    else:
        _INSERT_HISTORY.execute(session, [{"job_id": job_id, **entry} for job_id, entry in entries])


# A batch of history entries on PostgreSQL: one INSERT over arrays (see _RowsUpdate), with the columns' defaults.
_HISTORY_COLUMNS = {
    column.name: (column.type, column.default.arg if column.default is not None else None)  # type: ignore[attr-defined]
    for column in HISTORY.columns
    if column.name not in ("id", "job_id")
}
_HISTORY_ROWS = _unnest(
    {"job_id": HISTORY.c.job_id.type, **{name: kind for name, (kind, _) in _HISTORY_COLUMNS.items()}}
)
_PG_INSERT_HISTORY = insert(HISTORY).from_select(["job_id", *_HISTORY_COLUMNS], select(*_HISTORY_ROWS.c))
_HISTORY_KINDS = {"job_id": HISTORY.c.job_id.type, **{name: kind for name, (kind, _) in _HISTORY_COLUMNS.items()}}
_INSERT_HISTORY = _SqliteMany(
    insert(HISTORY).values({name: bindparam(name, type_=kind) for name, kind in _HISTORY_KINDS.items()}),
    _HISTORY_KINDS,
    {name: default for name, (_, default) in _HISTORY_COLUMNS.items()},
)


def finish_jobs(session: Session, moved: list[dict[str, Any]], released: list[dict[str, Any]], arrays: bool) -> None:
    """Write finished occurrences' jobs. ``moved``: counters, lease, next due time and state (keys: job_id,
    owner, next_time, state, finished_at, b_exec, b_fail, b_fault, b_last); ``released``: counters and lease
    only (the job was changed meanwhile)."""
    _FINISH_JOBS.execute(session, moved, arrays)
    _RELEASE_JOBS.execute(session, released, arrays)


WAKE_CHANNEL = "scheduler_emulator_wake"


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


def announce_change(session: Session, not_before: datetime | None = None) -> None:
    """Tell every dispatcher process sharing this PostgreSQL database to look for due work (delivered at
    commit); ``not_before`` (see earliest_noted) goes with it as the payload, so that a dispatcher that looks by
    itself before then can ignore it. SQLite has one process, whose dispatcher is woken in-process instead."""
    if session.get_bind().dialect.name == "postgresql":
        if not_before is None:
            session.execute(text(f"NOTIFY {WAKE_CHANNEL}"))
        else:
            session.execute(
                text("SELECT pg_notify(:channel, :payload)"),
                {"channel": WAKE_CHANNEL, "payload": not_before.isoformat()},
            )


def wake_payload(payload: str) -> datetime | None:
    """The ``not_before`` a notification carries (None: none, or unreadable: look at once)."""
    try:
        moment = datetime.fromisoformat(payload) if payload else None
    except ValueError:
        return None
    return moment if moment is not None and moment.tzinfo is not None else None


def count_due(session: Session, now: datetime) -> int:
    """How many jobs are due (scheduled at or before ``now``, enabled) and not claimed yet."""
    return (
        session.scalar(
            select(func.count())
            .select_from(JobRow)
            .join(JobCollectionRow, JobRow.collection_id == JobCollectionRow.id)
            .where(
                JobRow.lease_owner.is_(None),
                JobRow.state == "Enabled",
                JobCollectionRow.state == "Enabled",
                JobRow.next_execution_time <= now,
            )
        )
        or 0
    )


def next_due_time(session: Session) -> datetime | None:
    """The earliest next execution time of an enabled, unleased job in an enabled collection, or pending run
    request (no lease considered)."""
    times = [t for t in (_earliest_scheduled(session), _earliest_request(session)) if t is not None]
    return min(times) if times else None


def _earliest_scheduled(session: Session) -> datetime | None:
    # ORDER BY … LIMIT 1 rather than min(): both databases then walk the index and stop at the first match.
    return session.scalar(
        select(JOBS.c.next_execution_time)
        .join_from(JOBS, COLLECTIONS, JOBS.c.collection_id == COLLECTIONS.c.id)
        .where(
            JOBS.c.next_execution_time.is_not(None),
            JOBS.c.lease_owner.is_(None),
            JOBS.c.state == JobState.Enabled,
            COLLECTIONS.c.state == JobState.Enabled,
        )
        .order_by(JOBS.c.next_execution_time)
        .limit(1)
    )


def _earliest_request(session: Session) -> datetime | None:
    return session.scalar(
        select(JOBS.c.run_requested_at)
        .where(JOBS.c.run_requested_at.is_not(None), JOBS.c.lease_owner.is_(None))
        .order_by(JOBS.c.run_requested_at)
        .limit(1)
    )


def next_wake_time(session: Session, owner: str, now: datetime, ahead: timedelta = timedelta(0)) -> datetime | None:
    """The earliest instant at which a job becomes claimable (a scheduled time less ``ahead``, a run request,
    or a lease expiry)."""
    scheduled, requested = _earliest_scheduled(session), _earliest_request(session)
    # Another dispatcher's heartbeat running out is when its leases can be taken over.
    lease = session.scalar(
        select(func.min(DispatcherRow.expires_at)).where(DispatcherRow.owner != owner, DispatcherRow.expires_at > now)
    )
    if scheduled is not None:
        scheduled -= ahead
    times = [t for t in (scheduled, requested, lease) if t is not None]
    return min(times) if times else None


# On PostgreSQL a batch travels as three arrays in one short statement: the multi-row VALUES form that
# SQLAlchemy sends otherwise is a statement thousands of parameters long, which the driver parses at every call
# (measured: a quarter of the claim's CPU).
_PG_INSERT_OCCURRENCES = text(
    "INSERT INTO job_occurrences (job_id, expected_time, repeat_count, owner, first_owner, claimed_at) "
    "SELECT v.job_id, v.expected_time, v.repeat_count, :owner, :owner, :now "
    "FROM unnest(CAST(:jobs AS BIGINT[]), CAST(:times AS TIMESTAMPTZ[]), CAST(:repeats AS INTEGER[])) "
    "AS v(job_id, expected_time, repeat_count) "
    "ON CONFLICT (job_id, expected_time) DO NOTHING RETURNING id, job_id, expected_time"
)


def insert_occurrences(
    session: Session, occurrences: list[tuple[int, datetime, int]], owner: str, now: datetime, arrays: bool
) -> dict[tuple[int, datetime], int]:
    """Record (job id, expected time, repeat count) occurrences in one statement (``arrays``: PostgreSQL's form,
    else SQLite's); one already recorded is skipped by the unique key. Returns the new ones' ids by (job id,
    expected time)."""
    if not occurrences:
        return {}
    if arrays:
        job_ids, times, repeats = (list(column) for column in zip(*occurrences, strict=True))
        found = session.execute(
            _PG_INSERT_OCCURRENCES,
            {
                "jobs": _pg_array(job_ids, OCCURRENCES.c.job_id.type),
                "times": _pg_array(times, OCCURRENCES.c.expected_time.type),
                "repeats": _pg_array(repeats, OCCURRENCES.c.repeat_count.type),
                "owner": owner,
                "now": now,
            },
        )
        return {(job_id, expected): row_id for row_id, job_id, expected in found.all()}
    return _insert_occurrences_sqlite(session, occurrences, owner, now)


# On SQLite a batch is a multi-row VALUES statement with positional parameters built here, at most this many
# rows per statement (its host parameters stay far under SQLite's limit): SQLAlchemy's "insertmanyvalues" built and
# processed a dict of parameters per row, ~10 % of a claim's CPU (measured).
_SQLITE_OCCURRENCE_ROWS = 250
_SQLITE_INSERT_OCCURRENCES = (
    "INSERT INTO job_occurrences (job_id, expected_time, repeat_count, owner, first_owner, claimed_at) VALUES {rows} "
    "ON CONFLICT (job_id, expected_time) DO NOTHING RETURNING id, job_id, expected_time"
)
_SQLITE_TIME = OCCURRENCES.c.expected_time.type.dialect_impl(_SQLITE)
_SQLITE_TIME_IN: Callable[[datetime], str] = _SQLITE_TIME.bind_processor(_SQLITE)  # type: ignore[assignment]
_SQLITE_TIME_OUT: Callable[[str], datetime] = _SQLITE_TIME.result_processor(_SQLITE, None)  # type: ignore[assignment]


def _insert_occurrences_sqlite(
    session: Session, occurrences: list[tuple[int, datetime, int]], owner: str, now: datetime
) -> dict[tuple[int, datetime], int]:
    claimed_at = _SQLITE_TIME_IN(now)
    connection = session.connection()
    inserted: dict[tuple[int, datetime], int] = {}
    for start in range(0, len(occurrences), _SQLITE_OCCURRENCE_ROWS):
        chunk = occurrences[start : start + _SQLITE_OCCURRENCE_ROWS]
        values: list[Any] = []
        for job_id, expected, repeat in chunk:
            values += (job_id, _SQLITE_TIME_IN(expected), repeat, owner, owner, claimed_at)
        sql = _SQLITE_INSERT_OCCURRENCES.format(rows=", ".join(["(?, ?, ?, ?, ?, ?)"] * len(chunk)))
        for row_id, job_id, expected_text in connection.exec_driver_sql(sql, tuple(values)).all():
            inserted[(job_id, _SQLITE_TIME_OUT(expected_text))] = row_id
    return inserted


def heartbeat(session: Session, owner: str, now: datetime, until: datetime) -> None:
    """Keep ``owner`` registered as alive until ``until``: this one-row UPDATE renews every lease it holds."""
    result = session.execute(update(DispatcherRow).where(DispatcherRow.owner == owner).values(expires_at=until))
    if not result.rowcount:  # type: ignore[attr-defined]
        session.add(DispatcherRow(owner=owner, started_at=now, expires_at=until))


def held_occurrences(session: Session, owner: str, occurrence_ids: Sequence[int], lock: bool) -> set[int]:
    """Which of ``occurrence_ids`` ``owner`` still runs: the occurrence is unfinished and still its own, and so is
    its job's lease (another dispatcher that took the job over after ``owner``'s heartbeat ran out owns both).
    ``lock``: lock those jobs until the transaction ends (PostgreSQL), so that a takeover under way is waited for
    and seen rather than raced."""
    if not occurrence_ids:
        return set()
    query = (
        select(OCCURRENCES.c.id)
        .join_from(OCCURRENCES, JOBS, JOBS.c.id == OCCURRENCES.c.job_id)
        .where(
            OCCURRENCES.c.id.in_(list(occurrence_ids)),
            OCCURRENCES.c.owner == owner,
            OCCURRENCES.c.finished_at.is_(None),
            JOBS.c.lease_owner == owner,
        )
        .order_by(JOBS.c.id)
    )
    if lock:
        query = query.with_for_update(of=JOBS)
    return set(session.scalars(query))


def record_attempt(
    session: Session, job_id: int, entry: dict[str, Any], counts_as_execution: bool, failed: bool
) -> bool:
    """Store one history entry (JobHistoryRow's columns) and move the job's counters; False when the job
    was deleted."""
    if counts_as_execution:
        values: dict[str, Any] = {
            "execution_count": JOBS.c.execution_count + 1,
            "last_execution_time": entry["start_time"],
        }
        if failed:
            values["failure_count"] = JOBS.c.failure_count + 1
        if not session.execute(update(JOBS).where(JOBS.c.id == job_id).values(**values)).rowcount:  # type: ignore[attr-defined]
            return False
    elif session.execute(select(JOBS.c.id).where(JOBS.c.id == job_id)).first() is None:
        return False
    session.execute(insert(HISTORY).values(job_id=job_id, **entry))
    return True


def add_faulted(session: Session, job_id: int) -> None:
    session.execute(update(JOBS).where(JOBS.c.id == job_id).values(faulted_count=JOBS.c.faulted_count + 1))


def sign_off(session: Session, owner: str) -> None:
    """Forget ``owner``: the leases it still holds can be taken over at once."""
    session.execute(delete(DispatcherRow).where(DispatcherRow.owner == owner))


def prune_history(session: Session, max_entries: int, older_than: datetime) -> int:
    """Drop history entries past the newest ``max_entries`` of each job, and those older than ``older_than``."""
    removed = session.execute(delete(JobHistoryRow).where(JobHistoryRow.start_time < older_than)).rowcount  # type: ignore[attr-defined]
    crowded = session.scalars(
        select(JobHistoryRow.job_id).group_by(JobHistoryRow.job_id).having(func.count() > max_entries)
    ).all()
    for job_id in crowded:
        removed += prune_job_history(session, job_id, max_entries)
    return int(removed)


def prune_job_history(session: Session, job_id: int, max_entries: int) -> int:
    """Keep only the newest ``max_entries`` history entries of one job."""
    boundary = session.scalar(
        select(JobHistoryRow.id)
        .where(JobHistoryRow.job_id == job_id)
        .order_by(JobHistoryRow.id.desc())
        .offset(max_entries - 1)
        .limit(1)
    )
    if boundary is None:
        return 0
    result = session.execute(delete(JobHistoryRow).where(JobHistoryRow.job_id == job_id, JobHistoryRow.id < boundary))
    return int(result.rowcount)  # type: ignore[attr-defined]


def prune_finished(
    session: Session, finished_before: datetime, occurrences_before: datetime, owners_before: datetime | None = None
) -> int:
    """Delete Completed/Faulted jobs that finished before ``finished_before`` (with their history), finished
    occurrence records claimed before ``occurrences_before``, and owners whose heartbeat (real time) ran out
    before ``owners_before`` (default ``occurrences_before``) holding no lease."""
    session.execute(
        delete(OccurrenceRow).where(
            OccurrenceRow.finished_at.is_not(None), OccurrenceRow.claimed_at < occurrences_before
        )
    )
    session.execute(
        delete(DispatcherRow).where(
            DispatcherRow.expires_at < (owners_before or occurrences_before),
            ~select(JobRow.id).where(JobRow.lease_owner == DispatcherRow.owner).exists(),
        )
    )
    old = select(JobRow.id).where(JobRow.state.in_(FINAL_STATES), JobRow.finished_at < finished_before)
    ids = list(session.scalars(old))
    if not ids:
        return 0
    session.execute(delete(JobHistoryRow).where(JobHistoryRow.job_id.in_(ids)))
    session.execute(delete(OccurrenceRow).where(OccurrenceRow.job_id.in_(ids)))
    session.execute(delete(JobRow).where(JobRow.id.in_(ids)))
    return len(ids)
