"""Write-behind batching of the dispatcher's small writes (attempt records, occurrence completions): what
comes in within a few milliseconds shares one transaction, so a thousand fires a second cost tens of
commits, not thousands. Items of one kind can be written together (``submit_grouped``), so that a batch
of completions is a handful of executemany statements rather than a handful per occurrence."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from sqlalchemy.exc import OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.orm import Session

from scheduler_emulator.store.database import Database

T = TypeVar("T")
Work = Callable[[Session], Any]
GroupWork = Callable[[Session, Sequence[Any]], Sequence[Any]]

GATHER_SECONDS = 0.005
MAX_BATCH = 500
_ALONE = object()


class BatchRecorder:
    """``await submit(work)`` runs ``work(session)`` in a transaction shared with other submissions and
    returns its result; ``await submit_grouped(group, item)`` hands ``item`` to one call of
    ``group(session, items)`` with the batch's other items for that ``group``. Work that fails is retried
    alone so it cannot take its neighbours down; a database outage fails the whole batch (callers retry)."""

    def __init__(self, database: Database) -> None:
        self.database = database
        self._pending: list[tuple[Any, Any, asyncio.Future[Any]]] = []
        self._drainer: asyncio.Task[None] | None = None

    async def submit(self, work: Callable[[Session], T]) -> T:
        return await self._enqueue(work, _ALONE)  # type: ignore[no-any-return]

    async def submit_grouped(self, group: GroupWork, item: Any) -> Any:
        return await self._enqueue(group, item)

    async def _enqueue(self, work: Any, item: Any) -> Any:
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending.append((work, item, future))
        if self._drainer is None or self._drainer.done():
            self._drainer = asyncio.create_task(self._drain(), name="batch-recorder")
        return await future

    async def _drain(self) -> None:
        while self._pending:
            if len(self._pending) < MAX_BATCH:
                await asyncio.sleep(GATHER_SECONDS)
            batch, self._pending = self._pending[:MAX_BATCH], self._pending[MAX_BATCH:]
            try:
                outcomes = await asyncio.to_thread(self._run, [(work, item) for work, item, _ in batch])
            except BaseException as exc:  # an outage (or cancellation): every caller hears of it
                for _, _, future in batch:
                    if not future.done():
                        future.set_exception(exc if isinstance(exc, Exception) else RuntimeError("recorder stopped"))
                if not isinstance(exc, Exception):
                    raise
                continue
            for (_, _, future), (ok, value) in zip(batch, outcomes, strict=True):
                if future.done():
                    continue
                if ok:
                    future.set_result(value)
                else:
                    future.set_exception(value)

    def _run(self, entries: list[tuple[Any, Any]]) -> list[tuple[bool, Any]]:
        try:
            with self.database.session() as session:
                return [(True, value) for value in _apply(session, entries)]
        except (OperationalError, PoolTimeout):
            raise
        except Exception:
            if len(entries) == 1:
                raise
        outcomes: list[tuple[bool, Any]] = []
        for entry in entries:  # one of them is bad: find it, keep the rest
            try:
                with self.database.session() as session:
                    outcomes.append((True, _apply(session, [entry])[0]))
            except (OperationalError, PoolTimeout):
                raise
            except Exception as exc:  # noqa: BLE001 - handed to that caller
                outcomes.append((False, exc))
        return outcomes


def _apply(session: Session, entries: list[tuple[Any, Any]]) -> list[Any]:
    """Every entry's result, in order: single work first as it came, then each group in one call."""
    results: list[Any] = [None] * len(entries)
    groups: dict[Any, list[int]] = {}
    for index, (work, item) in enumerate(entries):
        if item is _ALONE:
            results[index] = work(session)
        else:
            groups.setdefault(work, []).append(index)
    for group, indexes in groups.items():
        for index, value in zip(indexes, group(session, [entries[i][1] for i in indexes]), strict=True):
            results[index] = value
    return results
