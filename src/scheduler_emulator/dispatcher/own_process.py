"""The dispatcher in a process of its own, forked by the service's process, which then only serves the API.

On PostgreSQL ×1 at 3,000 fires/s the dispatcher (claiming, handing attempts to the action process, recording,
logging: most of a core) and the API shared one interpreter, whose lock a thread holds for up to 5 ms while
another waits: a GET of a job, a fraction of a millisecond of work, took 29-38 ms at p99 with the dispatcher on
a loop and a thread of its own (dispatcher.own_loop), 15.8 ms with the API in a process of its own
(bench/README, issue 33). On a SQLite file likewise: 16-30 ms, the read itself waiting for the lock after each
step of the statement. Here the kernel shares the two cores between the processes instead.

``DispatcherProcess.fork`` forks it at start-up (dispatcher.action_process.fork_child: before any thread, ended
with its parent by the kernel). It waits there for the service to have migrated the store, then forks its own
action process, builds a Dispatcher over a Database of its own and runs it; the API's process keeps the one
Database it serves from. Between the two, over a socket pair (action_process.Frames, marshal tuples):

- the API's wake-ups (a job made due soon: Dispatcher.wake; on PostgreSQL a NOTIFY says it too);
- ``GET /metrics``: the dispatcher's metrics come from its process (Metrics.DISPATCHER_FAMILIES), the rest
  from the API's;
- start (answered once the dispatcher runs, or with why it could not be built) and stop (with the grace).

Only with a store on disk, which processes share as peers (PostgreSQL: LISTEN/NOTIFY and the leased claims of
several dispatchers; a SQLite file: one writer at a time among processes too, store.database.WriteTurn), and
with the wall clock (the virtual clock's stepping runs the dispatcher from the API's loop). If the process
cannot start, or ends (a crash, a kill), the service logs it and runs the dispatcher itself from then on, on
a loop of its own (own_loop.DispatcherThread, built by ``fallback``): occurrences the ended process had claimed
are taken over when its leases run out (``--lease-seconds``).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import marshal
import os
import signal
import socket
from collections.abc import Callable
from datetime import datetime
from typing import Any

from scheduler_emulator.config import Settings
from scheduler_emulator.dispatcher.action_process import (
    READY,
    ActionProcess,
    ForkedChild,
    Frames,
    die_with,
    fork_child,
)
from scheduler_emulator.dispatcher.action_process import wanted as action_process_wanted
from scheduler_emulator.dispatcher.firing import ActionSender
from scheduler_emulator.dispatcher.loop import Dispatcher
from scheduler_emulator.dispatcher.own_loop import DispatcherThread, new_event_loop
from scheduler_emulator.faults import pause_point
from scheduler_emulator.metrics import Metrics

log = logging.getLogger("scheduler_emulator.dispatcher")

START_SECONDS = 60.0  # how long the service waits for the dispatcher's process to say it runs
METRICS_SECONDS = 5.0  # how long GET /metrics waits for the dispatcher's process's metrics
STOP_MARGIN_SECONDS = 30.0  # beyond the shutdown grace, before a dispatcher's process that has not ended is killed
_LENGTH_BYTES = 4
IN_MEMORY = ("sqlite://", "sqlite:///:memory:")  # one process's store: its dispatcher runs there


def wanted(settings: Settings) -> bool:
    """Whether ``serve`` should fork the dispatcher's process: this process would run both the API and a
    dispatcher, with the wall clock and a store on disk (PostgreSQL or a SQLite file); ``--dispatcher-process``
    is ``on``, or ``auto`` on a machine that gives this process two CPUs or more."""
    if not (settings.api and settings.dispatcher) or settings.dispatcher_process == "off":
        return False
    if settings.clock == "virtual" or settings.in_memory or settings.store.url in IN_MEMORY:
        return False
    if settings.dispatcher_process == "on":
        return True
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return cpus >= 2


class DispatcherFailed(RuntimeError):
    """The dispatcher's process could not build or start its dispatcher (the message says why)."""


class DispatcherProcess(ForkedChild):
    """The forked dispatcher's process as the service's process knows it; ``wake`` and ``stop`` as a
    Dispatcher's, and the dispatcher's metrics on request. Once the process has ended (or never started), the
    dispatcher runs in this process (``fallback`` builds it)."""

    def __init__(self, pid: int, sock: socket.socket) -> None:
        super().__init__(pid, sock)
        self._frames: Frames | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._answers: dict[int, asyncio.Future[Any]] = {}
        self._ids = itertools.count(1)
        self._closing = False
        self._started = False  # it said its dispatcher runs
        self._fallback: Callable[[], DispatcherThread] | None = None
        self._here: DispatcherThread | None = None  # the dispatcher run in this process instead
        self._taking_over: asyncio.Task[None] | None = None

    @classmethod
    def fork(cls, settings: Settings) -> DispatcherProcess | None:
        """Fork the dispatcher's process (None when it cannot be: see fork_child; the dispatcher then runs in
        this process)."""
        forked = fork_child(lambda sock, parent: _run_child(sock, settings, parent), "the dispatcher's process")
        if forked is None:
            return None
        pid, sock = forked
        if sock is None:
            log.warning("the dispatcher's process (pid %d) did not start; the dispatcher runs in this process", pid)
            return None
        return cls(pid, sock)

    @property
    def running_apart(self) -> bool:
        """The dispatcher runs in the forked process (not yet, or no longer: False)."""
        return self._frames is not None and self._here is None

    async def start(self, fallback: Callable[[], DispatcherThread]) -> None:
        """Have the process build and start its dispatcher (the store is migrated); once it says it runs,
        return. If it cannot, end it and run the dispatcher here (built by ``fallback``)."""
        self._fallback = fallback
        self._loop = loop = asyncio.get_running_loop()
        frames = Frames(self._received, self._lost)
        await loop.create_unix_connection(lambda: frames, sock=self.sock)
        self._frames = frames
        started = self._ask(("start",))
        try:
            answer = await asyncio.wait_for(started, START_SECONDS)
            if answer[0] != "ready":
                raise DispatcherFailed(answer[1])
        except (DispatcherFailed, TimeoutError, ConnectionError) as exc:
            why = str(exc) or f"it did not start within {START_SECONDS:g} s"
            log.error(
                "the dispatcher's process (pid %d) failed: %s; the dispatcher runs in this process", self.pid, why
            )
            self._closing = True  # its end is expected from here on: no take-over (_lost)
            await self._end_process(0.0)
            await self._run_here()
            return
        self._started = True
        log.info("the dispatcher runs in a process of its own (pid %d)", self.pid)

    def wake(self, not_before: datetime | None = None) -> None:
        """Dispatcher.wake in the dispatcher's process (or here); callable from any thread."""
        if self._here is not None:
            self._here.wake(not_before)
            return
        loop = self._loop
        if loop is None:
            return
        message = ("wake", None if not_before is None else not_before.isoformat())
        with contextlib.suppress(RuntimeError):  # the loop has closed: the service is stopping
            loop.call_soon_threadsafe(self._send, message)

    async def metrics(self) -> bytes | None:
        """The dispatcher's metrics (Prometheus text, Metrics.DISPATCHER_FAMILIES), from its process; None when
        it does not answer within METRICS_SECONDS."""
        try:
            answer = await asyncio.wait_for(self._ask(("metrics",)), METRICS_SECONDS)
        except (TimeoutError, ConnectionError):
            return None
        text: bytes = answer[1]
        return text

    async def stop(self, grace: float) -> None:
        """Dispatcher.stop(grace) where the dispatcher runs; the process ends (killed if it has not within the
        grace and STOP_MARGIN_SECONDS)."""
        self._closing = True
        if self._taking_over is not None:
            await asyncio.gather(self._taking_over, return_exceptions=True)
        if self._here is not None:
            await self._here.stop(grace)
        await self._end_process(grace)

    def _send(self, message: tuple[Any, ...]) -> None:
        if self._frames is not None:
            with contextlib.suppress(ConnectionError):
                self._frames.send(message)

    def _ask(self, message: tuple[Any, ...]) -> asyncio.Future[Any]:
        """Send ``message`` with a number; the future gets the answer that carries it back."""
        assert self._loop is not None and self._frames is not None
        number = next(self._ids)
        future: asyncio.Future[Any] = self._loop.create_future()
        self._answers[number] = future
        future.add_done_callback(lambda _: self._answers.pop(number, None))
        try:
            self._frames.send((*message, number))
        except ConnectionError as exc:
            future.set_exception(exc)
        return future

    def _received(self, message: tuple[Any, ...]) -> None:
        future = self._answers.get(message[-1])
        if future is not None and not future.done():
            future.set_result(message[:-1])

    def _lost(self, exc: Exception | None) -> None:
        self._frames = None
        for future in list(self._answers.values()):
            if not future.done():
                future.set_exception(ConnectionError("the dispatcher's process ended"))
        if self._closing or not self._started or self._here is not None:  # (not started: start() sees it)
            return
        log.error(
            "the dispatcher's process (pid %d) ended unexpectedly; the dispatcher runs in this process from now on "
            "(what it had claimed is taken over once its leases run out)",
            self.pid,
        )
        assert self._loop is not None  # set by start()
        self._taking_over = self._loop.create_task(self._take_over(), name="dispatcher-take-over")

    async def _take_over(self) -> None:
        await self._end_process(0.0)
        await self._run_here()

    async def _run_here(self) -> None:
        assert self._fallback is not None
        here = self._fallback()
        await here.start()
        self._here = here

    async def _end_process(self, grace: float) -> None:
        """Ask the process to stop its dispatcher (with ``grace``) and wait, bounded, for it to end; kill it
        if it does not."""
        if self._frames is not None:
            with contextlib.suppress(ConnectionError):
                self._frames.send(("stop", grace, 0))
        if not await self.end_within(grace + STOP_MARGIN_SECONDS):
            log.warning("the dispatcher's process (pid %d) did not end in time and was killed", self.pid)
        if self._frames is not None and self._frames.transport is not None:
            self._frames.transport.close()
        self.sock.close()


def _read_message(sock: socket.socket) -> tuple[Any, ...] | None:
    """One framed message (Frames' format) read from ``sock`` as it blocks; None at its end."""

    def exactly(count: int) -> bytes | None:
        data = b""
        while len(data) < count:
            chunk = sock.recv(count - len(data))
            if not chunk:
                return None
            data += chunk
        return data

    head = exactly(_LENGTH_BYTES)
    if head is None:
        return None
    body = exactly(int.from_bytes(head, "big"))
    return None if body is None else marshal.loads(body)


class _Child:
    """The dispatcher's process's side: builds and runs the dispatcher, answers the service's messages."""

    def __init__(self, settings: Settings, action_process: ActionProcess | None, start_number: int) -> None:
        self.settings = settings
        self.action_process = action_process
        self.start_number = start_number
        self.metrics = Metrics()
        self.frames = Frames(self._received, self._lost)
        self.dispatcher: Dispatcher | None = None
        self.stopping: asyncio.Future[float] | None = None

    def _received(self, message: tuple[Any, ...]) -> None:
        kind, number = message[0], message[-1]
        if kind == "wake":
            if self.dispatcher is not None:
                self.dispatcher.wake(None if message[1] is None else datetime.fromisoformat(message[1]))
        elif kind == "metrics":
            with contextlib.suppress(ConnectionError):
                self.frames.send(("metrics", self.metrics.render(dispatcher=True), number))
        elif kind == "stop" and self.stopping is not None and not self.stopping.done():
            self.stopping.set_result(float(message[1]))

    def _lost(self, exc: Exception | None) -> None:  # the service's process closed its end: stop now
        if self.stopping is not None and not self.stopping.done():
            self.stopping.set_result(0.0)

    async def serve(self, sock: socket.socket) -> int:
        from scheduler_emulator.app import build_dispatcher, connection_bounds
        from scheduler_emulator.at_rest import secret_key
        from scheduler_emulator.domain.clock import WallClock
        from scheduler_emulator.store.database import Database
        from scheduler_emulator.store.secrets import SecretBox

        loop = asyncio.get_running_loop()
        self.stopping = loop.create_future()
        await loop.create_unix_connection(lambda: self.frames, sock=sock)
        settings = self.settings
        database: Database | None = None
        actions: ActionSender | None = None
        try:
            box = SecretBox(secret_key(settings.store))
            database = Database(settings.store.url, box, connection_bounds(settings))
            self.dispatcher, actions = await build_dispatcher(
                settings, database, WallClock(), self.metrics, self.action_process
            )
            self.dispatcher.start()
        except Exception as exc:  # noqa: BLE001 - said to the service, which runs the dispatcher itself
            log.exception("the dispatcher's process could not start its dispatcher")
            with contextlib.suppress(ConnectionError):
                self.frames.send(("failed", f"{type(exc).__name__}: {exc}".splitlines()[0][:500], self.start_number))
            if actions is not None:
                await actions.close()
            if database is not None:
                database.dispose()
            return 1
        self.frames.send(("ready", self.start_number))
        grace = await self.stopping
        try:
            await self.dispatcher.stop(grace)
        finally:
            await actions.close()
            database.dispose()
        return 0


def _run_child(sock: socket.socket, settings: Settings, parent: int) -> int:
    """The dispatcher's process's life, from the fork to its end (its exit status)."""
    from scheduler_emulator.collector import tune_garbage_collector
    from scheduler_emulator.logs import configure_logging, stop_background_logging

    for number in (signal.SIGINT, signal.SIGTERM):  # the service decides when the dispatcher stops
        signal.signal(number, signal.SIG_IGN)
    if not die_with(parent):
        return 0
    sock.sendall(READY)  # the parent waits for it (fork_child)
    start = _read_message(sock)  # once the service has migrated the store
    if start is None or start[0] != "start":
        return 0
    pause_point("dispatcher-process-start")
    # Before any thread starts here (the log writer's): see ActionProcess.fork.
    action_process = ActionProcess.fork(settings) if action_process_wanted(settings) else None
    configure_logging(settings.log_level, settings.log_format)
    tune_garbage_collector()
    try:
        with asyncio.Runner(loop_factory=new_event_loop) as runner:
            return runner.run(_Child(settings, action_process, start[-1]).serve(sock))
    finally:
        stop_background_logging()
