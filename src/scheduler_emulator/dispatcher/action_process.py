"""The action process: a second process of the emulator's own that sends its actions, so that the requests to the
targets (aiohttp's work, about half a fire's CPU) run on another core than the dispatcher and the API.

One interpreter runs one thread of Python at a time. At 3,000 fires/s on 2 cores the process that serves the API,
claims, records and also sends every request needed more than a core (0.37-0.49 ms of CPU per fire, bench/README),
and fell behind. ``serve`` forks the action process before the service starts a thread (``ActionProcess.fork``);
the dispatcher hands each attempt over a socket pair to it (``RemoteActions``, the same interface as
``firing.Actions``) and awaits its outcome. The action process runs ``firing.Actions`` itself: every action type,
the outbound policy, timeouts, client certificates, tokens, and the scrubbing of the job's secrets from what an
attempt reports. What it answers is recorded by the dispatcher as before.

The messages are ``marshal`` tuples over a socket pair between the process and its own fork (nothing else can
reach it). An attempt goes as its action's JSON and its context (with the time before which it must not go out:
loop.HAND_OFF_LEAD); the answer is its outcome (and when it went out, if it was held). When the action
process ends (a crash, a kill), the attempts it had in flight fail with a message that says so (their retry
policies apply) and the dispatcher sends every later attempt from its own process. The action process ignores
SIGINT and SIGTERM (a terminal's Ctrl-C reaches the whole process group; the service decides when attempts stop)
and ends when the socket closes, at the service's shutdown; if the service's process is killed, the kernel kills
the action process with it (Linux), so that nothing it held is sent for a process that cannot record it."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import logging
import marshal
import os
import signal
import socket
import struct
import sys
import threading
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from scheduler_emulator.config import Settings
from scheduler_emulator.dispatcher.actions import FireContext, Outcome
from scheduler_emulator.dispatcher.firing import Actions, Deferred, hold_until
from scheduler_emulator.schemas.job import ActionBase

log = logging.getLogger("scheduler_emulator.dispatcher")

_LENGTH = struct.Struct("!I")
EXIT_WAIT_SECONDS = 5.0  # how long close() waits for the action process to end before killing it
# Seconds beyond the action timeout that an attempt may go unanswered before it fails (a token fetch, redirects
# and the answer's way back all fit well within it).
ACTION_ANSWER_MARGIN = 30.0
READY_WAIT_SECONDS = 10.0  # how long fork() waits for the action process to be set to end with its parent
READY = b"R"  # the action process's first byte on the socket pair: it will end with its parent


def wanted(settings: Settings) -> bool:
    """Whether this service's actions should run in an action process: it has a dispatcher, and
    ``--action-process`` is ``on``, or ``auto`` on a machine that gives this process two CPUs or more."""
    if not settings.dispatcher or settings.action_process == "off":
        return False
    if settings.action_process == "on":
        return True
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return cpus >= 2


class Frames(asyncio.Protocol):
    """Length-prefixed messages both ways over the socket pair, in ``marshal``'s format (tuples of strings,
    numbers and booleans: both ends are the same interpreter; it costs a fraction of pickle's). ``on_message``
    gets each message in order, ``on_lost`` the end of the connection. What is sent in one turn of the event
    loop goes out in one write (a burst of fires due together: one system call, not one each)."""

    def __init__(self, on_message: Callable[[Any], None], on_lost: Callable[[Exception | None], None]) -> None:
        self.on_message = on_message
        self.on_lost = on_lost
        self.transport: asyncio.Transport | None = None
        self._buffer = bytearray()
        self._outgoing: list[bytes] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def send(self, message: tuple[Any, ...]) -> None:
        if self.transport is None or self.transport.is_closing():
            raise ConnectionError("the action process's socket is closed")
        payload = marshal.dumps(message)
        if not self._outgoing:
            asyncio.get_running_loop().call_soon(self._flush)
        self._outgoing += (_LENGTH.pack(len(payload)), payload)

    def _flush(self) -> None:
        outgoing, self._outgoing = self._outgoing, []
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(b"".join(outgoing))

    def data_received(self, data: bytes) -> None:
        buffer = self._buffer
        buffer += data
        start, size = 0, len(buffer)
        while size - start >= 4:
            (length,) = _LENGTH.unpack_from(buffer, start)
            end = start + 4 + length
            if end > size:
                break
            message = marshal.loads(buffer[start + 4 : end])
            start = end
            self.on_message(message)
        del buffer[:start]

    def connection_lost(self, exc: Exception | None) -> None:
        self.on_lost(exc)


def fork_child(run: Callable[[socket.socket, int], int], what: str) -> tuple[int, socket.socket | None] | None:
    """Fork a child of the emulator's own that runs ``run(its end of a socket pair, this process's pid)`` and
    ends with its exit status; ``run`` must first ask to end with this process (``die_with``) and then send
    ``READY``. None (nothing forked) when a thread is already running, whose locks the child would inherit
    held. (pid, None) when the child did not say READY within READY_WAIT_SECONDS: it was killed and collected
    (a byte arriving later would break the framing). ``what`` names the child in errors."""
    if not hasattr(os, "fork") or threading.active_count() != 1:
        return None
    for stream in (sys.stdout, sys.stderr):  # nothing buffered that both processes would write out
        stream.flush()
    parent_end, child_end = socket.socketpair()
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:  # the child: never returns into the caller
        code = 70
        try:
            parent_end.close()
            code = run(child_end, parent)
        except BaseException:  # noqa: BLE001 - the child must end here, whatever happened
            log.exception("%s failed", what)
            code = 1
        finally:
            os._exit(code)
    child_end.close()
    # Not before the child has asked the kernel to kill it with this process (die_with): killed before
    # that, this process would leave it running (the suite saw it under load, where the child had not yet
    # run so far when the service was up and killed). A few milliseconds at start-up.
    parent_end.settimeout(READY_WAIT_SECONDS)
    try:
        ready = parent_end.recv(1) == READY
    except OSError:
        ready = False
    parent_end.settimeout(None)
    if not ready:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
        parent_end.close()
        return pid, None
    return pid, parent_end


class ForkedChild:
    """A child fork_child forked, as its parent knows it: its pid and the parent's end of the socket pair."""

    def __init__(self, pid: int, sock: socket.socket) -> None:
        self.pid = pid
        self.sock = sock
        self.exit_status: int | None = None  # os.waitpid's status once reaped

    def reap(self, block: bool = False) -> bool:
        """Collect the ended child's status; True once it has been collected."""
        if self.exit_status is not None:
            return True
        try:
            pid, status = os.waitpid(self.pid, 0 if block else os.WNOHANG)
        except ChildProcessError:  # collected elsewhere
            self.exit_status = -1
            return True
        if pid == 0:
            return False
        self.exit_status = status
        return True

    async def end_within(self, seconds: float) -> bool:
        """Wait up to ``seconds`` for the child to end (it has been told to); kill it if it has not. True when it
        ended by itself."""
        for _ in range(int(seconds / 0.02)):
            if self.reap():
                return True
            await asyncio.sleep(0.02)
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        await asyncio.to_thread(self.reap, True)
        return False


class ActionProcess(ForkedChild):
    """The forked action process as its parent knows it."""

    @classmethod
    def fork(cls, settings: Settings) -> ActionProcess | None:
        """Fork the action process (None, and actions run in this process, when it cannot be forked safely:
        a thread is already running, whose locks the child would inherit held; or when the child does not say
        within READY_WAIT_SECONDS that it will end with this process)."""
        forked = fork_child(lambda sock, parent: _run_child(sock, settings, parent), "the action process")
        if forked is None:
            return None
        pid, sock = forked
        if sock is None:
            log.warning(
                "the action process (pid %d) did not start within %g s; actions are sent from this process",
                pid,
                READY_WAIT_SECONDS,
            )
            return None
        return cls(pid, sock)

    async def stop(self) -> None:
        """Wait (bounded) for the child to end once its socket is closed; kill it if it does not."""
        self.sock.close()
        await self.end_within(EXIT_WAIT_SECONDS)


class RemoteActions:
    """``firing.Actions``'s interface, carried out by the action process; by ``local`` (the same, in this
    process) once the action process has ended. ``up`` is told 1 or 0 as it starts and ends. An attempt the
    action process has not answered after ``patience`` seconds (its action timeout bounds it there; a process
    stopped by a signal would never answer) fails, so that no occurrence waits for ever."""

    def __init__(
        self,
        process: ActionProcess,
        local: Actions,
        up: Callable[[float], None] | None = None,
        patience: float = 90.0,
    ) -> None:
        self.process = process
        self.local = local
        self.patience = patience
        self._up = up or (lambda value: None)
        self._frames: Frames | None = None
        # By attempt number, so oldest first: (its future, its action type, when it was sent on the loop's clock).
        self._pending: dict[int, tuple[asyncio.Future[tuple[bool | None, str, float | None]], str, float]] = {}
        self._ids = itertools.count()
        self._closing = False
        self._watchdog: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Connect to the action process (on the running loop)."""
        frames = Frames(self._answered, self._lost)
        await asyncio.get_running_loop().create_unix_connection(lambda: frames, sock=self.process.sock)
        self._frames = frames
        self._watchdog = asyncio.create_task(self._watch(), name="action-process-watchdog")
        self._up(1)
        log.info("actions are sent from the action process (pid %d)", self.process.pid)

    async def execute(self, action: ActionBase, context: FireContext) -> Outcome:
        frames = self._frames
        if frames is None:
            return await self.local.execute(action, context)
        number = next(self._ids)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[tuple[bool | None, str, float | None]] = loop.create_future()
        # Held attempts (context.not_before) wait there before they go: the patience counts from their time.
        held = max(0.0, context.not_before - time.time()) if context.not_before is not None else 0.0
        self._pending[number] = (future, action.type, loop.time() + held)
        try:
            try:
                frames.send(attempt_message(number, action, context))
            except ConnectionError:  # closing: the action process is ending (_lost follows)
                return await self.local.execute(action, context)
            succeeded, message, started = await future
        finally:
            self._pending.pop(number, None)
        if succeeded is None:  # held, and not sent: this process was stopped when it fell due
            raise Deferred
        return Outcome(succeeded, message, started)

    def _answered(self, message: tuple[int, bool | None, str, float | None]) -> None:
        number, succeeded, text, started = message
        waiting = self._pending.get(number)
        if waiting is not None and not waiting[0].done():
            waiting[0].set_result((succeeded, text, started))

    async def _watch(self) -> None:
        """Fail the attempts the action process has not answered within ``patience``, every few seconds."""
        loop = asyncio.get_running_loop()
        while self._frames is not None:
            await asyncio.sleep(min(5.0, self.patience / 4))
            cutoff = loop.time() - self.patience
            for future, action_type, sent in list(self._pending.values()):
                if sent > cutoff:
                    break
                if not future.done():
                    why = f"the emulator's action process did not answer within {self.patience:g} s"
                    future.set_result((False, f"{action_type} Action - the outcome is unknown: {why}", None))

    def _reap_soon(self, tries: int = 100) -> None:
        """Collect the ended action process: its socket may close a moment before it can be collected."""
        if not self.process.reap() and tries > 0:
            asyncio.get_running_loop().call_later(0.1, self._reap_soon, tries - 1)

    def _lost(self, exc: Exception | None) -> None:
        self._frames = None
        self._up(0)
        if not self._closing:
            self._reap_soon()
            log.error(
                "the action process (pid %d) ended unexpectedly; the %d attempts it had in flight count as failed, "
                "and this process sends the actions from now on",
                self.process.pid,
                len(self._pending),
            )
        for future, action_type, _ in self._pending.values():
            if not future.done():
                future.set_result(
                    (False, f"{action_type} Action - the outcome is unknown: the emulator's action process ended", None)
                )

    async def close(self) -> None:
        self._closing = True
        if self._watchdog is not None:
            self._watchdog.cancel()
        if self._frames is not None and self._frames.transport is not None:
            self._frames.transport.close()
        await self.process.stop()
        await self.local.close()


def attempt_message(number: int, action: ActionBase, context: FireContext) -> tuple[Any, ...]:
    """An attempt as sent: its number, the action's JSON (its error action left out: the action process sends
    the action it is given) and the context's fields; ``_Child._attempt`` takes them in this order."""
    return (
        number,
        action.model_dump_json(by_alias=True, exclude_unset=True, exclude={"error_action"}),
        context.execution_tag,
        context.client_request_id,
        context.expected_time.isoformat(),
        context.job_name,
        context.collection_name,
        context.region,
        context.not_before,
    )


def context_of(fields: tuple[Any, ...]) -> FireContext:
    """The context from the fields ``attempt_message`` sent (the expected time as ISO 8601)."""
    tag, request_id, expected_time, job_name, collection_name, region, not_before = fields
    return FireContext(
        tag, request_id, datetime.fromisoformat(expected_time), job_name, collection_name, region, not_before
    )


class _Child:
    """The action process's side: runs each attempt it is sent on ``actions`` and answers with its outcome.
    ``parent``: the pid of the emulator's process (default: this process's parent); once that process is gone,
    nothing more is sent."""

    def __init__(self, actions: Actions, parent: int | None = None, own_parent: Callable[[], int] = os.getppid) -> None:
        """``own_parent``: how this process reads its parent's pid (a test stands another process in for it)."""
        self.actions = actions
        self.own_parent = own_parent
        self.parent = own_parent() if parent is None else parent
        self.frames = Frames(self._received, self._lost)
        self.running: set[asyncio.Task[None]] = set()
        self.ended = asyncio.Event()

    def _received(self, message: tuple[Any, ...]) -> None:
        task = asyncio.get_running_loop().create_task(self._attempt(*message))
        self.running.add(task)
        task.add_done_callback(self.running.discard)

    async def _attempt(self, number: int, action_json: str, *context_fields: Any) -> None:
        context = context_of(context_fields)
        try:
            action = ActionBase.model_validate_json(action_json)
        except ValidationError as exc:  # a definition the dispatcher read must read here too: a bug if not
            # Where, not what: the values may hold the job's secrets.
            where = ", ".join(".".join(map(str, error["loc"])) for error in exc.errors(include_input=False))
            log.error("the action process could not read an action (at %s)", where)
            outcome = Outcome(False, "Action - the emulator's action process could not read the action")
        else:
            started = None
            if context.not_before is not None:  # held here rather than in the actions: see below
                await hold_until(context.not_before)
                started = time.time()
                context = dataclasses.replace(context, not_before=None)
            # The emulator's process was killed (its socket's end may not have reached this loop yet): it
            # cannot record this attempt, and another dispatcher takes its occurrences over. Sent from here
            # now, an attempt held until its time would reach its target after its dispatcher was gone.
            if self.own_parent() != self.parent:
                return
            # The emulator's process is stopped (SIGSTOP; not a paused VM or container, which stops this one
            # too): it could not record the attempt, and its leases may run out meanwhile, to be taken over. The
            # attempt goes back unsent; the dispatcher decides when it runs again (firing.Deferred).
            if started is not None and _stopped(self.parent):
                with contextlib.suppress(ConnectionError):
                    self.frames.send((number, None, "", None))
                return
            outcome = await self.actions.execute(action, context)
            if started is not None:
                outcome = dataclasses.replace(outcome, started=started)
        with contextlib.suppress(ConnectionError):
            self.frames.send((number, outcome.succeeded, outcome.message, outcome.started))

    def _lost(self, exc: Exception | None) -> None:
        for task in self.running:
            task.cancel()
        self.ended.set()

    async def serve(self, sock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        await loop.create_unix_connection(lambda: self.frames, sock=sock)
        try:
            await self.ended.wait()
            await asyncio.gather(*self.running, return_exceptions=True)
        finally:
            await self.actions.close()


def _stopped(pid: int) -> bool:
    """Whether process ``pid`` is stopped by a signal (its state in /proc: T), as far as can be told."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rpartition(b") ")[2][:1] in (b"T", b"t")
    except OSError:
        return False


_PR_SET_PDEATHSIG = 1  # prctl's option: the signal this process gets when its parent ends


def die_with(parent: int) -> bool:
    """Have the kernel kill this process when its parent (``parent``, the emulator's process) ends; False if the
    parent has already gone. Without it, an attempt this process had started or held, checked just before the
    parent was killed, would still reach its target after the parent was gone (the suite saw one 11 ms after a
    kill -9): a request no dispatcher records, that the one taking the occurrence over sends again. Linux only
    (prctl PR_SET_PDEATHSIG); elsewhere the check before each send (_Child) is what remains."""
    if sys.platform.startswith("linux"):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            log.warning("pid %d could not ask to end with its parent (errno %d)", os.getpid(), ctypes.get_errno())
    return os.getppid() == parent  # after the prctl: a parent that ended before it is seen here


def _run_child(sock: socket.socket, settings: Settings, parent: int) -> int:
    """The action process's life, from the fork to its end (its exit status)."""
    from scheduler_emulator.collector import tune_garbage_collector
    from scheduler_emulator.logs import configure_logging, stop_background_logging

    for number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(number, signal.SIG_IGN)
    # First: the handlers inherited from the parent write through its log-writer thread, not in this fork.
    configure_logging(settings.log_level, settings.log_format)
    if not die_with(parent):
        stop_background_logging()
        return 0
    sock.sendall(READY)  # the parent waits for it (ActionProcess.fork)
    # As the server's process does once built: at the default thresholds, the attempts waiting here when the
    # targets fall behind (thousands of tasks) were walked by a collection every 700 allocations.
    tune_garbage_collector()
    try:
        try:
            import uvloop

            loop_factory: Callable[[], asyncio.AbstractEventLoop] | None = uvloop.new_event_loop
        except ImportError:  # pragma: no cover - uvloop is a dependency of uvicorn[standard]
            loop_factory = None
        with asyncio.Runner(loop_factory=loop_factory) as runner:
            runner.run(_Child(Actions(settings), parent).serve(sock))
        return 0
    except BaseException:  # noqa: BLE001 - the child must end here, whatever happened
        log.exception("the action process failed")
        return 1
    finally:
        stop_background_logging()
