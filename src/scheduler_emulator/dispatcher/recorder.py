"""Write-behind batching of the dispatcher's small writes (attempt records, occurrence finishes): what
comes in within a few milliseconds shares one transaction, so a thousand fires a second cost tens of
commits, not thousands."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

from sqlalchemy.exc import OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.orm import Session

from scheduler_emulator.store.database import Database

T = TypeVar("T")
Work = Callable[[Session], Any]

GATHER_SECONDS = 0.005
MAX_BATCH = 500


class BatchRecorder:
    """``await submit(work)`` runs ``work(session)`` in a transaction shared with other submissions and
    returns its result. A failing piece of work is retried alone so it cannot take its neighbours down; a
    database outage fails the whole batch (callers retry)."""

    def __init__(self, database: Database) -> None:
        self.database = database
        self._pending: list[tuple[Work, asyncio.Future[Any]]] = []
        self._drainer: asyncio.Task[None] | None = None

    async def submit(self, work: Callable[[Session], T]) -> T:
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._pending.append((work, future))
        if self._drainer is None or self._drainer.done():
            self._drainer = asyncio.create_task(self._drain(), name="batch-recorder")
        return await future

    async def _drain(self) -> None:
        while self._pending:
            if len(self._pending) < MAX_BATCH:
                await asyncio.sleep(GATHER_SECONDS)
            batch, self._pending = self._pending[:MAX_BATCH], self._pending[MAX_BATCH:]
            try:
                outcomes = await asyncio.to_thread(self._run, [work for work, _ in batch])
            except BaseException as exc:  # an outage (or cancellation): every caller hears of it
                for _, future in batch:
                    if not future.done():
                        future.set_exception(exc if isinstance(exc, Exception) else RuntimeError("recorder stopped"))
                if not isinstance(exc, Exception):
                    raise
                continue
            for (_, future), (ok, value) in zip(batch, outcomes, strict=True):
                if future.done():
                    continue
                if ok:
                    future.set_result(value)
                else:
                    future.set_exception(value)

    def _run(self, works: list[Work]) -> list[tuple[bool, Any]]:
        try:
            with self.database.session() as session:
                return [(True, work(session)) for work in works]
        except (OperationalError, PoolTimeout):
            raise
        except Exception:
            if len(works) == 1:
                raise
        outcomes: list[tuple[bool, Any]] = []
        for work in works:  # one of them is bad: find it, keep the rest
            try:
                with self.database.session() as session:
                    outcomes.append((True, work(session)))
            except (OperationalError, PoolTimeout):
                raise
            except Exception as exc:  # noqa: BLE001 - handed to that caller
                outcomes.append((False, exc))
        return outcomes
