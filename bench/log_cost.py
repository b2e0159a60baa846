"""What one log line costs, in CPU time (not wall time, so that a busy machine does not change the figure):
the dispatcher's attempt line, logged N times from one thread as the event loop logs it, through

- ``sync``: the handler the service used until issue 33 (a StreamHandler with the JSON formatter: the caller
  formats and writes each line itself; the caller's file and line looked up for each record);
- ``background``: ``configure_logging`` today (the caller queues the record; one writer thread formats and
  writes what gathered).

Reports µs per line of the logging thread's CPU (what the event loop pays) and of the whole process's
(the writer thread included), and ``off`` (``--log-level warning``: the same loop, nothing written) as the
baseline to subtract. The lines go to a file (as ``… 2> file`` would take them).

    .venv/bin/python bench/log_cost.py --lines 30000 --rounds 3
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
from pathlib import Path

try:
    import scheduler_emulator  # noqa: F401
except ImportError:  # not the project's virtualenv: re-run under it
    import os

    VENV_PYTHON = Path(__file__).resolve().parent.parent / ".venv" / "bin" / "python"
    if VENV_PYTHON.exists() and Path(sys.prefix).resolve() != VENV_PYTHON.parent.parent.resolve():
        os.execv(str(VENV_PYTHON), [str(VENV_PYTHON), *sys.argv])
    raise

from scheduler_emulator import logs


def attempt_line(log: logging.Logger, i: int) -> None:
    """As dispatcher/occurrence.py logs an attempt."""
    log.info(
        "job %s/%s %s attempt %d %s", "bench-0001", f"job-{i:07d}", "MainAction", 0, "succeeded",
        extra={"fields": {"collection": "bench-0001", "job": f"job-{i:07d}", "action_type": "Http",
                          "action": "MainAction", "retry": 0, "repeat": 0, "outcome": "succeeded",
                          "lateness_ms": 1.2, "duration_ms": 3.4}},
    )


def measure(kind: str, lines: int, out: Path) -> tuple[float, float]:
    """(µs of the logging thread's CPU per line, µs of the process's CPU per line)."""
    stream = out.open("w")
    root = logging.getLogger()
    if kind == "off":  # --log-level warning: the same loop, no line logged (the baseline)
        logs.configure_logging("warning", "json")
        handler = root.handlers[0]
    elif kind == "sync":
        logging._srcfile = logging.__file__  # type: ignore[attr-defined]  # as before: the caller looked up
        logging.logThreads = logging.logProcesses = logging.logMultiprocessing = True
        handler: logging.Handler = logging.StreamHandler(stream)
        handler.setFormatter(logs.JsonFormatter())
        root.handlers[:] = [handler]
        root.setLevel(logging.INFO)
    else:
        logs.configure_logging("info", "json")
        handler = root.handlers[0]
        assert isinstance(handler, logs.BackgroundHandler)
        handler.stream = stream
    log = logging.getLogger("scheduler_emulator.dispatcher")
    thread_before, process_before = time.thread_time(), time.process_time()
    for i in range(lines):
        attempt_line(log, i)
        if i % 30 == 29:  # the loop does other work between lines: 3,000 lines/s
            time.sleep(0.01)
    thread_cpu = time.thread_time() - thread_before
    if isinstance(handler, logs.BackgroundHandler):
        handler.stop()  # every line written
    handler.flush()
    process_cpu = time.process_time() - process_before
    stream.close()
    written = out.read_text().count("\n")
    assert written == (0 if kind == "off" else lines), (kind, written)
    return 1e6 * thread_cpu / lines, 1e6 * process_cpu / lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=30000)
    parser.add_argument("--rounds", type=int, default=3)
    opts = parser.parse_args()
    out = Path(tempfile.mkdtemp(prefix="bench-logs-")) / "log.jsonl"
    results: dict[str, list[tuple[float, float]]] = {"off": [], "sync": [], "background": []}
    for _ in range(opts.rounds):
        for kind in results:  # alternating
            results[kind].append(measure(kind, opts.lines, out))
    print(f"{opts.lines:,} attempt lines per round, {opts.rounds} rounds; µs of CPU per line, min / median")
    print("| handler | logging thread (the event loop) | whole process |")
    print("|---|---:|---:|")
    for kind, values in results.items():
        loop = sorted(v[0] for v in values)
        process = sorted(v[1] for v in values)
        middle = len(loop) // 2
        print(f"| {kind} | {loop[0]:.1f} / {loop[middle]:.1f} | {process[0]:.1f} / {process[middle]:.1f} |")
    out.unlink(missing_ok=True)


if __name__ == "__main__":
    main()
