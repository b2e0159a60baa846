"""The dispatcher role's process that ``serve`` supervises (dispatcher/child.py; ``--no-api --supervised``): a
dispatcher on this process's event loop (dispatcher/here.py) over a Database of its own, with no listener (its
metrics reach the parent's ``GET /metrics`` through prometheus_client's multiprocess files, its health is the
parent's). It stops its dispatcher within ``--shutdown-grace`` on SIGTERM, and at once when its parent is gone:
the parent holds the other end of the pipe on this process's standard input, which the kernel closes when the
parent ends, however it ends. Ctrl-C in a terminal reaches the whole process group: the parent decides when this
process stops, so SIGINT is ignored."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import sys

from scheduler_emulator.at_rest import secret_key
from scheduler_emulator.collector import tune_garbage_collector
from scheduler_emulator.config import Settings
from scheduler_emulator.dispatcher.here import DispatcherHere, connection_bounds
from scheduler_emulator.dispatcher.loop import Pacing
from scheduler_emulator.domain.clock import WallClock
from scheduler_emulator.faults import pause_point
from scheduler_emulator.logs import configure_logging, stop_background_logging
from scheduler_emulator.metrics import Metrics
from scheduler_emulator.store.database import Database
from scheduler_emulator.store.secrets import SecretBox


def new_event_loop() -> asyncio.AbstractEventLoop:
    """uvloop's, as the API's (uvicorn's default), else asyncio's."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop comes with uvicorn[standard]
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def run_supervised(settings: Settings) -> None:
    """The process's life, until SIGTERM or its parent's end."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    configure_logging(settings.log_level, settings.log_format)
    try:
        pause_point("dispatcher-process-start")
        with asyncio.Runner(loop_factory=new_event_loop) as runner:
            runner.run(_dispatch(settings))
    finally:
        stop_background_logging()


async def _dispatch(settings: Settings) -> None:
    loop = asyncio.get_running_loop()
    grace: asyncio.Future[float] = loop.create_future()
    parent_gone = asyncio.Event()

    def stop_with(seconds: float) -> None:
        if not grace.done():
            grace.set_result(seconds)

    def on_input() -> None:
        try:
            data = os.read(sys.stdin.fileno(), 4096)
        except OSError:
            data = b""
        if not data:  # the parent is gone
            loop.remove_reader(sys.stdin.fileno())
            parent_gone.set()
            stop_with(0.0)

    loop.add_signal_handler(signal.SIGTERM, stop_with, settings.shutdown_grace)
    loop.add_reader(sys.stdin.fileno(), on_input)
    database = Database(settings.store.url, SecretBox(secret_key(settings.store)), connection_bounds(settings.store))
    host = DispatcherHere(
        database,
        dispatch=settings.dispatch,
        outbound=settings.outbound,
        clock=WallClock(),
        metrics=Metrics(),
        pacing=Pacing.of(settings.dispatch),
        watch_file=True,  # the API runs in another process: its writes are announced in the store
    )
    try:
        await host.start()
        tune_garbage_collector()
        seconds = await grace
        await host.stop(seconds)
    finally:
        database.dispose()
    directory = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if parent_gone.is_set() and directory:  # nobody else will remove the parent's metrics directory (child.py)
        shutil.rmtree(directory, ignore_errors=True)
