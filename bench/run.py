"""The benchmark suite: fire rate and lateness, API throughput, million-job start-up — one command.

    python bench/run.py            # everything (12-17 min on 2 cores); writes bench/results.md
    python bench/run.py --quick    # a short smoke run (~5 min)
    python bench/run.py --scenarios fire --systems sqlite,pg1 --rates 1000
    python bench/run.py --scenarios profile   # py-spy of the dispatcher at the top rate

See bench/README.md for what each number means.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import os
import platform
import random
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import harness as h

try:
    import scheduler_emulator  # noqa: F401
except ImportError:  # not the project's virtualenv: re-run under it
    VENV_PYTHON = h.ROOT / ".venv" / "bin" / "python"
    if VENV_PYTHON.exists() and Path(sys.prefix).resolve() != VENV_PYTHON.parent.parent.resolve():
        os.execv(str(VENV_PYTHON), [str(VENV_PYTHON), *sys.argv])
    raise

SYSTEMS = {
    "plain": "plain asyncio loop (ceiling)",
    "aps": "APScheduler 3.11, SQLAlchemyJobStore/SQLite",
    "sqlite": "emulator, SQLite",
    "pg1": "emulator, PostgreSQL ×1",
    "pg3": "emulator, PostgreSQL ×3",
}
EMULATOR_SYSTEMS = ("sqlite", "pg1", "pg3")
# How the emulator's rows are made: the user's path first (jobs created through the ARM API of the process
# that fires them, default flags), then the same with --log-level warning (what logging costs), then the
# dispatcher alone (rows written straight into the store, a fresh process, --log-level warning).
PATHS = {
    "user": "jobs via API, default flags",
    "quiet": "jobs via API, --log-level warning",
    "seeded": "dispatcher only (seeded rows, --log-level warning)",
}




@dataclass(frozen=True)
class Variant:
    """One way of starting the emulator, measured beside the others in the same run (``--variant``): its name
    in the tables and the flags added to every emulator process's command line (after ``--emulator-args``)."""

    name: str
    args: tuple[str, ...] = ()

    @classmethod
    def parse(cls, text: str) -> Variant:
        """``NAME=FLAGS``, e.g. ``actions-off=--action-process off``."""
        name, sep, flags = text.partition("=")
        if not sep or not name.strip():
            raise ValueError(f"--variant {text!r}: expected NAME=FLAGS, e.g. 'off=--action-process off'")
        return cls(name.strip(), tuple(shlex.split(flags)))


DEFAULT = Variant("")


def label(system: str, path: str, variant: Variant = DEFAULT) -> str:
    text = SYSTEMS[system] if system not in EMULATOR_SYSTEMS else f"{SYSTEMS[system]} — {PATHS[path]}"
    return f"{text} [{variant.name}]" if variant.name and system in EMULATOR_SYSTEMS else text


def log(message: str) -> None:
    print(f"[{datetime.now().strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# -- fire rate --------------------------------------------------------------------------------------


class Lead:
    """How far ahead of 'now' the first due instant is put: long enough to seed the store and start the
    processes (learnt from the runs so far, so a loaded machine gets more), not so long that runs idle."""

    # rows/s; "api-…": job PUTs/s through the API (the user's path), a first guess below what was measured
    seed_rate = {"sqlite": 15_000.0, "pg": 8_000.0, "aps": 6_000.0, "plain": 1e9, "api-sqlite": 300.0,
                 "api-pg": 300.0}
    startup = {"sqlite": 4.0, "pg1": 4.0, "pg3": 7.0, "aps": 3.0, "plain": 2.0}  # seconds

    @classmethod
    def seconds(cls, system: str, jobs: int, path: str = "seeded") -> float:
        rate = cls.seed_rate[backend(system, path)]
        margin = 1.15 if path != "seeded" else 1.0  # PUT rates vary more than bulk inserts
        return 2.0 + margin * jobs / rate + (cls.startup[system] if path == "seeded" else 3.0)

    @classmethod
    def observe(cls, system: str, jobs: int, seed_s: float | None, startup_s: float | None,
                path: str = "seeded") -> None:
        if seed_s:
            key = backend(system, path)
            if key.startswith("api-"):  # the last PUT rate seen, less 15 %: a first guess of 300/s made the
                # 3,000/s runs idle ~70 s before their window (the margin above and a rerun cover a slower one)
                cls.seed_rate[key] = 0.85 * jobs / seed_s
            else:
                cls.seed_rate[key] = min(cls.seed_rate[key], jobs / seed_s)
        if startup_s:
            cls.startup[system] = max(cls.startup[system], 1.3 * startup_s)


def backend(system: str, path: str = "seeded") -> str:
    store = "pg" if system.startswith("pg") else system
    return f"api-{store}" if path != "seeded" and system in EMULATOR_SYSTEMS else store


def run_fire(system: str, jobs: int, window: float, opts: argparse.Namespace,
             profile_to: Path | None = None, path: str = "seeded", *, variant: Variant = DEFAULT) -> h.Measured:
    """One run; run again once (with the lead learnt from the first) if setup overran the first due instant."""
    result = run_fire_once(system, jobs, window, opts, profile_to, path, variant=variant)
    if result.error is None and (result.margin_s or 0) < 0.2:
        log(f"  setup overran the lead by {-(result.margin_s or 0):.1f} s; running again with a longer lead")
        result = run_fire_once(system, jobs, window, opts, profile_to, path, variant=variant)
    return result


def run_fire_once(system: str, jobs: int, window: float, opts: argparse.Namespace,
                  profile_to: Path | None = None, path: str = "seeded", *, variant: Variant = DEFAULT) -> h.Measured:
    """One fire-rate run. Emulator systems: ``path`` user (jobs created through the ARM API of the process(es)
    that fire them, which run with default flags; PostgreSQL ×3: the API on one process started with
    --no-dispatcher, dispatchers on two started with --no-api, as the README shows), quiet (the same with
    --log-level warning) or seeded (rows written into the store, then fresh dispatcher processes). Every
    emulator process also gets ``--emulator-args`` and the ``variant``'s flags."""
    demand = jobs / window
    result = h.Measured(label(system, path, variant), demand,
                        path=path if system in EMULATOR_SYSTEMS else "seeded")
    flags = [*opts.emulator_args, *variant.args]
    get_load: h.GetLoad | None = None
    tmp = Path(tempfile.mkdtemp(prefix="bench-fire-"))
    nginx = h.Nginx(tmp / "nginx")
    processes: list[subprocess.Popen[bytes]] = []
    emulators: list[h.Emulator] = []
    pg_url = None
    window_us = int(window * 1e6)
    try:
        nginx.start()
        target = nginx.base_url
        began = time.monotonic()
        if system in EMULATOR_SYSTEMS and path != "seeded":
            url = f"sqlite:///{tmp / 'store' / 'scheduler.db'}"
            if system != "sqlite":
                url = pg_url = h.create_pg_database()
            extra = (["--log-level", "warning"] if path == "quiet" else []) + flags
            if system == "pg3":  # the README's scale-out: one API process, dispatcher processes beside it
                emulators = [h.Emulator(tmp / "api", url, "--no-dispatcher", *extra, defaults=True)]
                emulators += [h.Emulator(tmp / f"dispatcher{k}", url, "--no-api", *extra, defaults=True)
                              for k in (1, 2)]
            else:
                emulators = [h.Emulator(tmp / "emulator", url, *extra, defaults=True)]
            emulators[0].spawn()  # the API process first: it migrates the schema
            emulators[0].wait_listening()
            for emulator in emulators[1:]:
                emulator.spawn()
            for emulator in emulators[1:]:
                emulator.wait_listening()
            Lead.observe(system, jobs, None, max(e.listening_at for e in emulators) - emulators[0].spawned_at)
            pids = [p for e in emulators for p in e.pids]
            t0_us = h.now_us() + int(Lead.seconds(system, jobs, path) * 1e6)
            due = [h.due_instant(t0_us, window_us, i, jobs) for i in range(jobs)]
            cycles_before = [e.counter("scheduler_dispatcher_cycles_total") for e in emulators]
            created = h.create_jobs_via_api([emulators[0].url], due, lambda i: f"{target}/fire/{i}",
                                            opts.api_concurrency, pids)
            cycles = [(e.counter("scheduler_dispatcher_cycles_total"), b) for e, b in zip(emulators, cycles_before,
                                                                                          strict=True)]
            if any(a is not None and b is not None for a, b in cycles):
                woken = sum(a - b for a, b in cycles if a is not None and b is not None)
                result.notes.append(f"dispatcher claim cycles while the jobs were created: {woken:,.0f} "
                                    f"({1000 * woken / max(1, jobs):,.0f} per 1,000 PUTs)")
            del due
            result.creation = {**asdict(created), "rate": created.rate}
            Lead.observe(system, jobs, created.seconds, None, path)
            log(f"  created {created.jobs:,} jobs through the API in {created.seconds:.1f} s ({created.rate:,.0f} "
                f"PUT/s, p99 {fmt(created.p99_ms)} ms, errors {created.errors or 0}, server CPU "
                f"{fmt(created.server_cpu_s, 1)} s)")
            if created.errors:
                result.notes.append(f"job creation errors: {created.errors}")
            if opts.get_rate > 0:  # user and quiet alike, so that the two compare what logging costs
                get_load = h.GetLoad(emulators[0].url, jobs, h.user_collections(jobs), opts.get_rate)
        elif system in EMULATOR_SYSTEMS:
            url = f"sqlite:///{tmp / 'store' / 'scheduler.db'}"
            if system != "sqlite":
                url = pg_url = h.create_pg_database()
            h.make_template(tmp / "template", url, f"{target}/fire/template")
            t0_us = h.now_us() + int(Lead.seconds(system, jobs) * 1e6)
            due = [h.due_instant(t0_us, window_us, i, jobs) for i in range(jobs)]
            seed_s = h.seed_jobs(url, due, lambda i: f"{target}/fire/{i}")
            del due
            emulators = [h.Emulator(tmp / f"dispatcher{k}", url, *flags) for k in range(3 if system == "pg3" else 1)]
            for emulator in emulators:
                emulator.spawn()
            for emulator in emulators:
                emulator.wait_listening()
            Lead.observe(system, jobs, seed_s, max(e.listening_at for e in emulators) - emulators[0].spawned_at)
            pids = [p for e in emulators for p in e.pids]
        else:
            t0_us = h.now_us() + int(Lead.seconds(system, jobs) * 1e6)
            spawned = time.time()
            script = "plain_loop.py" if system == "plain" else "aps_bench.py"
            args = [h.PYTHON, str(h.BENCH_DIR / script), "--target", target, "--t0-us", str(t0_us),
                    "--window-us", str(window_us), "--jobs", str(jobs), "--max-seconds", str(window + 400)]
            if system == "aps":
                args += ["--db", str(tmp / "aps.sqlite")]
            out = (tmp / f"{system}.log").open("w+b")
            processes.append(subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, cwd=h.BENCH_DIR))
            deadline = time.monotonic() + Lead.seconds(system, jobs) + 60
            while b"ready" not in (tmp / f"{system}.log").read_bytes():
                if processes[0].poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"{script} did not start: {(tmp / f'{system}.log').read_text()[-2000:]}")
                time.sleep(0.05)
            Lead.observe(system, jobs, None, time.time() - spawned)
            pids = [processes[0].pid]
        t0 = t0_us / 1e6
        result.setup_s = time.monotonic() - began
        result.margin_s = t0 - time.time()
        if result.margin_s < 0.2:
            result.notes.append(f"setup overran the lead by {-result.margin_s:.1f} s")
        cpu_before, sys_before = h.cpu_split_of(pids)
        result.load = h.loadavg()
        profiler = None
        if profile_to is not None:
            profiler = start_profiler(pids[0], profile_to, max(1.0, t0 - time.time()) + min(window, 10.0), tree=True)
        def db_counters() -> list[tuple[float | None, float | None]]:
            return [(e.counter("scheduler_dispatcher_write_batches_total"),
                     e.counter("scheduler_dispatcher_cycles_total")) for e in emulators]

        counted_before = db_counters()  # the window's work only (the API's writes wake dispatchers too)
        time.sleep(max(0.0, t0 - time.time()))
        box_before = h.machine_jiffies()
        if get_load is not None:
            get_load.start(window)
        deadline = h.drain(nginx, jobs, t0 + window, t0 + window + opts.drain)
        if get_load is not None:
            get_load.join()
            result.gets = get_load.summary()
        result.box_busy_pct = h.machine_busy_pct(box_before, h.machine_jiffies())
        if emulators:  # the dispatcher records history behind the fires: give it time to catch up (bounded)
            time.sleep(1.2)  # nginx flushes its log every second
            _, result.history_lag_s = h.wait_for_history(url, nginx.lines(), opts.history_wait)
        peaks = [h.proc_status_kb(pid, "VmHWM") or 0 for pid in pids]
        result.processes = len(pids)
        result.peak_rss_mb = max(peaks) / 1024
        result.peak_rss_total_mb = sum(peaks) / 1024
        if len(peaks) > 1:
            result.notes.append("peak RSS per process " + "/".join(f"{p / 1024:.0f}" for p in peaks) + " MB")
        cpu_after, sys_after = h.cpu_split_of(pids)
        result.cpu_s, system_s = cpu_after - cpu_before, sys_after - sys_before
        if result.cpu_s > 0:
            result.notes.append(f"CPU in the kernel (system calls): {system_s:.1f} of {result.cpu_s:.1f} s "
                                f"({100 * system_s / result.cpu_s:.0f} %)")
        if profiler is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                profiler.wait(30)
            h.stop_process(profiler)
        if emulators:  # how much database work the fires took: write transactions and claim cycles per 1,000
            read = [(b - b0, c - c0) for (b, c), (b0, c0) in zip(db_counters(), counted_before, strict=True)
                    if None not in (b, c, b0, c0)]  # an API-only process has none
            if read:
                per = 1000 / max(1, jobs)
                result.notes.append(f"per 1,000 fires: {sum(b or 0 for b, _ in read) * per:.0f} write transactions, "
                                    f"{sum(c or 0 for _, c in read) * per:.0f} claim cycles")
        for emulator in emulators:  # stop them together
            if emulator.process is not None:
                emulator.process.terminate()
        for emulator in emulators:
            emulator.stop()
            for line in emulator.errors_logged()[:3]:
                result.notes.append(f"emulator log: {line.strip()[:160]}")
        if emulators:
            result.log_lines = sum(e.log_lines() for e in emulators)
            if path != "seeded":
                result.notes.append(f"{result.log_lines:,} log lines written")
        if result.creation:
            c = result.creation
            result.notes.append(f"{c['jobs']:,} jobs created through the API before the window: {c['rate']:,.0f} PUT/s "
                                f"({opts.api_concurrency} clients, {h.user_collections(jobs)} collections), p50 "
                                f"{fmt(c['p50_ms'], 1)} ms, p99 {fmt(c['p99_ms'], 1)} ms")
        if result.gets:
            g = result.gets
            result.notes.append(f"GET job at {g['rate']:.0f}/s during the window: {g['requests']:,} answered, p50 "
                                f"{fmt(g['p50_ms'], 1)} ms, p99 {fmt(g['p99_ms'], 1)} ms, "
                                f"max {fmt(g['max_ms'], 1)} ms, errors {g['errors']}, skipped {g['skipped']}")
        for process in processes:
            h.stop_process(process)
        nginx.stop()
        arrivals = nginx.arrivals()
        result.notes.append(f"{nginx.connections():,} connections to nginx")
        result.stats = h.analyse(arrivals, t0_us, window_us, jobs, deadline)
        if result.stats.unexpected:
            result.notes.append(f"{result.stats.unexpected} request(s) matched no expected fire")
        if result.stats.late_after_deadline:
            result.notes.append(f"{result.stats.late_after_deadline} fire(s) arrived after the drain deadline")
        if system in EMULATOR_SYSTEMS:
            try:
                counts = h.history_counts(url)
            except Exception as exc:  # e.g. the shared PostgreSQL restarted under us
                counts = {}
                result.notes.append(f"history not counted: {type(exc).__name__}: {str(exc)[:120]}")
            completed = counts.get("Completed", 0)
            valid = len(arrivals) - result.stats.unexpected
            result.history = f"{completed:,}" + (" ✓" if completed == valid else f" ≠ {valid:,} fired")
            if result.history_lag_s is not None and result.history_lag_s >= 1.0:
                result.history += f" (+{result.history_lag_s:.0f} s)"
            other = {k: v for k, v in counts.items() if k != "Completed"}
            if other:
                result.notes.append(f"history also has {other}")
        else:
            result.history = "none"
        if system == "aps" or system == "plain":
            text = (tmp / f"{system}.log").read_text(errors="replace")
            for line in text.splitlines():
                if line.startswith("done") and "failures=0" not in line:
                    result.notes.append(line)
    except Exception as exc:  # one failed run must not sink the others
        result.error = f"{type(exc).__name__}: {exc}"[:500]
        log(f"  {system} failed: {result.error}")
    finally:
        for emulator in emulators:
            emulator.stop()
        for process in processes:
            h.stop_process(process)
        nginx.stop()
        if pg_url and not opts.keep:
            with contextlib.suppress(Exception):
                h.drop_pg_database(pg_url)
        if opts.keep:
            log(f"  kept {tmp}" + (f" and {pg_url}" if pg_url else ""))
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return result


def start_profiler(pid: int, out: Path, seconds: float, nonblocking: bool = False,
                   tree: bool = False) -> subprocess.Popen[bytes] | None:
    """py-spy recording ``pid`` (``tree``: and the processes it forks, the dispatcher's and the action process)."""
    py_spy = shutil.which("py-spy") or str(Path(h.PYTHON).parent / "py-spy")
    if not Path(py_spy).exists():
        log("  py-spy not found (pip install -r bench/requirements.txt); no profile")
        return None
    args = [py_spy, "record", "-o", str(out), "--format", "raw", "-r", os.environ.get("BENCH_PYSPY_RATE", "100"),
            "-d", str(math.ceil(seconds)), "-p", str(pid),
            "--threads"]
    if os.environ.get("BENCH_PYSPY_NATIVE", "0") == "1":
        args.append("--native")
    if os.environ.get("BENCH_PYSPY_GIL", "0") == "1":  # only the thread holding the GIL: Python CPU, no waits
        args.append("--gil")
    if nonblocking:
        args.append("--nonblocking")
    if tree:
        args.append("--subprocesses")
    return subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=out.with_suffix(".log").open("wb"))


PACKAGES = ("scheduler_emulator", "sqlalchemy", "sqlite3", "psycopg", "httpx", "httpcore", "h11", "anyio",
            "aiohttp", "pydantic", "asyncio", "concurrent", "threading", "json", "uvicorn", "starlette", "fastapi")


def summarise_profile(path: Path, top: int = 15) -> str:
    """Shares of py-spy's raw (collapsed stack) samples: by thread (and process, for a profile of the process
    tree), self time by function and by package, and inclusive time of the emulator's own functions."""
    own: Counter[str] = Counter()
    by_package: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    threads: Counter[str] = Counter()
    total = 0
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return "(no profile written; see the .log next to it)"
    tree = any(line.startswith("process ") for line in lines)  # py-spy --subprocesses: shares by process too
    roles = process_roles(lines) if tree else {}
    for line in lines:
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = stack.split(";")
        pid = ""
        while frames and frames[0].startswith(("thread (", "process ")):
            if frames[0].startswith("process "):
                pid = frames[0].split(":", 1)[0]
            frames.pop(0)
        frames = [simplify(frame) for frame in frames]
        if not frames:
            continue
        total += count
        python = [f for f in frames if ".py)" in f]
        thread = ("main thread (event loop)" if any(f.startswith("<module>") for f in frames)
                  else "other threads (database work)")
        threads[f"{roles.get(pid, pid)}: {thread}" if tree else thread] += count
        leaf = frames[-1]
        own[leaf] += count
        package = next((p for p in PACKAGES if f"({p}/" in leaf or f"({p}." in leaf or f"/{p}/" in leaf), None)
        if package is None and python:  # a native leaf: charge it to the Python frame that called it
            caller = python[-1]
            package = next((p for p in PACKAGES if f"({p}/" in caller or f"/{p}/" in caller), "other")
            package += " (native)" if leaf not in python else ""
        by_package[package or "other"] += count
        for frame in set(frames):
            where = frame.split(" (", 1)[-1]
            outer = ("scheduler_emulator/cli.py", "scheduler_emulator/serving.py", "scheduler_emulator/__main__")
            if where.startswith("scheduler_emulator/") and not where.startswith(outer):
                inclusive[frame] += count
    if not total:
        return "(empty profile)"
    pct = lambda n: f"{100 * n / total:.1f}"  # noqa: E731
    by_thread = ", ".join(f"{k} {pct(v)}%" for k, v in threads.most_common())
    rows = [f"{total} non-idle samples; by {'process and ' if tree else ''}thread: " + by_thread,
            "", "| self % | function |", "|---:|---|"]
    rows += [f"| {pct(n)} | `{name}` |" for name, n in own.most_common(top)]
    rows += ["", "| self % | package (of the innermost frame) |", "|---:|---|"]
    rows += [f"| {pct(n)} | {name} |" for name, n in by_package.most_common(12)]
    rows += ["", "| inclusive % | emulator function |", "|---:|---|"]
    rows += [f"| {pct(n)} | `{name}` |" for name, n in inclusive.most_common(top + 5)]
    return "\n".join(rows)


def process_roles(lines: list[str]) -> dict[str, str]:
    """Which of the emulator's processes each ``process PID:"COMMAND LINE"`` frame of a --subprocesses profile is:
    the one whose command line ends in the dispatcher role's flags (``--no-api --supervised``: the child that the
    API's process starts, dispatcher/child.py) is the dispatcher role's, any other the API's process."""
    roles: dict[str, str] = {}
    for line in lines:
        frames = line.rpartition(" ")[0].split(";")
        for frame in frames:
            if frame.startswith("process "):
                pid = frame.split(":", 1)[0]
                roles[pid] = "dispatcher role's process" if "--no-api --supervised" in frame else "API's process"
    return roles


def simplify(frame: str) -> str:
    """'func (.../site-packages/pkg/module.py:123)' → 'func (pkg/module.py)'."""
    name, _, where = frame.partition(" (")
    where = where.rstrip(")").rsplit(":", 1)[0]
    parts = where.split("/")
    if "site-packages" in parts:
        parts = parts[parts.index("site-packages") + 1:]
    elif "src" in parts:
        parts = parts[parts.index("src") + 1:]
    return f"{name} ({'/'.join(parts)})" if where else name


# -- API throughput ---------------------------------------------------------------------------------


def run_api(store: str, seconds: float, concurrency: int, profile_dir: Path | None = None, *,
            flags: tuple[str, ...] = ()) -> list[dict[str, object]]:
    """The API alone, with default flags (info logs, dispatcher on) and ``flags``: one process on SQLite, two
    processes sharing the database on PostgreSQL (the clients split between them)."""
    tmp = Path(tempfile.mkdtemp(prefix="bench-api-"))
    pg_url = h.create_pg_database() if store == "pg" else None
    emulators = [h.Emulator(tmp / f"data{k}", pg_url, *flags, defaults=True) for k in range(2 if pg_url else 1)]
    rows: list[dict[str, object]] = []
    try:
        bases = [emulators[0].start()]
        bases += [e.start() for e in emulators[1:]]
        rows = asyncio.run(api_load(bases, [p for e in emulators for p in e.pids], seconds, concurrency,
                                    profile_dir / f"api-{store}.txt" if profile_dir else None))
        for row in rows:
            row["store"] = "SQLite" if store == "sqlite" else "PostgreSQL, 2 API processes"
    except Exception as exc:
        log(f"  API {store} failed: {exc}")
        rows = [{"store": store, "operation": "error", "error": str(exc)[:300]}]
    finally:
        for emulator in emulators:
            emulator.stop()
        if pg_url:
            with contextlib.suppress(Exception):
                h.drop_pg_database(pg_url)
        shutil.rmtree(tmp, ignore_errors=True)
    return rows


async def api_load(bases: list[str], pids: list[int], seconds: float, concurrency: int,
                   profile_to: Path | None = None) -> list[dict[str, object]]:
    """PUT phase then GET phase; client k talks to ``bases[k % len]``; new jobs are spread over
    ``h.USER_COLLECTIONS`` collections (job i into collection i % 30), as many clients' provisioning would."""
    import aiohttp  # a bench requirement; a lighter client than httpx, so the load generator leaves more CPU

    roots = [f"{h.arm_root(base)}/jobCollections" for base in bases]
    collections = max(h.USER_COLLECTIONS, math.ceil(4000 * seconds / h.JOBS_PER_COLLECTION))  # room for 4,000/s
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=30)) as client:
        for c in range(collections):
            async with client.put(f"{roots[0]}/api-{c:03d}", params=h.API, json={
                    "location": "westus", "properties": {"sku": {"name": "P20Premium"}}}) as response:
                response.raise_for_status()
        start = h.isoformat_z(datetime.now(UTC) + timedelta(days=1))
        created: list[str] = []
        counter = iter(range(10**9))

        def put_job(k: int) -> tuple[str, str, dict[str, object]]:
            i = next(counter)
            path = f"{roots[k % len(roots)]}/api-{i % collections:03d}/jobs/job-{i:07d}"
            created.append(path)
            body = {"properties": {"startTime": start, "action": {"type": "Http", "request": {
                "uri": "http://127.0.0.1:9/never", "method": "POST", "body": f"job {i}"}}}}
            return "PUT", path, body

        def get_job(k: int) -> tuple[str, str, dict[str, object]]:
            return "GET", random.choice(created), {}

        rows = []
        for operation, make in (("PUT job (create)", put_job), ("GET job", get_job)):
            rows.append(await phase(client, operation, make, pids, seconds, concurrency))
        if profile_to is not None:  # a further PUT phase under the profiler, kept out of the table (it slows it)
            profile_to.unlink(missing_ok=True)
            profiler = start_profiler(pids[0], profile_to, seconds)
            if os.environ.get("BENCH_PROFILE_OPERATION", "PUT") == "GET":  # the GETs' profile instead
                await phase(client, "GET job, profiled", get_job, pids, seconds, concurrency)
            else:
                await phase(client, "PUT job (create), profiled", put_job, pids, seconds, concurrency)
            if profiler is not None:
                await asyncio.to_thread(profiler.wait, 30)
        return rows


async def phase(client: object, operation: str, make: object, pids: list[int], seconds: float,
                concurrency: int) -> dict[str, object]:
    latencies: list[float] = []
    errors: Counter[int] = Counter()
    cpu_before = h.cpu_split_of(pids)[0]
    box_before = h.machine_jiffies()
    client_before = time.process_time()
    began = time.perf_counter()
    end = began + seconds

    async def worker(k: int) -> None:
        while time.perf_counter() < end:
            method, url, body = make(k)  # type: ignore[operator]
            sent = time.perf_counter()
            async with client.request(method, url, params=h.API, json=body or None) as response:  # type: ignore[attr-defined]
                await response.read()
            latencies.append(time.perf_counter() - sent)
            if response.status >= 300:
                errors[response.status] += 1

    await asyncio.gather(*(worker(k) for k in range(concurrency)))
    elapsed = time.perf_counter() - began
    latencies.sort()
    ok = len(latencies) - sum(errors.values())
    return {
        "operation": operation, "requests": len(latencies), "rps": ok / elapsed,
        "p50_ms": h.percentile(latencies, 0.5) * 1000, "p99_ms": h.percentile(latencies, 0.99) * 1000,
        "errors": dict(errors), "server_cpu": (h.cpu_split_of(pids)[0] - cpu_before) / elapsed,
        "box_cpu": h.machine_busy_pct(box_before, h.machine_jiffies()),
        "client_cpu": (time.process_time() - client_before) / elapsed,
    }


# -- a million jobs -------------------------------------------------------------------------------


def run_million(jobs: int, due_soon: int, idle_seconds: float, profile_to: Path | None = None,
                store: str = "sqlite", *, flags: tuple[str, ...] = ()) -> dict[str, Any]:
    """Start-up with ``jobs`` stored (``due_soon`` of them due at once): seconds to Listening and to the first
    fire, RSS, and idle CPU afterwards; on SQLite (rows cloned in Python) or PostgreSQL (rows made in SQL); the
    emulator started with ``flags`` besides its own."""
    tmp = Path(tempfile.mkdtemp(prefix="bench-million-"))
    nginx = h.Nginx(tmp / "nginx")
    result: dict[str, Any] = {"jobs": jobs, "due_soon": due_soon, "store": store}
    emulator = None
    pg_url = h.create_pg_database() if store == "pg" else None
    try:
        nginx.start()
        url = pg_url or f"sqlite:///{tmp / 'data' / 'scheduler.db'}"
        h.make_template(tmp / "data", url, f"{nginx.base_url}/fire/template")
        moment = datetime.now(UTC)
        far = timedelta(days=29)
        if pg_url:
            log(f"  inserting {jobs:,} jobs into PostgreSQL (INSERT ... SELECT)")
            result["insert_s"] = h.seed_jobs_in_sql(
                pg_url, jobs, due_soon, moment, far, f"{nginx.base_url}/fire/",
                progress=lambda done: log(f"    {done:,} jobs") if done % 2_000_000 == 0 else None)
            import psycopg
            with psycopg.connect(pg_url) as conn:
                result["db_mb"] = conn.execute("SELECT pg_database_size(current_database())").fetchone()[0] / 2**20
        else:
            due = [moment if i < due_soon else moment + timedelta(days=1) + far * (i - due_soon) / jobs
                   for i in range(jobs)]
            log(f"  inserting {jobs:,} jobs into SQLite")
            result["insert_s"] = h.seed_jobs(url, due, lambda i: f"{nginx.base_url}/fire/{i}", batch=20000)
            del due
            db_file = tmp / "data" / "scheduler.db"
            result["db_mb"] = sum(p.stat().st_size for p in db_file.parent.glob("scheduler.db*")) / 2**20
        emulator = h.Emulator(tmp / "data", pg_url, *flags)
        emulator.spawn()
        emulator.wait_listening(120)
        result["listening_s"] = emulator.listening_at - emulator.spawned_at
        deadline = time.monotonic() + 120
        while nginx.lines() < due_soon and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(1.2)  # the log buffer flushes every second
        arrivals = sorted(a[0] for a in nginx.arrivals())
        result["fired"] = len(arrivals)
        if arrivals:
            result["first_fire_s"] = arrivals[0] - emulator.spawned_at
            result["last_due_fire_s"] = arrivals[min(len(arrivals), due_soon) - 1] - emulator.spawned_at
        # with its dispatcher and action processes: RSS summed (shared pages counted twice), CPU summed
        family = emulator.pids
        result["rss_mb"] = sum(h.proc_status_kb(pid, "VmRSS") or 0 for pid in family) / 1024
        time.sleep(2)
        profiler = start_profiler(emulator.pid, profile_to, idle_seconds, nonblocking=True) if profile_to else None
        cpu_before = h.cpu_split_of(family)[0]
        box_before = h.machine_jiffies()
        time.sleep(idle_seconds)
        result["box_cpu"] = h.machine_busy_pct(box_before, h.machine_jiffies())
        result["idle_cpu_pct"] = 100 * (h.cpu_split_of(family)[0] - cpu_before) / idle_seconds
        result["idle_s"] = idle_seconds
        result["peak_rss_mb"] = sum(h.proc_status_kb(pid, "VmHWM") or 0 for pid in family) / 1024
        result["rss_after_idle_mb"] = sum(h.proc_status_kb(pid, "VmRSS") or 0 for pid in family) / 1024
        if profiler is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                profiler.wait(30)
            h.stop_process(profiler)
        errors = emulator.errors_logged()
        if errors:
            result["log"] = errors[:3]
    except Exception as exc:
        result["error"] = f"{type(exc).__name__}: {exc}"[:500]
        log(f"  million failed: {result['error']}")
    finally:
        if emulator is not None:
            emulator.stop()
        nginx.stop()
        if pg_url:
            with contextlib.suppress(Exception):
                h.drop_pg_database(pg_url)
        shutil.rmtree(tmp, ignore_errors=True)
    return result


# -- the report -------------------------------------------------------------------------------------


def fmt(value: float | None, digits: int = 0) -> str:
    return "—" if value is None else f"{value:,.{digits}f}"


def fire_table(results: list[h.Measured]) -> str:
    rows = ["| demand | system | jobs | fired | fires/s | on time (≤1 s) | p50 ms | p99 ms | max ms | missed | dup "
            "| history rows | peak RSS MB | CPU s | CPU ms/fire | box CPU |",
            "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|"]
    for r in results:
        s = r.stats
        if s is None:
            rows.append(f"| {r.demand:,.0f}/s | {r.system} | failed: {r.error} |" + " |" * 13)
            continue
        rows.append(
            f"| {r.demand:,.0f}/s | {r.system} | {s.jobs:,} | {s.fired:,} | {s.achieved:,.0f} | {100 * s.on_time:.1f}% "
            f"| {fmt(s.p50_ms)} | {fmt(s.p99_ms)} | {fmt(s.max_ms)} | {s.missed:,} | {s.duplicates:,} | {r.history} "
            f"| {fmt(r.peak_rss_mb)} | {fmt(r.cpu_s, 1)} "
            f"| {fmt(1000 * r.cpu_s / max(1, s.fired + s.late_after_deadline) if r.cpu_s is not None else None, 2)} "
            f"| {fmt(r.box_busy_pct)}% |"
        )
    notes = [f"- {r.demand:,.0f}/s {r.system}: {note}" for r in results for note in r.notes]
    return "\n".join(rows + ([""] + notes if notes else []))


def ab_table(results: list[h.Measured]) -> str:
    """Every fire-rate run of the variants side by side, in the order run, each with the plain loop's CPU per
    fire of the same round and rate (the machine's state then); then the median of each variant's runs."""
    plain = {(r.round, round(r.demand)): cpu_ms_per_fire(r) for r in results if r.system == SYSTEMS["plain"]}
    rows = ["| round | demand | system | variant | fires/s | p99 ms | missed | GET p99 ms | CPU ms/fire (process tree) "
            "| plain loop CPU ms/fire | ratio to plain | processes | peak RSS MB, summed | box CPU |",
            "|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    groups: dict[tuple[float, str, str], list[h.Measured]] = {}
    for r in results:
        if r.system == SYSTEMS["plain"] or r.system == SYSTEMS["aps"]:
            continue
        base = r.system.removesuffix(f" [{r.variant}]") if r.variant else r.system
        groups.setdefault((r.demand, base, r.variant), []).append(r)
        ceiling = plain.get((r.round, round(r.demand)))
        per = cpu_ms_per_fire(r)
        if r.stats is None:
            rows.append(f"| {r.round} | {r.demand:,.0f}/s | {base} | {r.variant or '—'} | failed: {r.error} "
                        "| | | | | | | | | |")
            continue
        ratio = f"{per / ceiling:.1f}×" if per and ceiling else "—"
        rows.append(f"| {r.round} | {r.demand:,.0f}/s | {base} | {r.variant or '—'} | {r.stats.achieved:,.0f} "
                    f"| {fmt(r.stats.p99_ms)} | {r.stats.missed:,} | {fmt(get_p99(r), 1)} | {fmt(per, 3)} "
                    f"| {fmt(ceiling, 3)} | {ratio} "
                    f"| {r.processes} | {fmt(r.peak_rss_total_mb)} | {fmt(r.box_busy_pct)}% |")
    rows += ["", "Median over the rounds:", "",
             "| demand | system | variant | runs | fires/s | p99 ms | GET p99 ms | CPU ms/fire "
             "| plain loop CPU ms/fire | peak RSS MB, summed |",
             "|---:|---|---|---:|---:|---:|---:|---:|---:|---:|"]

    def median(values: list[float | None]) -> float | None:
        known = sorted(v for v in values if v is not None)
        if not known:
            return None
        middle = len(known) // 2
        return known[middle] if len(known) % 2 else (known[middle - 1] + known[middle]) / 2

    for (demand, base, variant), runs in sorted(groups.items(), key=lambda item: (item[0][0], item[0][1])):
        done = [r for r in runs if r.stats is not None]
        ceilings = [plain.get((r.round, round(r.demand))) for r in done]
        rows.append(f"| {demand:,.0f}/s | {base} | {variant or '—'} | {len(done)} "
                    f"| {fmt(median([r.stats.achieved for r in done if r.stats]))} "
                    f"| {fmt(median([r.stats.p99_ms for r in done if r.stats]))} "
                    f"| {fmt(median([get_p99(r) for r in done]), 1)} "
                    f"| {fmt(median([cpu_ms_per_fire(r) for r in done]), 3)} | {fmt(median(ceilings), 3)} "
                    f"| {fmt(median([r.peak_rss_total_mb for r in done]))} |")
    return "\n".join(rows)


def get_p99(r: h.Measured) -> float | None:
    """p99 of the GET job requests sent while the window ran (the user's path), if any."""
    return r.gets.get("p99_ms") if r.gets else None


def api_table(rows: list[dict[str, object]]) -> str:
    out = ["| store | operation | requests | req/s | p50 ms | p99 ms | errors | server CPU | server CPU ms/req "
           "| load generator CPU | box CPU |",
           "|---|---|---:|---:|---:|---:|---|---:|---:|---:|---:|"]
    for r in rows:
        if r.get("operation") == "error":
            out.append(f"| {r['store']} | failed: {r.get('error')} | | | | | | | | | |")
            continue
        errors = ", ".join(f"{k}×{v}" for k, v in r["errors"].items()) or "0"  # type: ignore[attr-defined]
        out.append(f"| {r['store']} | {r['operation']} | {r['requests']:,} | {r['rps']:,.0f} | {r['p50_ms']:.1f} "
                   f"| {r['p99_ms']:.1f} | {errors} | {100 * r['server_cpu']:.0f}% "  # type: ignore[operator]
                   f"| {1000 * r['server_cpu'] / max(r['rps'], 1e-9):.2f} "  # type: ignore[operator]
                   f"| {100 * r.get('client_cpu', 0):.0f}% | {r['box_cpu']:.0f}% |")  # type: ignore[operator]
    return "\n".join(out)


def million_table(m: dict[str, Any]) -> str:
    if "error" in m:
        return f"failed: {m['error']}"
    g = m.get
    lines = [
        "| jobs (due now) | insert s | DB MB | start → Listening s | start → first fire s | start → all due fired s "
        "| RSS after start MB | peak RSS MB | idle CPU |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        f"| {m['jobs']:,} ({m['due_soon']:,}) | {fmt(g('insert_s'), 1)} | {fmt(g('db_mb'))} "
        f"| {fmt(g('listening_s'), 2)} | {fmt(g('first_fire_s'), 2)} | {fmt(g('last_due_fire_s'), 2)} "
        f"| {fmt(g('rss_mb'))} | {fmt(g('peak_rss_mb'))} | {fmt(g('idle_cpu_pct'), 2)}% over {fmt(g('idle_s'))} s |",
    ]
    lines.append(f"\nThe machine (all processes) was {fmt(g('box_cpu'))}% busy during the idle measurement.")
    if m.get("fired") != m.get("due_soon"):
        lines.append(f"\n{m.get('fired')} of the {m['due_soon']} due jobs fired within 120 s.")
    if m.get("log"):
        lines.append(f"\nemulator log: {m['log']}")
    return "\n".join(lines)


def cpu_ms_per_fire(r: h.Measured) -> float | None:
    if r.stats is None or r.cpu_s is None:
        return None
    return 1000 * r.cpu_s / max(1, r.stats.fired + r.stats.late_after_deadline)


def targets(fire: list[h.Measured], million: list[dict[str, Any]], api_rows: list[dict[str, object]],
            api_concurrency: int) -> str:
    """Issue 33's targets on the user's path (and issue 19's and the start-up ones), each met or missed and by
    how much."""
    by = {(r.system, round(r.demand)): r for r in fire if r.stats is not None}
    out = ["| target | measured | met |", "|---|---|---|"]

    def row(target: str, measured: str, ok: bool | None) -> None:
        out.append(f"| {target} | {measured} | {'—' if ok is None else ('yes' if ok else '**no**')} |")

    def get(system: str, rate: int, path: str = "user") -> h.Measured | None:
        return by.get((label(system, path), rate))

    def short(value: float, bound: float, above: bool = False) -> str:
        """How far a measure is from its bound, when it misses it."""
        if not bound or (value >= bound if above else value <= bound):
            return ""
        return f" ({abs(value / bound - 1) * 100:.0f} % {'short' if above else 'over'})"

    plain = get("plain", 3000)
    for system in ("sqlite", "pg1"):
        r = get(system, 1000)
        if r is not None and r.stats is not None:
            s = r.stats
            p99 = s.p99_ms if s.p99_ms is not None else 1e9
            row(f"1,000/s, {r.system}: p99 lateness ≤ 5 ms, nothing missed, history persisted",
                f"p99 {fmt(s.p99_ms)} ms{short(p99, 5)}, missed {s.missed}, history {r.history}",
                p99 <= 5 and s.missed == 0 and "✓" in r.history)
        r = get(system, 3000)
        if r is not None and r.stats is not None:
            p99 = r.stats.p99_ms if r.stats.p99_ms is not None else 1e9
            if plain is not None and plain.stats is not None:
                ratio = r.stats.achieved / plain.stats.achieved
                row(f"3,000/s, {r.system}: ≥ 0.9 × the plain loop's rate, p99 ≤ 100 ms",
                    f"{r.stats.achieved:,.0f} / {plain.stats.achieved:,.0f}/s = {ratio:.2f}×{short(ratio, 0.9, True)}, "
                    f"p99 {fmt(r.stats.p99_ms)} ms{short(p99, 100)}", ratio >= 0.9 and p99 <= 100)
            if r.gets and r.gets.get("p99_ms") is not None:
                row(f"3,000/s, {r.system}: GET job p99 ≤ 20 ms while the fires run",
                    f"p99 {r.gets['p99_ms']:.1f} ms{short(r.gets['p99_ms'], 20)} ({r.gets['requests']:,} GETs)",
                    r.gets["p99_ms"] <= 20)
        quiet = get(system, 3000, "quiet")
        if r is not None and r.stats is not None and quiet is not None and quiet.stats is not None:
            ratio = r.stats.achieved / quiet.stats.achieved
            per, per_quiet = cpu_ms_per_fire(r), cpu_ms_per_fire(quiet)
            cpu = f"; CPU per fire {per:.3f} vs {per_quiet:.3f} ms" if per and per_quiet else ""
            row(f"3,000/s, {SYSTEMS[system]}: info logging costs ≤ 10 % of the fire rate",
                f"{r.stats.achieved:,.0f} (info) / {quiet.stats.achieved:,.0f}/s (warning) = {ratio:.2f}×{cpu}",
                ratio >= 0.9)
    one, three = get("pg1", 3000), get("pg3", 3000)
    if one and three and one.stats and three.stats:
        p99 = three.stats.p99_ms if three.stats.p99_ms is not None else 1e9
        ok = (three.stats.achieved >= 0.95 * one.stats.achieved and p99 <= 250 and three.stats.duplicates == 0
              and three.stats.missed == 0)
        row(f"3,000/s, PostgreSQL ×3 vs ×1 ({PATHS['user']}): no rate lost (≥ 95 %), p99 ≤ 250 ms, no duplicates",
            f"{three.stats.achieved:,.0f} vs {one.stats.achieved:,.0f}/s, p99 {fmt(three.stats.p99_ms)} ms, "
            f"dup {three.stats.duplicates}, missed {three.stats.missed}", ok)
    for system in ("sqlite", "pg1"):
        r = get(system, 3000, "seeded")
        per_fire = cpu_ms_per_fire(r) if r is not None else None
        if r is not None and per_fire is not None:
            row(f"(issue 19) 3,000/s, {r.system}: CPU per fire ≤ 0.25 ms", f"{per_fire:.2f} ms{short(per_fire, 0.25)}",
                per_fire <= 0.25)
    for r in api_rows:
        if not str(r.get("operation", "")).startswith("PUT"):
            continue
        pg = r.get("store") != "SQLite"
        bound = 1000 if pg else 500
        rps = float(r["rps"])  # type: ignore[arg-type]
        row(f"API on {r.get('store')}, {api_concurrency} concurrent clients: ≥ {bound:,} job PUT/s",
            f"{rps:,.0f}/s{short(rps, bound, True)}, errors {r['errors'] or 0}", rps >= bound)
    for m in million:
        if "error" in m:
            row(f"start-up, {m['jobs']:,} jobs ({m.get('store')})", f"failed: {m['error']}", False)
            continue
        pg = m.get("store") == "pg"
        jobs = f"{m['jobs']:,} jobs ({'PostgreSQL' if pg else 'SQLite'})"
        first = m.get("first_fire_s") if pg else m.get("listening_s")
        first = first if first is not None else 1e9
        row(f"{jobs}: start {'to first fire' if pg else 'to Listening'} < 10 s",
            f"{fmt(m.get('listening_s'), 2)} s to Listening, {fmt(m.get('first_fire_s'), 2)} s to first fire"
            f"{short(first, 10)}", first < 10)
        limit = 500 if pg else 1024
        rss = m.get("peak_rss_mb") or 1e9
        row(f"{jobs}: RSS < {limit:,} MB", f"{fmt(m.get('peak_rss_mb'))} MB peak{short(rss, limit)}", rss < limit)
        idle = m.get("idle_cpu_pct")
        idle = idle if idle is not None else 1e9
        row(f"{jobs}: idle CPU < 2 %", f"{fmt(m.get('idle_cpu_pct'), 2)} %{short(idle, 2)}", idle < 2)
    aps = get("aps", 1000)
    if aps and aps.stats:
        row("(reference) APScheduler at 1,000/s", f"{aps.stats.achieved:,.0f}/s, p99 {fmt(aps.stats.p99_ms)} ms", None)
    return "\n".join(out)


def git_commit() -> str:
    with contextlib.suppress(Exception):
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=h.ROOT, capture_output=True,
                              text=True, timeout=5).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "src"], cwd=h.ROOT, capture_output=True,
                               text=True, timeout=5).stdout.strip()
        return head + (" + uncommitted changes in src/" if dirty else "")
    return "?"


# -- main ---------------------------------------------------------------------------------------------


def report_fire(r: h.Measured, jobs: int) -> None:
    if r.stats:
        s = r.stats
        log(f"  {s.fired:,}/{jobs:,} fired, {s.achieved:,.0f}/s, p50 {fmt(s.p50_ms)} p99 {fmt(s.p99_ms)} "
            f"max {fmt(s.max_ms)} ms, missed {s.missed}, dup {s.duplicates}, history {r.history}, "
            f"RSS {fmt(r.peak_rss_mb)} MB, CPU {fmt(r.cpu_s, 1)} s ({fmt(cpu_ms_per_fire(r), 3)} ms/fire), "
            f"margin {fmt(r.margin_s, 1)} s")
        if r.gets:
            log(f"  GET during the window: p99 {fmt(r.gets['p99_ms'], 1)} ms of {r.gets['requests']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short smoke run (3 s windows, 100,000-job start-up)")
    parser.add_argument("--scenarios",
                        help="comma-separated: fire, api, million, profile (default: all; --quick: fire,api,million)")
    parser.add_argument("--systems", default=",".join(SYSTEMS), help=f"fire-rate systems: {', '.join(SYSTEMS)}")
    parser.add_argument("--rates", help="demanded fires/s, comma-separated (default 200,1000,3000)")
    parser.add_argument("--window", type=float, help="seconds over which the jobs are due (default 10)")
    parser.add_argument("--drain", type=float, help="seconds after the window before unfired jobs count as missed")
    parser.add_argument("--history-wait", type=float,
                        help="seconds to wait after the last fire for the history rows (default 120, quick 30)")
    parser.add_argument("--paths", help="how the emulator's jobs are made: user (through the API, default flags), "
                        "quiet (through the API, --log-level warning; top rate only), seeded (dispatcher only); "
                        "default user,quiet,seeded (--quick: user,seeded)")
    parser.add_argument("--get-rate", type=float, default=100.0,
                        help="GET job requests/s sent during the user's path window (default 100)")
    parser.add_argument("--api-seconds", type=float, help="seconds per API phase (default 10)")
    parser.add_argument("--api-concurrency", type=int, default=16)
    parser.add_argument("--api-stores", default=None, help="sqlite,pg (default both; sqlite with --quick)")
    parser.add_argument("--million-jobs", type=int, help="jobs for the SQLite start-up scenario (default 1,000,000)")
    parser.add_argument("--million-jobs-pg", type=int,
                        help="jobs for the PostgreSQL start-up scenario (default 10,000,000; --quick 100,000)")
    parser.add_argument("--million-stores", help="sqlite,pg (default both; sqlite with --quick)")
    parser.add_argument("--idle-seconds", type=float, default=20.0)
    parser.add_argument("--quiet-threshold", type=float, default=50.0,
                        help="before each run, wait for the machine to be at most this busy (%% of one core)")
    parser.add_argument("--quiet-wait", type=float, help="longest wait before one run (default 30 s, quick 5 s)")
    parser.add_argument("--quiet-budget", type=float, help="longest total wait (default 300 s, quick 30 s)")
    parser.add_argument("--output", default=str(h.BENCH_DIR / "results.md"), help="where to write the table")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directories (logs, databases)")
    parser.add_argument("--emulator-args", default="",
                        help="flags added to every emulator process's command line, "
                        "e.g. --emulator-args='--action-process off'")
    parser.add_argument("--variant", action="append", default=[], metavar="NAME=FLAGS",
                        help="repeatable: measure the emulator started with FLAGS (besides --emulator-args) under "
                        "NAME, each variant beside the others for every scenario, e.g. --variant default= "
                        "--variant off='--action-process off'; adds an A/B table")
    parser.add_argument("--repeat", type=int, default=1,
                        help="rounds of the fire-rate runs (the variants in A B, then B A order: drift hits both)")
    opts = parser.parse_args()
    try:
        opts.emulator_args = tuple(shlex.split(opts.emulator_args))
        variants = [Variant.parse(text) for text in opts.variant] or [DEFAULT]
    except ValueError as exc:
        parser.error(str(exc))
    if len({v.name for v in variants}) != len(variants):
        parser.error("--variant names must differ")
    if not 1 <= opts.repeat <= 20:
        parser.error("--repeat: 1 to 20 rounds")
    quick = opts.quick
    rates = [float(x) for x in (opts.rates or ("1000,3000" if quick else "200,1000,3000")).split(",")]
    window = opts.window or (3.0 if quick else 10.0)
    opts.drain = opts.drain or (20.0 if quick else 45.0)
    opts.history_wait = opts.history_wait if opts.history_wait is not None else (30.0 if quick else 120.0)
    api_seconds = opts.api_seconds or (3.0 if quick else 10.0)
    api_stores = (opts.api_stores or ("sqlite" if quick else "sqlite,pg")).split(",")
    million_jobs = opts.million_jobs or (100_000 if quick else 1_000_000)
    million_jobs_pg = opts.million_jobs_pg or (100_000 if quick else 10_000_000)
    million_stores = (opts.million_stores or ("sqlite" if quick else "sqlite,pg")).split(",")
    scenarios = set((opts.scenarios or ("fire,api,million" if quick else "fire,api,million,profile")).split(","))
    quiet = h.Quiet(opts.quiet_threshold, opts.quiet_wait or (5.0 if quick else 30.0),
                    opts.quiet_budget or (30.0 if quick else 300.0))

    def settle() -> None:
        waited, busy = quiet.wait()
        if waited > 2.5:
            log(f"  waited {waited:.0f} s for the machine to calm down (now {busy:.0f}% busy)")
    paths = (opts.paths or ("user,seeded" if quick else "user,quiet,seeded")).split(",")
    if set(paths) - set(PATHS):
        parser.error(f"unknown paths {sorted(set(paths) - set(PATHS))}")
    systems = [s for s in opts.systems.split(",") if s]
    unknown = [s for s in systems if s not in SYSTEMS]
    if unknown:
        parser.error(f"unknown systems {unknown}")
    if not shutil.which("nginx") and scenarios & {"fire", "million", "profile"}:
        raise SystemExit("nginx not found: apt-get install -y nginx")

    started = time.monotonic()
    header = [
        "# Benchmark results\n",
        f"`python bench/run.py {' '.join(sys.argv[1:])}` — {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, "
        f"commit {git_commit()}; "
        f"{os.cpu_count()} cores ({platform.processor() or platform.machine()}), Python {platform.python_version()}; "
        f"one machine shared by the emulator, nginx, PostgreSQL and the load generator. "
        f"Load average at start: {h.loadavg()}.",
    ]
    sections: list[str] = []
    fire: list[h.Measured] = []
    million: list[dict[str, Any]] = []
    api_rows: list[dict[str, object]] = []
    if "fire" in scenarios:
        for round_number in range(1, opts.repeat + 1):
            ordered = variants if round_number % 2 else variants[::-1]  # A B, then B A: drift hits both
            for rate in rates:
                jobs = int(rate * window)
                for system in systems:
                    for path in (paths if system in EMULATOR_SYSTEMS else ["seeded"]):
                        if path == "quiet" and rate != max(rates):
                            continue  # what logging costs: at the top rate only
                        for variant in (ordered if system in EMULATOR_SYSTEMS else [DEFAULT]):
                            settle()
                            log(f"fire{f' (round {round_number})' if opts.repeat > 1 else ''}: "
                                f"{label(system, path, variant)}: {jobs:,} jobs over {window:g} s "
                                f"(load {h.loadavg()})")
                            r = run_fire(system, jobs, window, opts, path=path, variant=variant)
                            r.variant, r.round = variant.name, round_number
                            fire.append(r)
                            report_fire(r, jobs)
        sections += [f"## Fire rate and lateness ({window:g} s windows)\n", fire_table(fire)]
        if len(variants) > 1 or opts.repeat > 1:
            sections += ["## A/B: each run, in the order run\n", ab_table(fire)]
    if "api" in scenarios:
        rows = []
        api_profiles = None
        if "profile" in scenarios:
            api_profiles = h.BENCH_DIR / "profiles"
            api_profiles.mkdir(exist_ok=True)
        for store in api_stores:
            for variant in variants:
                settle()
                named = f" [{variant.name}]" if variant.name else ""
                log(f"api: {store}{named}, {api_seconds:g} s per phase, {opts.api_concurrency} concurrent")
                measured = run_api(store, api_seconds, opts.api_concurrency, api_profiles,
                                   flags=(*opts.emulator_args, *variant.args))
                for row in measured:
                    row["store"] = f"{row['store']}{named}"
                rows += measured
        api_rows = rows
        sections += [f"## API throughput ({opts.api_concurrency} concurrent requests, {api_seconds:g} s per "
                     "operation, one aiohttp.ClientSession in the benchmark process)\n", api_table(rows)]
        if api_profiles is not None:
            sections += ["Profiles of the server during PUT job (py-spy record, in a further PUT phase after the "
                         "measured ones, so the table above ran without the profiler):"]
            for store in api_stores:
                sections += [f"### PUT job, {store}; raw stacks: `bench/profiles/api-{store}.txt`\n",
                             summarise_profile(api_profiles / f"api-{store}.txt", top=10)]
    if "million" in scenarios:
        for store in million_stores:
            count = million_jobs_pg if store == "pg" else million_jobs
            name = "PostgreSQL" if store == "pg" else "SQLite"
            settle()
            log(f"million: {count:,} jobs on {name}")
            idle_profile = None
            if "profile" in scenarios:
                (h.BENCH_DIR / "profiles").mkdir(exist_ok=True)
                idle_profile = h.BENCH_DIR / "profiles" / f"million-idle-{store}.txt"
                idle_profile.unlink(missing_ok=True)
            for variant in variants:
                result = run_million(count, 1000, opts.idle_seconds, idle_profile, store,
                                     flags=(*opts.emulator_args, *variant.args))
                result["variant"] = variant.name
                million.append(result)
                named = f" [{variant.name}]" if variant.name else ""
                sections += [f"## Start-up with {count:,} jobs ({name}){named}\n", million_table(result)]
            if idle_profile is not None:
                sections += [f"### Profile of the idle {count:,}-job process on {name} (py-spy --nonblocking, "
                             f"during the idle measurement); raw stacks: `bench/profiles/{idle_profile.name}`\n",
                             summarise_profile(idle_profile)]
    if "profile" in scenarios:
        top = max(rates)
        jobs = int(top * window)
        profile_dir = h.BENCH_DIR / "profiles"
        profile_dir.mkdir(exist_ok=True)
        parts = [f"## Profile of the dispatcher at {top:,.0f}/s (py-spy record, separate run; the profiler "
                 "slows it down)\n"]
        for system in [s for s in systems if s in ("sqlite", "pg1")]:
            for path in [p for p in paths if p != "quiet"]:  # the user's path and the dispatcher alone
                out = profile_dir / f"{system}-{path}-{top:.0f}.txt"
                out.unlink(missing_ok=True)
                settle()
                log(f"profile: {label(system, path)}: {jobs:,} jobs over {window:g} s")
                r = run_fire(system, jobs, window, opts, profile_to=out, path=path)
                s = r.stats
                summary = (f"{s.fired:,} fired, {s.achieved:,.0f}/s, p99 {fmt(s.p99_ms)} ms" if s else str(r.error))
                parts += [f"### {label(system, path)} ({summary}); raw stacks: `bench/profiles/{out.name}`\n",
                          summarise_profile(out), ""]
        sections += parts
    if fire or million or api_rows:
        sections += ["## Targets\n", targets(fire, million, api_rows, opts.api_concurrency)]
    elapsed = time.monotonic() - started
    text = (
        "\n".join(header) + "\n\n" + "\n\n".join(sections)
        + f"\n\nTotal run time {elapsed / 60:.1f} min; load average at end {h.loadavg()}; "
        f"commit at end {git_commit()}.\n"
    )
    print(text)
    Path(opts.output).write_text(text)
    h.dump_json(Path(opts.output).with_suffix(".json"), {
        "fire": [asdict(r) for r in fire], "million": million,
    })
    log(f"written {opts.output} ({elapsed / 60:.1f} min)")


if __name__ == "__main__":
    main()
