"""The recurrence preview's work, run in a worker process (docs/reference/test-support.md#recurrence-preview).

A preview is pure CPU: reading a body of up to 64 KiB, validating a schedule of thousands of entries and
walking up to 1000 occurrences. In the server's process that work holds the GIL, so even on a worker
thread it would starve the event loop and the dispatcher (measured: health answered in 200-500 ms
while three clients previewed in a loop). It runs in a small process pool instead, at most
``--max-heavy-requests`` at once (429 beyond), each within a compute budget (400 beyond).
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import multiprocessing.connection
import os
import threading
import time
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from datetime import datetime
from typing import Any, TypeVar

from pydantic import Field

from scheduler_emulator.api import errors
from scheduler_emulator.api.context import parse_json_object, validated
from scheduler_emulator.domain import recurrence as rec
from scheduler_emulator.domain.clock import isoformat_z
from scheduler_emulator.domain.errors import FieldError
from scheduler_emulator.domain.job_rules import HORIZON
from scheduler_emulator.schemas.common import DateTime, Integer, WireModel
from scheduler_emulator.schemas.job import Recurrence, timing_of

T = TypeVar("T")
MAX_PREVIEW = 1000
PREVIEW_BUDGET_SECONDS = 1.0


class PreviewIn(WireModel):
    start_time: DateTime | None = None
    recurrence: Recurrence | None = None
    now: DateTime | None = None
    count: Integer = Field(10, ge=1, le=MAX_PREVIEW)


def compute_preview(raw: bytes, default_now: datetime) -> tuple[int, dict[str, Any]]:
    """(status, JSON body) of a preview request whose body is ``raw``; runs in a worker process, so
    errors come back as values rather than exceptions."""
    try:
        return 200, _preview(raw, default_now)
    except errors.ArmError as exc:
        return exc.status, exc.body()


def _preview(raw: bytes, default_now: datetime) -> dict[str, Any]:
    spec = validated(PreviewIn, parse_json_object(raw))
    moment = spec.now or default_now
    timing = timing_of(spec.start_time, spec.recurrence)
    try:
        horizon = moment + HORIZON
    except OverflowError:  # the 18-month window a job may look ahead must fit in years 1-9999
        raise errors.from_field_error(FieldError("now", "is less than 18 months before the end of year 9999")) from None
    if timing.start_time is not None and timing.start_time > horizon:
        raise errors.from_field_error(FieldError("startTime", "is more than 18 months in the future"))
    if timing.recurrence is not None and timing.recurrence.end_time is not None and timing.recurrence.end_time < moment:
        raise errors.from_field_error(FieldError("recurrence.endTime", "is in the past"))
    deadline = time.monotonic() + PREVIEW_BUDGET_SECONDS
    found: list[datetime] = []
    complete = True
    try:
        for occurrence in rec.occurrences(timing, moment):
            if len(found) == spec.count:
                complete = False
                break
            found.append(occurrence)
            if time.monotonic() > deadline:
                raise errors.bad_request(
                    f"The preview needs more than {PREVIEW_BUDGET_SECONDS:g} s of computation; ask for a smaller "
                    "count or a simpler schedule.",
                    "count",
                )
    except OverflowError:
        raise errors.from_field_error(FieldError("now", "leads the schedule beyond year 9999")) from None
    return {"occurrences": [isoformat_z(t) for t in found], "complete": complete}


def _start_worker() -> None:
    """Each worker: a lower CPU priority, and an exit as soon as the server process is gone. Without the
    watch, a server killed with SIGKILL leaves its workers (and their forkserver) running for ever: each
    worker holds both ends of its own call queue, so it never sees end-of-file."""
    with contextlib.suppress(OSError):  # not permitted: run at the normal priority
        os.nice(10)
    parent = multiprocessing.parent_process()
    if parent is not None:
        threading.Thread(target=_exit_with, args=(parent.sentinel,), name="parent-watch", daemon=True).start()


def _exit_with(sentinel: int) -> None:
    multiprocessing.connection.wait([sentinel])  # readable once the server process has exited
    os._exit(0)


class HeavyWork:
    """At most ``limit`` CPU-heavy requests at once, each in a worker process; the next is refused with
    429 rather than queued. The pool starts with the first such request."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.running = 0
        self._executor: ProcessPoolExecutor | None = None
        self._starting = asyncio.Lock()

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Hold one of the slots for the block; 429 ``TooManyRequests`` with ``Retry-After`` if none is free."""
        if self.running >= self.limit:
            raise errors.ArmError(
                429,
                "TooManyRequests",
                f"{self.limit} CPU-heavy requests are already being computed; retry shortly.",
                headers={"Retry-After": "1"},
            )
        self.running += 1
        try:
            yield
        finally:
            self.running -= 1

    async def run(self, work: Callable[..., T], *args: Any) -> T:
        """``work(*args)`` in a worker process (hold a ``slot`` around it)."""
        async with self._starting:
            if self._executor is None:
                # Starting the pool blocks for as long as a Python process takes to import this module:
                # it happens on a thread, never on the event loop.
                self._executor = await asyncio.to_thread(self._start)
        try:
            return await asyncio.get_running_loop().run_in_executor(self._executor, work, *args)
        except BrokenProcessPool:
            self.close()
            raise errors.service_unavailable("A worker process stopped; try again.") from None

    def _start(self) -> ProcessPoolExecutor:
        # forkserver: workers start from a clean process with this module preloaded, not as forks of a
        # process running an event loop, database pools and threads.
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload([__name__])
        # Workers run at a lower CPU priority: on a busy host the event loop and the dispatcher come first.
        executor = ProcessPoolExecutor(self.limit, mp_context=context, initializer=_start_worker)
        # Workers are spawned on demand by submit(), which runs on the event loop: spawn them all now
        # (tasks submitted together need a worker each).
        for started in [executor.submit(time.sleep, 0.05) for _ in range(self.limit)]:
            started.result()
        return executor

    def close(self) -> None:
        """Stop the worker processes."""
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None
