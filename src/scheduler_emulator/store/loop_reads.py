"""Reads of one statement on the event loop, over psycopg's own asynchronous connections (PostgreSQL only).

A GET of a job read on a worker thread left the event loop for the thread and came back, each way waiting for
the interpreter lock behind the dispatcher's loop turns and threads: with 3,000 fires/s on one process, GET p99
was 28-66 ms, of which the read itself (a point query) was 13.6 and the two hand-overs 8.4 and 18.4 (bench/README,
issue 33, tenth session). Here the statement goes out from the loop and its answer comes back to it, with no
thread and no ORM session (0.23 ms of CPU per read against 0.48; eleventh session): the statement is an ORM
``select`` of whole entities, compiled once for the engine's dialect; its columns are read through the same result
processors the ORM applies (a sealed definition is opened, datetimes come back in UTC) and made into detached
instances of the entities. One write goes the same way: a new job's guarded insert, as one transaction of one
round trip (``transaction``; store.write_scope.LoopCreate, thirteenth session).

Connections are psycopg's, opened with the engine's own connection arguments (server-side time bounds, keepalive,
the dialect's adapters), at most ``size`` at a time, kept idle between reads, one event loop's at a time. A read
is bounded by ``timeout`` (a hung server answers 503, it cannot stall the loop); a connection that fails or times
out is closed, never reused; a read that fails on a connection that sat idle (the server restarted meanwhile) is
tried once more on a new one. Failures come out as SQLAlchemy's OperationalError, as the ORM's reads' do.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from sqlalchemy import Engine, Select, inspect
from sqlalchemy.exc import OperationalError

log = logging.getLogger("scheduler_emulator.store")

SIZE = 4  # connections at most: a GET holds one for one round trip
TIMEOUT_SECONDS = 10.0  # a read's bound, connecting included (as the pool's wait for a connection)


@dataclass(frozen=True, slots=True)
class _Compiled:
    """A statement ready to send: its SQL, its parameters' processors, and per entity its attribute keys and
    their columns' processors (in the order of the SELECT list)."""

    sql: str
    binds: tuple[tuple[str, Any], ...]
    entities: tuple[tuple[type, tuple[str, ...], tuple[Any, ...]], ...]


class LoopReads:
    """One-statement reads of whole entities on the running event loop (see the module's docstring)."""

    def __init__(
        self, engine: Engine, connect_args: dict[str, Any], *, size: int = SIZE, timeout: float = TIMEOUT_SECONDS
    ) -> None:
        self._dialect = engine.dialect
        args, params = engine.dialect.create_connect_args(engine.url)
        self._conninfo = str(args[0]) if args else ""
        self._params = {**params, **connect_args}
        self._size = size
        self._timeout = timeout
        self._compiled: dict[int, tuple[Select[*tuple[Any, ...]], _Compiled]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._slots: asyncio.Semaphore | None = None
        self._idle: list[psycopg.AsyncConnection[Any]] = []

    async def first(self, statement: Select[*tuple[Any, ...]], params: dict[str, Any]) -> tuple[Any, ...] | None:
        """The first row of ``statement``, a select of whole mapped entities (``select(A, B)``, joins and
        conditions as the ORM's), as a tuple of detached instances, None for an entity whose primary key came
        back NULL (an outer join's missing side); None when there is no row."""
        compiled = self._compile(statement)
        values = {name: process(params[name]) if process else params[name] for name, process in compiled.binds}
        row = await self._fetch(compiled.sql, values)
        if row is None:
            return None
        found: list[Any] = []
        at = 0
        for entity, keys, processors in compiled.entities:
            raw = row[at : at + len(keys)]
            at += len(keys)
            if raw[0] is None:  # the primary key (first of the mapper's columns): no such row
                found.append(None)
                continue
            found.append(
                entity(
                    **{
                        key: process(value) if process else value
                        for key, value, process in zip(keys, raw, processors, strict=True)
                    }
                )
            )
        return tuple(found)

    @property
    def dialect(self) -> Any:
        """The engine's dialect (what the statements are compiled for, and their parameters converted by)."""
        return self._dialect

    async def transaction(self, statements: Sequence[tuple[str, dict[str, Any]]], answer: int) -> Sequence[Any] | None:
        """Run ``statements`` (the driver's own SQL and parameters) as one transaction in one round trip: BEGIN,
        each in turn, COMMIT, sent as one query of the simple protocol, its values bound by psycopg on this side
        (``mogrify``, quoted as the server would read them); the server runs them one after another, so one that
        takes a lock holds it until the COMMIT. psycopg's pipeline mode did the same with the values apart, but
        cost the API's process about a fifth more CPU per job create, in its wait for each statement's turn to
        be sent (bench/README, issue 33, thirteenth session). The first row of statement ``answer`` (None: it
        gave none). Bounded and retried as a read: a connection that fails is closed; one that sat idle while
        the server went away fails before the server ran anything, and the transaction is sent once more on a
        new one. An error of any statement ends the transaction with nothing written, and the connection with
        it."""

        async def run(connection: psycopg.AsyncConnection[Any]) -> Sequence[Any] | None:
            cursor = psycopg.AsyncClientCursor(connection)
            text = "; ".join(["BEGIN", *(cursor.mogrify(sql, values) for sql, values in statements), "COMMIT"])
            await cursor.execute(text)
            for _ in range(answer + 1):  # past BEGIN's result and those before the answer's
                cursor.nextset()
            return await cursor.fetchone()

        return await self._on_connection(statements[answer][0], run)

    async def close(self) -> None:
        """Close the idle connections (those in use are closed as their reads end)."""
        idle, self._idle = self._idle, []
        for connection in idle:
            await _close(connection)

    def _compile(self, statement: Select[*tuple[Any, ...]]) -> _Compiled:
        cached = self._compiled.get(id(statement))
        if cached is not None and cached[0] is statement:
            return cached[1]
        entities: list[tuple[type, tuple[str, ...], tuple[Any, ...]]] = []
        columns: list[Any] = []
        for description in statement.column_descriptions:
            entity = description["entity"]
            if entity is None or description["type"] is not entity:
                raise TypeError("LoopReads reads whole entities only")
            mapper = inspect(entity)
            primary = mapper.primary_key[0]
            props = sorted(mapper.column_attrs, key=lambda prop: prop.columns[0] is not primary)
            keys = tuple(prop.key for prop in props)
            mapped = [prop.columns[0] for prop in props]
            processors = tuple(
                column.type.dialect_impl(self._dialect).result_processor(self._dialect, None) for column in mapped
            )
            entities.append((entity, keys, processors))
            columns.extend(mapped)
        compiled = statement.with_only_columns(*columns).compile(dialect=self._dialect)
        binds = tuple(
            (name, bind.type.dialect_impl(self._dialect).bind_processor(self._dialect))
            for name, bind in compiled.binds.items()
        )
        ready = _Compiled(compiled.string, binds, tuple(entities))
        self._compiled[id(statement)] = (statement, ready)
        return ready

    async def _fetch(self, sql: str, values: dict[str, Any]) -> Sequence[Any] | None:
        async def run(connection: psycopg.AsyncConnection[Any]) -> Sequence[Any] | None:
            cursor = await connection.execute(sql, values)
            return await cursor.fetchone()

        return await self._on_connection(sql, run)

    async def _on_connection(
        self, sql: str, run: Callable[[psycopg.AsyncConnection[Any]], Awaitable[Sequence[Any] | None]]
    ) -> Sequence[Any] | None:
        """``run`` on an idle connection (or a new one), bounded by the timeout, retried once on a new one when a
        reused one fails; errors as SQLAlchemy's OperationalError (``sql`` named in it, never the values)."""
        self._bind_to_running_loop()
        assert self._slots is not None
        try:
            async with asyncio.timeout(self._timeout):
                async with self._slots:
                    for attempt in (1, 2):
                        connection, reused = await self._connection()
                        try:
                            row = await run(connection)
                        except psycopg.OperationalError:
                            await _close(connection)
                            if reused and attempt == 1:
                                continue  # it sat idle while the server went away: once more, on a new one
                            raise
                        except BaseException:
                            await _close(connection)
                            raise
                        self._idle.append(connection)
                        return row
        except TimeoutError as exc:
            raise OperationalError(sql, None, exc, hide_parameters=True) from None
        except psycopg.OperationalError as exc:
            raise OperationalError(sql, None, exc, hide_parameters=True) from None
        raise AssertionError("unreachable")

    async def _connection(self) -> tuple[psycopg.AsyncConnection[Any], bool]:
        while self._idle:
            connection = self._idle.pop()
            if not connection.closed:
                return connection, True
        connection = await psycopg.AsyncConnection.connect(self._conninfo, autocommit=True, **self._params)
        return connection, False

    def _bind_to_running_loop(self) -> None:
        """Connections and the limit belong to one event loop; another loop (a test's next app) starts afresh."""
        loop = asyncio.get_running_loop()
        if loop is self._loop:
            return
        for connection in self._idle:  # their loop has ended or is elsewhere: close without it
            connection.pgconn.finish()
        self._idle = []
        self._loop = loop
        self._slots = asyncio.Semaphore(self._size)


async def _close(connection: psycopg.AsyncConnection[Any]) -> None:
    try:
        await connection.close()
    except Exception:  # noqa: BLE001 - closing a broken connection: nothing more to do
        log.debug("closing a loop-read connection failed", exc_info=True)
