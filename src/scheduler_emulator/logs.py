"""Logging: one JSON object per line for machines, or readable text on a terminal (``--log-format``).

Fields given with ``extra={"fields": {...}}`` become JSON members, or ``key=value`` pairs in text.

A record costs the code that logs it (the event loop, mostly) only its creation and a queue put: formatting
and writing happen on one writer thread (``BackgroundHandler``), which writes what has accumulated in one
``write``. Lines keep their order; ``stop_background_logging`` (at shutdown) writes every queued line before it
returns, and later records are written at once."""

from __future__ import annotations

import json
import logging
import logging.handlers
import queue
import sys
import threading
from datetime import UTC, datetime
from typing import Any, TextIO

# One encoder for every line: json.dumps(..., default=str) builds a new one per call (same output).
_ENCODER = json.JSONEncoder(default=str)


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
        return _ENCODER.encode(line)


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
    """A marker in the queue: set once every record queued before it is written."""

    def __init__(self) -> None:
        self.done = threading.Event()


_STOP = object()
_BATCH = 1000  # records written by one write() at most


class BackgroundHandler(logging.handlers.QueueHandler):
    """Formats and writes records to ``stream`` on one writer thread, in the order they were logged.

    ``emit`` only merges the message with its arguments (they could change later) and queues the record; the
    writer formats what it finds queued and writes it with one ``write`` and one ``flush``. After ``stop``
    (which first writes everything queued), records are formatted and written at once by whoever logs them.
    ``flush`` waits until what was logged before it is written. Both waits are bounded."""

    def __init__(self, stream: TextIO, formatter: logging.Formatter) -> None:
        super().__init__(queue.SimpleQueue())
        self.stream = stream
        self.setFormatter(formatter)
        self._stopped = False
        self._writer = threading.Thread(target=self._write_queued, name="log-writer", daemon=True)
        self._writer.start()

    def prepare(self, record: logging.LogRecord) -> logging.LogRecord:
        """The record as queued: its message merged with its arguments now; formatting is the writer's."""
        if record.args:
            record.msg = record.getMessage()
            record.args = None
        return record

    def emit(self, record: logging.LogRecord) -> None:
        # Called under this handler's lock (Handler.handle), as stop() sets _stopped: no record is queued after
        # the writer's last one.
        if self._stopped:
            self._write([record])
            return
        try:
            self.queue.put_nowait(self.prepare(record))
        except Exception:  # noqa: BLE001 - logging must not raise into the caller
            self.handleError(record)

    def _write_queued(self) -> None:
        source: queue.SimpleQueue[Any] = self.queue  # type: ignore[assignment]
        while True:
            batch = [source.get()]
            while len(batch) < _BATCH:
                try:
                    batch.append(source.get_nowait())
                except queue.Empty:
                    break
            records = [item for item in batch if isinstance(item, logging.LogRecord)]
            if records:
                self._write(records)
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
            self.stream.write("".join(lines))
            self.stream.flush()
        except (OSError, ValueError):  # the stream is gone (closed pipe): nothing more can be written
            pass

    def flush(self, timeout: float = 10.0) -> None:
        """Return once every record logged before the call is written (or after ``timeout`` seconds)."""
        if self._stopped or threading.current_thread() is self._writer:
            return
        marker = _Flush()
        self.queue.put_nowait(marker)
        marker.done.wait(timeout)

    def stop(self, timeout: float = 10.0) -> None:
        """Write every queued record (waiting at most ``timeout`` seconds), then end the writer thread; records
        logged afterwards are written at once."""
        with self.lock:  # type: ignore[union-attr]
            if self._stopped:
                return
            self._stopped = True
            self.queue.put_nowait(_STOP)
        if threading.current_thread() is not self._writer:
            self._writer.join(timeout)

    def close(self) -> None:
        # logging.shutdown() (at interpreter exit) closes every handler: nothing queued is lost.
        self.stop()
        super().close()


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
    logging._srcfile = None  # type: ignore[attr-defined]
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    for name in ("uvicorn", "uvicorn.error"):
        logger = logging.getLogger(name)
        logger.handlers[:] = []
        logger.propagate = True
    # Our own access log replaces uvicorn's (it carries the request id, route and duration).
    logging.getLogger("uvicorn.access").disabled = True
    for noisy in ("aiohttp", "azure", "uamqp", "alembic.runtime.migration"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
