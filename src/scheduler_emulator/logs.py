"""Logging: one JSON object per line for machines, or readable text on a terminal (``--log-format``).

Fields given with ``extra={"fields": {...}}`` become JSON members, or ``key=value`` pairs in text.

A record costs the code that logs it (the event loop, mostly) only its creation and a queue put: formatting
and writing happen on one writer thread (``BackgroundHandler``), which writes what has accumulated in one
``write``. Lines keep their order; ``stop_background_logging`` (at shutdown) writes every queued line before it
returns, and later records are written at once."""

from __future__ import annotations

import collections
import json
import logging
import select
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from json.encoder import c_make_encoder, encode_basestring_ascii  # type: ignore[attr-defined]
from typing import Any, TextIO

# One encoder for every line: json.dumps(..., default=str) builds a new one per call (the same output; the C
# encoder made once, without the circular-reference check a log line's own dict does not need: 7.0 → 5.9 µs
# per line).
_ENCODER = json.JSONEncoder(default=str)
_C_ENCODER = (
    c_make_encoder(None, str, encode_basestring_ascii, None, ": ", ", ", False, False, True) if c_make_encoder else None
)


def _encode(line: dict[str, Any]) -> str:
    return "".join(_C_ENCODER(line, 0)) if _C_ENCODER is not None else _ENCODER.encode(line)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat().replace("+00:00", "Z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        line.update(getattr(record, "fields", {}) or {})
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return _encode(line)


# Control characters (CR and LF above all) in logged values would let a client forge log lines.
_ESCAPES = {code: f"\\x{code:02x}" for code in (*range(0x20), 0x7F)} | {0x0A: "\\n", 0x0D: "\\r", 0x09: "\\t"}


def escape_controls(text: str) -> str:
    """``text`` with control characters written as escapes (``\\n``, ``\\x1b``), on one line."""
    return text.translate(_ESCAPES)


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)-7s %(name)s: %(message)s")

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 - logging's name
        # The message and its arguments (client values among them) are escaped; a traceback, added by
        # format() after this, keeps its lines.
        record.message = escape_controls(record.message)
        return super().formatMessage(record)

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        fields = getattr(record, "fields", None)
        if fields:
            text += " " + " ".join(f"{key}={escape_controls(str(value))}" for key, value in fields.items())
        return text


class _Flush:
    """A marker among the records: set once every record queued before it is written."""

    def __init__(self) -> None:
        self.done = threading.Event()


_STOP = object()
# Held while the log writer or ``say`` writes: when a supervisor reads stdout and stderr on one pipe (the test
# kit, compose), a write longer than the pipe's atomic size (4 KiB) can be split by another thread's write, and a
# start-up line ("Listening on …") landing inside a batch of log lines broke the line a reader parses.
OUTPUT_LOCK = threading.Lock()
ATOMIC_WRITE_BYTES = getattr(select, "PIPE_BUF", 512)  # see whole_lines
GATHER_SECONDS = 0.02  # the writer wakes at most this often under load, writing what gathered meanwhile


class BackgroundHandler(logging.Handler):
    """Formats and writes records to ``stream`` on one writer thread, in the order they were logged.

    ``emit`` only merges the message with its arguments (they could change later) and appends the record to a
    queue; the writer formats what is queued and writes it with one ``write`` and one ``flush``: at once after a
    quiet spell, else (lines keep coming) once for what gathers over ``GATHER_SECONDS``. (The standard
    QueueHandler and QueueListener wake the listener's thread for every record and write and flush each line
    alone: at 3,000 lines/s those hand-offs of the interpreter lock between the event loop and the writer
    showed in the profiles.) After ``stop``, which first writes
    everything queued, records are formatted and written at once by whoever logs them. ``flush`` waits until
    what was logged before it is written. Both waits are bounded."""

    def __init__(self, stream: TextIO, formatter: logging.Formatter) -> None:
        super().__init__()
        self.stream = stream
        self.setFormatter(formatter)
        self._queue: collections.deque[Any] = collections.deque()
        self._wanted = threading.Event()  # the writer has something to do
        self._pending = False  # _wanted is set, or the writer is about to look
        self._stopped = False
        self._writer = threading.Thread(target=self._write_queued, name="log-writer", daemon=True)
        self._writer.start()

    def emit(self, record: logging.LogRecord) -> None:
        # Called under this handler's lock (Handler.handle), as stop() sets _stopped: no record is queued after
        # the writer's last one.
        if self._stopped:
            self._write([record])
            return
        if record.args:  # the message as it reads now: its arguments could change before the writer runs
            try:
                record.msg = record.getMessage()
            except Exception:  # noqa: BLE001 - logging must not raise into the caller
                self.handleError(record)
                return
            record.args = None
        self._queue.append(record)
        if not self._pending:
            self._pending = True
            self._wanted.set()

    def _put(self, item: object) -> None:
        """A marker, looked at without waiting for more to gather."""
        self._queue.append(item)
        self._pending = True
        self._wanted.set()

    def _write_queued(self) -> None:
        queued = self._queue
        wrote_at = -GATHER_SECONDS
        while True:
            self._wanted.wait()
            last = queued[-1] if queued else None
            busy = time.monotonic() - wrote_at < GATHER_SECONDS  # lines keep coming: gather them
            if busy and last is not _STOP and not isinstance(last, _Flush):
                time.sleep(GATHER_SECONDS)  # one wake-up and one write for all that comes meanwhile
            self._pending = False
            self._wanted.clear()
            batch = []
            while queued:
                batch.append(queued.popleft())
            records = [item for item in batch if isinstance(item, logging.LogRecord)]
            if records:
                self._write(records)
                wrote_at = time.monotonic()
            for item in batch:
                if isinstance(item, _Flush):
                    item.done.set()
            if any(item is _STOP for item in batch):
                return

    def _write(self, records: list[logging.LogRecord]) -> None:
        lines = []
        for record in records:
            try:
                lines.append(self.format(record) + "\n")
            except Exception:  # noqa: BLE001 - as logging.StreamHandler: report, go on
                self.handleError(record)
        try:
            with OUTPUT_LOCK:
                for chunk in whole_lines(lines):
                    self.stream.write(chunk)
                    self.stream.flush()
        except (OSError, ValueError):  # the stream is gone (closed pipe): nothing more can be written
            pass

    def flush(self, timeout: float = 10.0) -> None:
        """Return once every record logged before the call is written (or after ``timeout`` seconds)."""
        if self._stopped or threading.current_thread() is self._writer:
            return
        marker = _Flush()
        self._put(marker)
        marker.done.wait(timeout)

    def stop(self, timeout: float = 10.0) -> None:
        """Write every queued record (waiting at most ``timeout`` seconds), then end the writer thread; records
        logged afterwards are written at once."""
        with self.lock:  # type: ignore[union-attr]
            if self._stopped:
                return
            self._stopped = True
            self._put(_STOP)
        if threading.current_thread() is not self._writer:
            self._writer.join(timeout)

    def close(self) -> None:
        # logging.shutdown() (at interpreter exit) closes every handler: nothing queued is lost.
        self.stop()
        super().close()


def whole_lines(lines: list[str], most: int = ATOMIC_WRITE_BYTES) -> Iterator[str]:
    """``lines`` joined into writes of at most ``most`` bytes each (a longer line alone), so that no line is cut.
    The emulator's processes (the API's and its dispatcher child's: dispatcher/child.py) write to the same
    standard error; into a pipe, the kernel keeps a write of up to PIPE_BUF bytes whole, and may interleave longer
    ones with another process's."""
    chunk: list[str] = []
    size = 0
    for line in lines:
        length = len(line) if line.isascii() else len(line.encode())
        if chunk and size + length > most:
            yield "".join(chunk)
            chunk, size = [], 0
        chunk.append(line)
        size += length
    if chunk:
        yield "".join(chunk)


def _background_handler() -> BackgroundHandler | None:
    return next((h for h in logging.getLogger().handlers if isinstance(h, BackgroundHandler)), None)


def stop_background_logging(timeout: float = 10.0) -> None:
    """Write every queued log line now and log synchronously from here on (for the end of the process: a
    process that ends by a signal runs no exit handlers)."""
    handler = _background_handler()
    if handler is not None:
        handler.stop(timeout)


def configure_logging(level: str, form: str) -> None:
    """Route every logger (uvicorn's included) to stderr in ``form`` (json, text, or auto), written by one
    background thread (see BackgroundHandler)."""
    if form == "auto":
        form = "text" if sys.stderr.isatty() else "json"
    previous = _background_handler()
    if previous is not None:
        previous.stop()
    handler = BackgroundHandler(sys.stderr, JsonFormatter() if form == "json" else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # What a record carries that no line of ours shows (logging HOWTO, "Optimization"): the caller's file and
    # line (a walk up the stack per record), the thread's and the process's names.
    logging._srcfile = None
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    for name in ("uvicorn", "uvicorn.error"):
        logger = logging.getLogger(name)
        logger.handlers[:] = []
        logger.propagate = True
    # Our own access log replaces uvicorn's (it carries the request id, route and duration).
    logging.getLogger("uvicorn.access").disabled = True
    for noisy in ("aiohttp", "azure", "uamqp", "alembic.runtime.migration", "alembic.runtime.plugins"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))


def say(text: str, stream: TextIO | None = None) -> None:
    """Write ``text`` and its newline as one line that no log batch can split, then flush (standard output by
    default). ``print`` writes the text and the newline separately, and the log writer's thread may write between
    them or around them when both streams go to one pipe (see ``OUTPUT_LOCK``)."""
    out = stream if stream is not None else sys.stdout
    with OUTPUT_LOCK:
        out.write(text + "\n")
        out.flush()
