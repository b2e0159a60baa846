"""The dispatcher on an event loop of its own, in a thread of the process that serves the API.

On one event loop with the API, each request waited for the dispatcher's turns of the loop: at 3,000 fires/s on
PostgreSQL ×1 the loop's turns lasted 17.6 ms at p99; a GET's read of a job on that loop took 24 ms at p99 (at
2,000 fires/s on a slower host; its round trip is well under a millisecond), nearly all of it waiting for the
loop to take up the answer (bench/README, issue 33, eleventh session).
On a loop of its own the dispatcher's turns no longer hold up a request: the two loops share the interpreter
lock, which a thread holds for at most the switch interval (5 ms) while another waits for it.

What crosses between the loops: the API's wake-ups (``wake``, handed to the dispatcher's loop), start and stop
(run there, awaited here). Metrics (prometheus_client) and logging are thread-safe. Not used under the virtual
clock, whose stepping runs the dispatcher's tasks from the API's loop (stepping.ClockStepper).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Awaitable, Callable
from datetime import datetime

from scheduler_emulator.dispatcher.firing import ActionSender
from scheduler_emulator.dispatcher.loop import Dispatcher

log = logging.getLogger("scheduler_emulator.dispatcher")

JOIN_SECONDS = 30.0  # the thread's end, once its loop was told to stop


def new_event_loop() -> asyncio.AbstractEventLoop:
    """uvloop's, as the API's (uvicorn's default), else asyncio's."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop comes with uvicorn[standard]
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


class DispatcherThread:
    """A dispatcher and its action sender, built by ``build`` and run on their own loop in a thread."""

    def __init__(self, build: Callable[[], Awaitable[tuple[Dispatcher, ActionSender]]]) -> None:
        self._build = build
        self._loop = new_event_loop()
        self._thread = threading.Thread(target=self._run, name="dispatcher-loop", daemon=True)
        self._dispatcher: Dispatcher | None = None
        self._actions: ActionSender | None = None

    @property
    def dispatcher(self) -> Dispatcher:
        assert self._dispatcher is not None, "started"
        return self._dispatcher

    async def start(self) -> None:
        """Start the thread, build the dispatcher on its loop and start it there; a failure to build is raised
        here (and the thread ended)."""
        self._thread.start()
        try:
            await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(self._start(), self._loop))
        except BaseException:
            await self._end_thread()
            raise

    def wake(self, not_before: datetime | None = None) -> None:
        """Dispatcher.wake, on the dispatcher's loop (callable from any thread)."""
        if self._dispatcher is not None:
            with contextlib.suppress(RuntimeError):  # its loop has closed (the app is stopping): nothing to wake
                self._loop.call_soon_threadsafe(self._dispatcher.wake, not_before)

    async def stop(self, grace: float = 0.0) -> None:
        """Dispatcher.stop(grace) and the action sender's close, on the dispatcher's loop; then the thread ends."""
        try:
            await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(self._stop(grace), self._loop))
        finally:
            await self._end_thread()

    async def _start(self) -> None:
        self._dispatcher, self._actions = await self._build()
        self._dispatcher.start()

    async def _stop(self, grace: float) -> None:
        try:
            if self._dispatcher is not None:
                await self._dispatcher.stop(grace)
        finally:
            if self._actions is not None:
                await self._actions.close()

    async def _end_thread(self) -> None:
        if self._loop.is_closed():
            return
        self._loop.call_soon_threadsafe(self._loop.stop)
        await asyncio.to_thread(self._thread.join, JOIN_SECONDS)
        if self._thread.is_alive():
            log.warning("the dispatcher's thread did not end within %.0f s", JOIN_SECONDS)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_forever()
            leftover = [task for task in asyncio.all_tasks(self._loop) if not task.done()]
            for task in leftover:
                task.cancel()
            if leftover:
                self._loop.run_until_complete(asyncio.gather(*leftover, return_exceptions=True))
            with contextlib.suppress(Exception):
                self._loop.run_until_complete(self._loop.shutdown_asyncgens())
                self._loop.run_until_complete(self._loop.shutdown_default_executor())
        finally:
            self._loop.close()
