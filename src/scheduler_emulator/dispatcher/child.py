"""The dispatcher role in a child process that ``serve`` supervises, so that one command uses two cores: this
process serves the API, the child dispatches (dispatcher/role.py), and the two meet only in the store.

The child is the same program with the same flags, plus the role's (``ROLE_FLAGS``), started as an ordinary
child (subprocess.Popen) with this process's environment. What crosses between the two, all of it the standard
library's or the store's:

- wake-ups: through the store (store/wakeups.py: NOTIFY on PostgreSQL; on a SQLite file the change counted in a row
  that the child watches), so ``wake`` has nothing to do here;
- metrics: the child keeps its values in prometheus_client's multiprocess files in a directory of this process's
  (``PROMETHEUS_MULTIPROC_DIR``), which ``metrics`` reads (metrics.dispatcher_part);
- its start: ``spawned`` starts it as soon as this process has found everything a start can fail on (the port,
  the data directory, the store migrated: serving.prepare), so that the child's interpreter imports the service
  while this one imports and builds the API; ``start`` (the app's lifespan) then waits for it: this process serves
  once the child has begun dispatching (its first cycle, in its metrics);
- its end: SIGTERM at this process's stop (the child stops its dispatcher within the grace), SIGKILL if it has
  not ended STOP_MARGIN_SECONDS later; and if this process dies, the pipe on the child's standard input closes
  with it and the child stops by itself (dispatcher/role.py);
- the metrics directory: removed by ``end``, which this process runs as it exits, however its server ended (the
  child removes it instead when this process is gone: dispatcher/role.py).

A child that ends unexpectedly is started again, after a pause that doubles from RESTART_FIRST_SECONDS up to
RESTART_MOST_SECONDS (back to the first after STEADY_SECONDS of running); what it had claimed is taken over by
its successor once the leases run out (``--lease-seconds``)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import datetime

from prometheus_client.multiprocess import mark_process_dead

from scheduler_emulator.config import usable_cpus
from scheduler_emulator.config_groups import DispatchSettings, RoleSettings, StoreSettings
from scheduler_emulator.metrics import Metrics, cycles_counted, dispatcher_part

log = logging.getLogger("scheduler_emulator.dispatcher")

ROLE_FLAGS = ("--no-api", "--supervised")  # the child's role; the last of a flag given twice wins
START_SECONDS = 60.0  # how long the service waits, before it serves, for its child's first look for due work
STOP_MARGIN_SECONDS = 30.0  # beyond the shutdown grace, before a child that has not ended is killed
WATCH_SECONDS = 0.25  # between two looks at whether the child still runs
RESTART_FIRST_SECONDS = 0.5
RESTART_MOST_SECONDS = 30.0
STEADY_SECONDS = 60.0  # a child that ran this long is restarted after the first pause again
IN_MEMORY = ("sqlite://", "sqlite:///:memory:")  # one process's store: its dispatcher runs there


def wanted(roles: RoleSettings, store: StoreSettings, dispatch: DispatchSettings) -> bool:
    """Whether ``serve`` should run the dispatcher role in a child: this process would run both roles, with the
    wall clock and a store on disk (PostgreSQL or a SQLite file); ``--dispatcher-process`` is ``on``, or
    ``auto`` on a machine that gives this process two CPUs or more (config.usable_cpus)."""
    if not (roles.api and roles.dispatcher) or roles.dispatcher_process == "off":
        return False
    if dispatch.virtual_clock or store.in_memory or store.url in IN_MEMORY:
        return False
    return roles.dispatcher_process == "on" or usable_cpus() >= 2


class DispatcherChild:
    """The dispatcher role's child process as its parent sees it; a DispatcherHost. Made by ``spawned``."""

    def __init__(self, argv: Sequence[str]) -> None:
        self._command = [sys.executable, "-m", "scheduler_emulator", *argv, *ROLE_FLAGS]
        self._directory = tempfile.mkdtemp(prefix="scheduler-emulator-metrics-")
        self._process: subprocess.Popen[bytes] | None = None
        self._started_at = 0.0
        self._watch: asyncio.Task[None] | None = None
        self._before = Metrics().render(dispatcher=True)  # what it reports until the first child has counted

    @classmethod
    def spawned(cls, argv: Sequence[str]) -> DispatcherChild:
        """The child, started now with the flags this process was started with (``argv``: cli.main), once the
        store is ready for it (serving.serve): it imports and opens the store while this process builds the app."""
        dispatcher_child = cls(argv)
        dispatcher_child._spawn()
        return dispatcher_child

    async def start(self) -> None:
        """Return once the child has begun dispatching (``_first_cycle``), then supervise it."""
        await self._first_cycle()
        self._watch = asyncio.get_running_loop().create_task(self._supervise(), name="dispatcher-child")

    def wake(self, not_before: datetime | None = None) -> None:
        """Nothing: the child hears of every change through the store (store/wakeups.py)."""

    async def stop(self, grace: float) -> None:
        if self._watch is not None:
            self._watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watch
        process = self._process
        if process is not None:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
            try:
                await asyncio.to_thread(process.wait, grace + STOP_MARGIN_SECONDS)
            except subprocess.TimeoutExpired:
                log.warning("the dispatcher's process (pid %d) did not end in time and was killed", process.pid)
                process.kill()
                await asyncio.to_thread(process.wait)
            if process.stdin is not None:
                process.stdin.close()
        self.end()

    def end(self) -> None:
        """At this process's exit, whether the server ran or not (serving.serve): a child still running (the
        start failed after it was spawned, or ``stop`` never ran) is ended (SIGTERM; SIGKILL after
        STOP_MARGIN_SECONDS), and the metrics directory is removed. Idempotent."""
        process = self._process
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(STOP_MARGIN_SECONDS)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if process is not None and process.stdin is not None:
            process.stdin.close()
        shutil.rmtree(self._directory, ignore_errors=True)

    def metrics(self) -> bytes:
        return dispatcher_part(self._directory) or self._before

    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    async def _first_cycle(self) -> None:
        """Return once the child has begun dispatching (its first cycle counted in its metrics), so that a job
        made as soon as the service listens fires on time; or once it has ended (the supervisor starts it
        again); or after START_SECONDS (a store not answering yet: the service serves meanwhile)."""
        assert self._process is not None
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            if self._process.poll() is not None or cycles_counted(self._directory) > 0:
                return
            await asyncio.sleep(WATCH_SECONDS / 5)
        log.warning(
            "the dispatcher's process (pid %d) has not begun dispatching within %g s; serving meanwhile",
            self._process.pid,
            START_SECONDS,
        )

    def _spawn(self) -> None:
        self._process = subprocess.Popen(
            self._command,
            stdin=subprocess.PIPE,  # its read end: the child ends when this process does (dispatcher/role.py)
            env={**os.environ, "PROMETHEUS_MULTIPROC_DIR": self._directory},
        )
        self._started_at = time.monotonic()
        log.info("the dispatcher runs in a process of its own (pid %d)", self._process.pid)

    async def _supervise(self) -> None:
        pause = RESTART_FIRST_SECONDS
        while True:
            await asyncio.sleep(WATCH_SECONDS)
            process = self._process
            assert process is not None
            status = process.poll()
            if status is None:
                continue
            if time.monotonic() - self._started_at >= STEADY_SECONDS:
                pause = RESTART_FIRST_SECONDS
            log.error(
                "the dispatcher's process (pid %d) ended unexpectedly (exit status %d); starting it again in %g s "
                "(what it had claimed is taken over once its leases run out)",
                process.pid,
                status,
                pause,
            )
            if process.stdin is not None:
                process.stdin.close()
            mark_process_dead(process.pid, self._directory)  # type: ignore[no-untyped-call]
            await asyncio.sleep(pause)
            pause = min(pause * 2, RESTART_MOST_SECONDS)
            self._spawn()
