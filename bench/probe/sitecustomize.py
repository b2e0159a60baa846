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
    .venv/bin/python bench/probe_report.py /tmp/probe   # with lag files: the loop's turns over the GETs' span

``BENCH_FIRE_PROBE`` (a directory) records, in the dispatcher role's process (``--supervised``), each fire's hold
until its instant (firing.hold_until: when it began, when it woke, the loop thread's and the process's CPU then),
the store port's calls in the worker threads, the log writer's writes and the garbage collector's passes, and
writes them at exit to ``$BENCH_FIRE_PROBE/fire.<pid>.txt``; bench/fire_probe_report.py says what ran while fires
were late (with the run's nginx access log, kept by ``--keep``, it matches each hold to its arrival):

    BENCH_FIRE_PROBE=/tmp/fires PYTHONPATH=bench/probe .venv/bin/python bench/run.py --scenarios fire \
        --systems sqlite --rates 1000 --paths user --keep
    .venv/bin/python bench/fire_probe_report.py /tmp/fires /tmp/bench-fire-*/nginx/access.log"""

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

    if os.environ.get("BENCH_FIRE_PROBE") and "--supervised" in sys.orig_argv:
        # What the dispatcher role's process did around each fire (its hold until the instant, firing.hold_until):
        # one line per event in $BENCH_FIRE_PROBE/fire.<pid>.txt, written at exit, epoch seconds:
        #   hold MOMENT ENTERED WOKE LOOP_CPU PROCESS_CPU  (the thread's and the process's CPU seconds at waking)
        #   span NAME START END THREAD N                    (claims, batch writes, the log writer's writes, ...)
        #   claimed START EARLIEST LATEST N                 (a claim's expected times)
        #   gc GENERATION START END COLLECTED
        import atexit
        import gc
        import threading
        import time

        import scheduler_emulator.dispatcher.firing as _firing
        import scheduler_emulator.logs as _logs
        from scheduler_emulator.store.dispatch_port import DispatchStore as _Store

        _events: list[tuple[object, ...]] = []
        _hold = _firing.hold_until

        async def _held(moment: float) -> None:
            entered = time.time()
            await _hold(moment)
            _events.append(("hold", moment, entered, time.time(), time.thread_time(), time.process_time()))

        _firing.hold_until = _held

        def _spanned(name, function):  # type: ignore[no-untyped-def]
            def timed(*args, **kwargs):  # type: ignore[no-untyped-def]
                start = time.time()
                try:
                    result = function(*args, **kwargs)
                except BaseException:
                    _events.append(("span", name, start, time.time(), threading.get_ident(), -1))
                    raise
                counted = result if isinstance(result, list) else args[1] if name in ("write", "log_write") else ()
                size = len(counted)
                _events.append(("span", name, start, time.time(), threading.get_ident(), size))
                if name == "claim_due" and result:
                    times = [claim.expected_time.timestamp() for claim in result]
                    _events.append(("claimed", start, min(times), max(times), len(times)))
                return result

            return timed

        for _name in ("claim_due", "write", "job_status", "next_wake_time", "heartbeat", "prune",
                      "refresh_statistics"):
            setattr(_Store, _name, _spanned(_name, getattr(_Store, _name)))
        _log_write = _spanned("log_write", _logs.BackgroundHandler._write)
        _logs.BackgroundHandler._write = _log_write  # type: ignore[method-assign]

        _gc_start = [0.0]

        def _on_gc(phase: str, info: dict) -> None:  # type: ignore[type-arg]
            if phase == "start":
                _gc_start[0] = time.time()
            else:
                _events.append(("gc", info["generation"], _gc_start[0], time.time(), info["collected"]))

        gc.callbacks.append(_on_gc)

        def _dump() -> None:
            path = os.path.join(os.environ["BENCH_FIRE_PROBE"], f"fire.{os.getpid()}.txt")
            with open(path, "w") as out:
                out.write(f"loop_thread {threading.main_thread().ident}\n")
                for event in list(_events):
                    out.write(" ".join(f"{v:.6f}" if isinstance(v, float) else str(v) for v in event) + "\n")

        atexit.register(_dump)
