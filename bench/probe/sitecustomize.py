"""A timing probe for the emulator's processes, loaded through ``PYTHONPATH`` (not part of the package):

    BENCH_PROBE_DIR=/tmp/probe PYTHONPATH=bench/probe .venv/bin/python bench/run.py --scenarios fire ...
    .venv/bin/python bench/probe_report.py /tmp/probe

In every process started as ``python -m scheduler_emulator`` (``sys.orig_argv``: at this point ``sys.argv`` does
not name the module yet, so a probe that tests it never applies), each GET of one job or collection
(``api.context.in_read_session`` with ``small``) is timed inside the app: from the handler's call to the read
starting, the read, and the way back to the handler (perf_counter seconds, one line per GET, in
``$BENCH_PROBE_DIR/gets.<pid>.txt``). ``BENCH_SWITCH_INTERVAL`` (seconds) also sets the interpreter's switch
interval in those processes. ``BENCH_LAG_PROBE`` (ms) runs a task on the dispatcher's event loop that sleeps that
long at a time and writes each wake-up to ``$BENCH_PROBE_DIR/lag.<pid>.txt``: the gaps between wake-ups are the
lengths of the loop's turns (uvloop counts a timer from the start of the loop's current turn, so the lag written
beside each understates it).

    BENCH_LAG_PROBE=2 BENCH_PROBE_DIR=/tmp/probe PYTHONPATH=bench/probe .venv/bin/python bench/run.py ...
    .venv/bin/python bench/probe_report.py /tmp/probe   # with lag files: the loop's turns over the GETs' span"""

from __future__ import annotations

import os
import sys

if any("scheduler_emulator" in arg for arg in sys.orig_argv):
    if os.environ.get("BENCH_SWITCH_INTERVAL"):
        sys.setswitchinterval(float(os.environ["BENCH_SWITCH_INTERVAL"]))
    if os.environ.get("BENCH_PROBE_DIR"):
        import time

        import scheduler_emulator.api.context as _context
        import scheduler_emulator.api.job_collections as _collections
        import scheduler_emulator.api.jobs as _jobs

        _original = _context.in_read_session
        _out = []

        async def _timed(request, work, *, small=False):  # type: ignore[no-untyped-def]
            called = time.perf_counter()
            marks = []

            def timed_work(session):  # type: ignore[no-untyped-def]
                marks.append(time.perf_counter())
                try:
                    return work(session)
                finally:
                    marks.append(time.perf_counter())

            try:
                return await _original(request, timed_work, small=small)
            finally:
                if small and len(marks) == 2:
                    if not _out:
                        path = os.path.join(os.environ["BENCH_PROBE_DIR"], f"gets.{os.getpid()}.txt")
                        _out.append(open(path, "a", buffering=1))  # noqa: SIM115 - open for the process's life
                    _out[0].write(f"{called:.6f} {marks[0]:.6f} {marks[1]:.6f} {time.perf_counter():.6f}\n")

        for _module in (_context, _jobs, _collections):
            _module.in_read_session = _timed

    if os.environ.get("BENCH_LAG_PROBE"):
        # The event loop's lag: a task on the emulator's loop sleeps BENCH_LAG_PROBE ms at a time and writes how
        # much later than asked it woke (perf_counter seconds at waking, lag ms) to $BENCH_PROBE_DIR/lag.<pid>.txt.
        import asyncio
        import time

        import scheduler_emulator.dispatcher.loop as _loop_module

        _start = _loop_module.Dispatcher.start
        _step = float(os.environ["BENCH_LAG_PROBE"]) / 1000

        async def _watch_lag() -> None:
            path = os.path.join(os.environ.get("BENCH_PROBE_DIR", "/tmp"), f"lag.{os.getpid()}.txt")
            with open(path, "a", buffering=1) as out:
                for _ in range(10_000_000):
                    asked = time.perf_counter()
                    await asyncio.sleep(_step)
                    woke = time.perf_counter()
                    out.write(f"{woke:.6f} {(woke - asked - _step) * 1000:.3f}\n")

        def _start_and_watch(self):  # type: ignore[no-untyped-def]
            _start(self)
            self._bench_lag = asyncio.get_running_loop().create_task(_watch_lag())

        _loop_module.Dispatcher.start = _start_and_watch  # type: ignore[method-assign]
