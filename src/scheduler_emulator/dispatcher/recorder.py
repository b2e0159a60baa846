"""Write-behind batching of the dispatcher's small writes (attempt records, occurrence completions, hand-backs):
what comes in within a few milliseconds is handed to the store port as one batch, written in one transaction,
so a thousand fires a second cost tens of commits, not thousands — and the batch's completions a handful of
statements rather than a handful per occurrence (see DispatchStore.write)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from scheduler_emulator.store.dispatch_records import Write

log = logging.getLogger("scheduler_emulator.dispatcher")

# How long a batch gathers before it is written. Each batch is one transaction (several statements, a commit,
# a thread hand-off): at 1,000 fires/s, 20 ms makes ~50 of them a second instead of ~200 with 5 ms, for
# history that appears at most 20 ms later. (A dispatcher that waits for its own writes gathers for less:
# stepping.PACING.)
GATHER_SECONDS = 0.02
MAX_BATCH = 500
# Callers resumed per turn of the event loop once their batch is written. All of a batch's callers (a hundred or
# more at 3,000 fires/s) resumed at once made one turn of the loop last 10-20 ms, and every request that arrived
# meanwhile (a GET) waited for the whole turn; in turns of this many, the loop reads its sockets in between.
RESUME_AT_ONCE = 16

WriteBatch = Callable[[Sequence[Write]], Sequence[Any]]


def is_outage(exc: BaseException) -> bool:
    """Whether ``exc`` is the database's state rather than the write's fault: unreachable, restarting, refusing
    connections, a pool with none to spare, or a session the server ended (e.g. idle inside a transaction past
    its bound while this process was frozen: psycopg reports that one as an InternalError)."""
    if isinstance(exc, OperationalError | PoolTimeout):
        return True
    return isinstance(exc, DBAPIError) and exc.connection_invalidated


class BatchRecorder:
    """``await submit(item)`` writes ``item`` in a transaction shared with other submissions and returns its
    result. An item that fails is retried alone so it cannot take its neighbours down; a database outage fails
    the whole batch (callers retry)."""

    def __init__(
        self, write: WriteBatch, gather: float = GATHER_SECONDS, on_batch: Callable[[], None] | None = None
    ) -> None:
        self._write = write
        self._gather = gather
        self._on_batch = on_batch
        self._pending: list[tuple[Write, asyncio.Future[Any]]] = []
        self._drainer: asyncio.Task[None] | None = None

    async def submit(self, item: Write) -> Any:
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending.append((item, future))
        if self._drainer is None or self._drainer.done():
            self._drainer = asyncio.create_task(self._drain(), name="batch-recorder")
        return await future

    async def _drain(self) -> None:
        while self._pending:
            if len(self._pending) < MAX_BATCH:
                await asyncio.sleep(self._gather)
            batch, self._pending = self._pending[:MAX_BATCH], self._pending[MAX_BATCH:]
            if self._on_batch is not None:
                self._on_batch()
            try:
                outcomes = await asyncio.to_thread(self._run, [item for item, _ in batch])
            except BaseException as exc:  # an outage (or cancellation): every caller hears of it
                for _, future in batch:
                    if not future.done():
                        future.set_exception(exc if isinstance(exc, Exception) else RuntimeError("recorder stopped"))
                if not isinstance(exc, Exception):
                    raise
                continue
            settled = [(future, outcome) for (_, future), outcome in zip(batch, outcomes, strict=True)]
            for start in range(0, len(settled), RESUME_AT_ONCE):
                if start:
                    try:
                        await asyncio.sleep(0)  # let the callers resumed so far run, and the loop read its sockets
                    except asyncio.CancelledError:
                        _settle(settled[start:])  # written: its callers hear so even if this task is stopped
                        raise
                _settle(settled[start : start + RESUME_AT_ONCE])

    def _run(self, items: list[Write]) -> list[tuple[bool, Any]]:
        try:
            return [(True, value) for value in self._write(items)]
        except Exception as exc:
            if len(items) == 1 or is_outage(exc):
                raise
        outcomes: list[tuple[bool, Any]] = []
        for item in items:  # one of them is bad: find it, keep the rest
            try:
                outcomes.append((True, self._write([item])[0]))
            except Exception as exc:  # noqa: BLE001 - handed to that caller
                if is_outage(exc):
                    raise
                outcomes.append((False, exc))
        return outcomes


def _settle(settled: Sequence[tuple[asyncio.Future[Any], tuple[bool, Any]]]) -> None:
    """Each caller's outcome of a written batch, to its future (unless the caller gave up waiting)."""
    for future, (ok, value) in settled:
        if not future.done():
            if ok:
                future.set_result(value)
            else:
                future.set_exception(value)


OUTAGE_PATIENCE = 300.0  # seconds a write waits for the database to come back before giving up


async def patiently(write: Callable[[], Any], stopping: asyncio.Event) -> Any:
    """Await ``write()``, riding out a database outage (restart, failover) for up to ``OUTAGE_PATIENCE``: what
    an attempt did must be recorded, not lost. A stopping dispatcher does not wait."""
    pause, waited = 0.25, 0.0
    while True:
        try:
            return await write()
        except Exception as exc:
            if not is_outage(exc) or waited >= OUTAGE_PATIENCE or stopping.is_set():
                raise
            log.warning("database unavailable while recording; retrying in %.1f s", pause)
            await asyncio.sleep(pause)
            waited += pause
            pause = min(pause * 2, 1.0)  # recorded within a second of the database's return
