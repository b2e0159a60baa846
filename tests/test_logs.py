"""Log lines written by the background writer (scheduler_emulator.logs): the same lines the formatters make,
complete and in order, every one of them written before the process ends."""

from __future__ import annotations

import copy
import io
import json
import logging
import os
import subprocess
import sys
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest

from scheduler_emulator.logs import BackgroundHandler, JsonFormatter, TextFormatter

ROOT = Path(__file__).resolve().parent.parent


class _Keep(logging.Handler):
    """Keeps a copy of every record as the logger passed it on (before the background handler saw it)."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(copy.copy(record))


def _logger(name: str, *handlers: logging.Handler) -> logging.Logger:
    logger = logging.getLogger(f"test_logs.{name}")
    logger.handlers[:] = list(handlers)
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    return logger


def _log_a_variety(logger: logging.Logger) -> None:
    logger.info("plain")
    logger.info(
        "job %s/%s attempt %d %s",
        "coll",
        "job-1",
        0,
        "succeeded",
        extra={
            "fields": {
                "collection": "coll",
                "lateness_ms": 1.5,
                "when": datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
                "none": None,
            }
        },
    )
    logger.warning("a %s with a newline\nand a %s", "value", "tab\there", extra={"fields": {"key": "x\ny"}})
    logger.info("100%% done, %s", {"a": [1, 2]})
    logger.info("a literal %s without arguments")
    try:
        raise ValueError("boom")
    except ValueError:
        logger.exception("failed on %s", "PUT /x")


@pytest.mark.parametrize("formatter", [JsonFormatter, TextFormatter], ids=["json", "text"])
def test_lines_are_what_the_formatter_makes_of_each_record(formatter: type[logging.Formatter]) -> None:
    stream = io.StringIO()
    keep = _Keep()
    background = BackgroundHandler(stream, formatter())
    logger = _logger(f"same-{formatter.__name__}", keep, background)
    _log_a_variety(logger)
    background.stop()
    direct = formatter()
    expected = "".join(direct.format(record) + "\n" for record in keep.records)
    assert stream.getvalue() == expected
    assert len(keep.records) == 6


def test_a_json_line_is_unchanged() -> None:
    """The JSON line of a known record, member by member and byte by byte (what json.dumps(default=str) gives)."""
    record = logging.LogRecord("scheduler_emulator.access", logging.INFO, __file__, 1, "GET %s %d", ("/x", 200), None)
    record.created = datetime(2026, 11, 27, 6, 0, 0, 123456, tzinfo=UTC).timestamp()
    record.fields = {"status": 200, "duration_ms": 1.25, "at": datetime(2026, 1, 1, tzinfo=UTC), "ü": "é"}
    line = JsonFormatter().format(record)
    assert line == (
        '{"time": "2026-11-27T06:00:00.123456Z", "level": "info", "logger": "scheduler_emulator.access", '
        '"message": "GET /x 200", "status": 200, "duration_ms": 1.25, "at": "2026-01-01 00:00:00+00:00", '
        '"\\u00fc": "\\u00e9"}'
    )


def test_lines_are_complete_and_in_order_from_several_threads() -> None:
    stream = io.StringIO()
    background = BackgroundHandler(stream, JsonFormatter())
    logger = _logger("order", background)
    per_thread = 5000

    def produce(name: str) -> None:
        for i in range(per_thread):
            logger.info("%s %d", name, i, extra={"fields": {"thread": name, "seq": i, "pad": "x" * (i % 300)}})

    threads = [threading.Thread(target=produce, args=(f"t{k}",)) for k in range(3)]
    for thread in threads:
        thread.start()
    produce("main")
    for thread in threads:
        thread.join(60)
    background.stop()
    lines = stream.getvalue().split("\n")
    assert lines[-1] == ""  # every line ends with its newline
    seen: dict[str, list[int]] = {}
    for line in lines[:-1]:
        member = json.loads(line)  # complete: each line is one whole JSON object
        seen.setdefault(member["thread"], []).append(member["seq"])
    assert seen == {name: list(range(per_thread)) for name in ("main", "t0", "t1", "t2")}


def test_flush_waits_for_what_was_logged_and_after_stop_lines_are_written_at_once() -> None:
    stream = io.StringIO()
    background = BackgroundHandler(stream, TextFormatter())
    logger = _logger("flush", background)
    for i in range(2000):
        logger.info("line %d", i)
    background.flush()
    assert stream.getvalue().count("\n") == 2000
    background.stop()
    logger.info("after the stop")
    assert stream.getvalue().splitlines()[-1].endswith("after the stop")
    assert stream.getvalue().count("\n") == 2001


_EXITING = """
import logging, os, signal, sys
from scheduler_emulator.logs import configure_logging, stop_background_logging
configure_logging("info", "json")
log = logging.getLogger("scheduler_emulator.test")
for i in range(30000):
    log.info("line %d", i, extra={"fields": {"seq": i}})
if sys.argv[1] == "signal":  # as the server ends after SIGTERM: no exit handlers run
    stop_background_logging()
    os.kill(os.getpid(), signal.SIGTERM)
log.info("last")
"""


@pytest.mark.parametrize("how", ["exit", "signal"])
def test_nothing_queued_is_lost_when_the_process_ends(how: str, tmp_path: Path) -> None:
    script = tmp_path / "exiting.py"
    script.write_text(_EXITING)
    done = subprocess.run([sys.executable, str(script), how], capture_output=True, text=True, timeout=120, cwd=ROOT)
    lines = done.stderr.splitlines()
    seqs = [json.loads(line)["seq"] for line in lines if '"seq"' in line]
    assert seqs == list(range(30000)), done.stderr[-2000:]
    if how == "exit":
        assert done.returncode == 0 and json.loads(lines[-1])["message"] == "last"
    else:
        assert done.returncode == -15


_SAYING = """
import logging, sys, threading
from scheduler_emulator.logs import configure_logging, say
configure_logging("info", "json")
log = logging.getLogger("scheduler_emulator.test")
stop = threading.Event()
def chatter():
    for i in range(200000):  # bounded; ends once the main thread has said its lines
        if stop.is_set():
            return
        log.info("line %d", i)
worker = threading.Thread(target=chatter)
worker.start()
for i in range(3000):
    say(f"Listening on http://127.0.0.1:{40000 + i}")
stop.set()
worker.join()
"""


def test_start_up_lines_stay_whole_beside_the_log_writer_on_one_pipe(tmp_path: Path) -> None:
    # As the test kit and compose read the server: stdout and stderr on one unbuffered pipe, the log writer's
    # thread writing its batches while the main thread announces its port. A line cut by a batch of log lines
    # broke the kit's port parsing (seen once in CI: port '42179{"time":'); with print() this test fails.
    script = tmp_path / "saying.py"
    script.write_text(_SAYING)
    done = subprocess.run(
        [sys.executable, str(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert done.returncode == 0, done.stdout[-2000:]
    lines = done.stdout.splitlines()
    said = [line for line in lines if "Listening on" in line]
    assert said == [f"Listening on http://127.0.0.1:{40000 + i}" for i in range(3000)], [
        line for line in said if not line.startswith("Listening on") or "{" in line
    ][:5]
    assert all(json.loads(line) for line in lines if "Listening on" not in line)


_TWO_PROCESSES = """
import logging, os
from scheduler_emulator.logs import configure_logging, stop_background_logging
child = os.fork()
configure_logging("info", "json")
log = logging.getLogger("scheduler_emulator.test")
for i in range(20000):
    log.info("%s line %d %s", "child" if child == 0 else "parent", i, "x" * 300)
stop_background_logging()
if child == 0:
    os._exit(0)
os.waitpid(child, 0)
"""


def test_two_processes_logging_to_one_pipe_never_cut_each_others_lines(tmp_path: Path) -> None:
    # The emulator's process and its dispatcher child (dispatcher/child.py) both log to one standard
    # error. A pipe keeps a write whole only up to PIPE_BUF bytes: the log writer writes its batches in pieces of
    # whole lines no longer than that (logs.whole_lines).
    script = tmp_path / "two.py"
    script.write_text(_TWO_PROCESSES)
    done = subprocess.run(
        [sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120, cwd=ROOT
    )
    assert done.returncode == 0, done.stdout[-2000:]
    lines = done.stdout.decode().splitlines()
    cut = [line for line in lines if not (line.startswith("{") and line.endswith("}"))]
    assert cut == [], cut[:3]
    messages = [json.loads(line)["message"].split(" x")[0] for line in lines]
    for who in ("child", "parent"):
        assert [m for m in messages if m.startswith(who)] == [f"{who} line {i}" for i in range(20000)]
