"""Logging: one JSON object per line for machines, or readable text on a terminal (``--log-format``).

Fields given with ``extra={"fields": {...}}`` become JSON members, or ``key=value`` pairs in text."""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any


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
        return json.dumps(line, default=str)


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


def configure_logging(level: str, form: str) -> None:
    """Route every logger (uvicorn's included) to stderr in ``form`` (json, text, or auto)."""
    if form == "auto":
        form = "text" if sys.stderr.isatty() else "json"
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if form == "json" else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for name in ("uvicorn", "uvicorn.error"):
        logger = logging.getLogger(name)
        logger.handlers[:] = []
        logger.propagate = True
    # Our own access log replaces uvicorn's (it carries the request id, route and duration).
    logging.getLogger("uvicorn.access").disabled = True
    for noisy in ("aiohttp", "azure", "uamqp", "alembic.runtime.migration"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
