"""What every handler needs: the JSON body, a store session off the event loop, the clock."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterator
from concurrent.futures import Executor
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from fastapi import Request
from pydantic import BaseModel, ValidationError
from sqlalchemy import Connection
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.orm import Session
from starlette.requests import ClientDisconnect

from scheduler_emulator.api import errors
from scheduler_emulator.config_groups import DEFAULT_MAX_BODY_BYTES, DispatchSettings
from scheduler_emulator.domain.clock import Clock
from scheduler_emulator.domain.errors import Conflict, FieldError, InvalidName, NotFound, TooLarge
from scheduler_emulator.schemas import strict_json
from scheduler_emulator.schemas.common import first_field_error
from scheduler_emulator.store.database import Database
from scheduler_emulator.store.wakeups import earliest_noted, wake_needed
from scheduler_emulator.store.write_scope import WriteScope, collection_lock, write_scope

if TYPE_CHECKING:
    from scheduler_emulator.dispatcher.host import DispatcherHost

log = logging.getLogger("scheduler_emulator.api")
MAX_ASSUMED_POLL = 60.0  # seconds: the longest --poll-interval assumed of any process sharing the database
T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)


async def json_object(request: Request) -> dict[str, Any]:
    """The request body as a JSON object read with the strict reader (see ``parse_json_object``)."""
    return parse_json_object(await read_body(request))


async def read_body(request: Request) -> bytes:
    """The request body; 413 once more than ``--max-body-bytes`` have arrived (counted while reading,
    never buffered whole first)."""
    limit = max_body_bytes(request)
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise errors.request_too_large("request body", limit, size)
            chunks.append(chunk)
    except ClientDisconnect:
        # The client went away before its whole body arrived (it gave up, or was stopped): nothing to answer, and
        # nothing wrong here. 499 (nginx's "client closed request") goes to the access log; no one receives it.
        log.info("client disconnected before sending its whole request body (%s %s)", request.method, request.url.path)
        raise errors.ArmError(499, "ClientClosedRequest", "The client closed the connection mid-request.") from None
    return b"".join(chunks)


def parse_json_object(raw: bytes) -> dict[str, Any]:
    """``raw`` as a JSON object read with the strict reader (schemas.strict_json): InvalidRequestContent
    for malformed JSON, BadRequest naming the field for values no store can hold."""
    if not raw.strip():
        raise errors.invalid_request_content("the request body is empty; a JSON object is expected")
    try:
        body = strict_json.loads(raw)
    except strict_json.InvalidContent as exc:
        raise errors.invalid_request_content(str(exc)) from None
    if not isinstance(body, dict):
        raise errors.invalid_request_content("the body must be a JSON object")
    try:
        strict_json.check_values(body)
    except FieldError as exc:
        raise errors.from_field_error(exc) from None
    return body


def max_body_bytes(request: Request) -> int:
    """The operator's request body cap (``--max-body-bytes``)."""
    settings = getattr(request.app.state, "settings", None)
    return DEFAULT_MAX_BODY_BYTES if settings is None else settings.server.max_body_bytes


def validated(model: type[M], body: dict[str, Any]) -> M:
    """``body`` read into ``model``; a 400 naming the first offending field path otherwise."""
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        raise errors.from_field_error(first_field_error(exc)) from None


def clock(request: Request) -> Clock:
    clock_: Clock = request.app.state.clock
    return clock_


def now(request: Request) -> datetime:
    """The clock's time; the pipeline had it catch up as the request started (a virtual clock another process
    moved), so this never calls the database."""
    return clock(request).now()


def wake_dispatcher(request: Request, not_before: datetime | None = None) -> None:
    """Tell this process's dispatcher that a job may have become due earlier (``not_before``: see
    Dispatcher.wake); one in another process hears it through the store (store/wakeups.py)."""
    dispatcher: DispatcherHost | None = request.app.state.dispatcher
    if dispatcher is not None:
        dispatcher.wake(not_before)


def wake_lookahead(dispatch: DispatchSettings) -> timedelta | None:
    """How far past the wall clock's time a change must make a job due for the dispatchers to need waking
    (store.wakeups.wake_needed): every dispatcher looks again by itself within its poll interval and then
    claims this far ahead. Other processes sharing the database may poll less often than this one: up to a
    minute is assumed, and the largest claim-ahead allowed (a job due later than that needs no wake-up
    anywhere). None under ``--clock virtual``, in every process sharing it: due times are virtual, so no wall
    clock horizon applies, and every change wakes the dispatchers and has them re-check what they claimed."""
    if dispatch.virtual_clock:
        return None
    return timedelta(seconds=max(dispatch.poll_interval, MAX_ASSUMED_POLL) + max(dispatch.claim_ahead, 10.0))


def retry_floor(request: Request) -> timedelta:
    """The operator's retry-interval floor for paid plans (``--min-retry-interval``)."""
    return timedelta(seconds=request.app.state.settings.dispatch.min_retry_interval)


def write_locks(request: Request) -> list[str]:
    """The locks a write holds, always taken in this order (subscription, then collection), so that writes
    that check before they act (one Free collection per subscription, the collection count, a collection's
    job count, create-or-replace of a name) never interleave with another write of the same scope:

    - a job write (``.../jobCollections/{jc}/jobs...``) locks its collection only: writes to different
      collections run in parallel;
    - any other write (a collection, a classic call) locks its subscription, then the collection it names."""
    if request.method in ("GET", "HEAD"):
        return []
    params = request.path_params
    subscription = params.get("subscription_id")
    if subscription is None:
        return []
    subscription = subscription.lower()
    collection = params.get("collection_name")
    if collection is None:
        return [f"subscription:{subscription}"]
    group = str(params.get("resource_group", "")).lower()
    collection_key = collection_lock(subscription, group, str(collection))
    job_write = "job_name" in params or request.url.path.rstrip("/").lower().endswith("/jobs")
    return [collection_key] if job_write else [f"subscription:{subscription}", collection_key]


async def in_session(request: Request, work: Callable[[Session], T], *, wake: bool = False) -> T:
    """in_write_scope's simple case: ``work`` runs on the transaction's session holding the request's write locks
    (see write_locks) from the start."""

    locks = write_locks(request)

    def locked_first(scope: WriteScope) -> T:
        scope.hold(*locks)
        return work(scope.session)

    return await in_write_scope(request, locked_first, wake=wake)


async def in_write_scope(request: Request, work: Callable[[WriteScope], T], *, wake: bool = False) -> T:
    """The one way a request writes: ``work`` runs in one store transaction on the database's writer thread
    (SQLite) or on the event loop through SQLAlchemy's async engine (PostgreSQL: Database.in_transaction_on_loop),
    given a write scope over it (store.write_scope: ``lock(collection)``,
    ``insert_if_unchanged``) through which it takes the write lock before it writes, or before it reads anything
    its checks need that a concurrent write could change; domain errors become ARM errors. ``wake``: the work
    may make a job due earlier, so wake the dispatchers once it is committed, unless every job it changed noted
    (store.wakeups.note_due) that it is not due before they look anyway."""
    database: Database = request.app.state.database
    lookahead = wake_lookahead(request.app.state.settings.dispatch)

    def run_in(session: Session) -> tuple[T, bool, datetime | None]:
        looks_by = None if lookahead is None else datetime.now(UTC) + lookahead  # the dispatchers, by themselves
        scope = write_scope(database, session)
        result = work(scope)
        woken = wake and (looks_by is None or wake_needed(session, looks_by))
        not_before = None if looks_by is None or not woken else earliest_noted(session)
        if woken:
            scope.announce_change(not_before)
        return result, woken, not_before

    def run() -> tuple[T, bool, datetime | None]:
        with database.session() as session:
            return run_in(session)

    if database.on_loop:
        with _as_arm_errors():
            result, woken, not_before = await database.in_transaction_on_loop(run_in)
    else:
        result, woken, not_before = await _in_thread(run, database.writer() or database.workers())
    if woken:
        wake_dispatcher(request, not_before)
    return result


async def in_read_session(request: Request, work: Callable[[Session], T]) -> T:
    """The one way a request reads more than one statement: ``work``, which only reads, in one read transaction
    (Database.read_session: on SQLite it neither waits for writes and the dispatcher's transactions nor holds them
    up) on a reader thread (Database.reader), on the event loop (PostgreSQL: Database.in_read_transaction_on_loop)
    or, for an in-memory database, a worker thread; domain errors become ARM errors. A write through
    its session fails."""
    database: Database = request.app.state.database

    def run() -> T:
        with database.read_session() as session:
            return work(session)

    if database.on_loop:
        with _as_arm_errors():
            return await database.in_read_transaction_on_loop(work)
    return await _in_thread(run, database.reader() or database.workers())


async def read_one_statement(request: Request, work: Callable[[Connection], T]) -> T:
    """The one way a request reads a single statement (a job with its collection, a collection): ``work`` runs
    it on a connection outside any transaction and without an ORM session (Database.statement_connection);
    domain errors become ARM errors. On a SQLite file, which never makes a reader wait, ``work`` runs here on the
    event loop rather than on a reader thread: there it took the interpreter lock back after each call into
    SQLite, behind the event loop's and the dispatcher's threads; with 3,000 fires/s and 100 GET job/s the reader
    threads used 1.46 ms of CPU per GET against about 0.4 ms on the loop (bench/thread_cpu.py;
    bench/README.md#reads-of-one-statement). On PostgreSQL it runs on the event loop through the async engine
    (Database.on_statement_connection_on_loop); in an in-memory database, on a worker thread."""
    database: Database = request.app.state.database

    def run() -> T:
        with database.statement_connection() as connection:
            return work(connection)

    if database.reader() is not None:
        with _as_arm_errors():
            return run()
    if database.on_loop:
        with _as_arm_errors():
            return await database.on_statement_connection_on_loop(work)
    return await _in_thread(run, database.workers())


async def _in_thread(run: Callable[[], T], executor: Executor) -> T:
    """``run`` on one of ``executor``'s threads (Database.writer, reader or workers); domain errors become ARM
    errors, the database's state a 503."""
    with _as_arm_errors():
        return await asyncio.get_running_loop().run_in_executor(executor, run)


@contextmanager
def _as_arm_errors() -> Iterator[None]:
    """Domain errors raised inside as ARM errors, the database's state as a 503."""
    try:
        yield
    except (FieldError, Conflict, NotFound, InvalidName, TooLarge) as exc:
        raise errors.from_domain(exc) or exc from None
    except (OperationalError, PoolTimeout) as exc:
        # Operational errors are the database's state (unreachable, restarting, refusing connections),
        # never the request's: answer 503 at once rather than hang or 500.
        log.warning("database unavailable: %s", str(exc).splitlines()[0])
        raise errors.service_unavailable("The database is unreachable; try again shortly.") from None
    except DBAPIError as exc:
        if exc.connection_invalidated:
            raise errors.service_unavailable("The database connection was lost; try again shortly.") from None
        raise
