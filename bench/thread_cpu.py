"""Where a fire's CPU goes, by process and thread: one emulator on SQLite, jobs made through its API as a user
makes them (``user``: default flags; ``quiet``: ``--log-level warning``), fired at nginx; the CPU each thread of
each of its processes (the API's and the dispatcher role's child) used from just before the window until
``--drain`` seconds after it, per fire, named as py-spy names them (``MainThread`` is a process's event loop;
``uvloop_N`` the default executor, where the dispatcher's claims and writes run; ``sqlite-writer``/``sqlite-reader``
the API's database threads; ``log-writer`` the log lines).
Reads ``/proc/<pid>/task``, so CPU time, not wall time: a busy machine moves it less than it moves rates.

    .venv/bin/python bench/thread_cpu.py --paths user,quiet --rate 3000 --get-rate 0
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import harness as h

TICK = os.sysconf("SC_CLK_TCK")


def thread_cpu(pid: int) -> dict[int, float]:
    """CPU seconds (user + system) of each thread of ``pid``, by thread id."""
    seconds = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            fields = Path(f"/proc/{pid}/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # ended meanwhile
        seconds[int(tid)] = (int(fields[11]) + int(fields[12])) / TICK
    return seconds


def thread_names(pid: int) -> dict[int, str]:
    """Thread id → Python thread name (from ``py-spy dump``), numbered pools folded into ``name_N``."""
    py_spy = shutil.which("py-spy") or str(Path(h.PYTHON).parent / "py-spy")
    dump = subprocess.run([py_spy, "dump", "--pid", str(pid)], capture_output=True, text=True, timeout=60).stdout
    names = {}
    for line in dump.splitlines():
        if found := re.match(r'Thread (\d+) \(\w+\): "(.*)"', line):
            names[int(found.group(1))] = re.sub(r"_\d+$", "_N", found.group(2))
    return names


def profile(pid: int, out: Path, seconds: float) -> subprocess.Popen[bytes]:
    """py-spy sampling ``pid``'s threads while they hold the interpreter lock (``--gil``), 250 Hz, raw stacks."""
    py_spy = shutil.which("py-spy") or str(Path(h.PYTHON).parent / "py-spy")
    out.parent.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen([py_spy, "record", "-o", str(out), "--format", "raw", "-r", "250", "-d",
                             str(int(seconds)), "-p", str(pid), "--threads", "--gil"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def process_roles(pid: int) -> dict[int, str]:
    """The emulator's processes, pid → role: ``api`` (the one started) and ``dispatcher``, the child whose command
    line ends in the dispatcher role's flags (``--no-api --supervised``: dispatcher/child.py)."""
    roles = {pid: f"api (pid {pid})"}
    for child in h.children_of(pid):
        try:
            command = Path(f"/proc/{child}/cmdline").read_bytes().decode().rstrip("\0").split("\0")
        except OSError:  # ended meanwhile
            continue
        if command[-2:] == ["--no-api", "--supervised"]:
            roles[child] = f"dispatcher (pid {child})"
    return roles


def run(path: str, jobs: int, window: float, get_rate: float, drain: float, profile_dir: Path | None = None) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="bench-threads-"))
    nginx = h.Nginx(tmp / "nginx")
    nginx.start()
    quiet = ["--log-level", "warning"] if path == "quiet" else []
    emulator = h.Emulator(tmp / "emulator", f"sqlite:///{tmp / 'store' / 'scheduler.db'}", *quiet, defaults=True)
    try:
        emulator.start()
        lead = 20 + jobs / 300  # creating them takes jobs / (300-800 PUT/s)
        t0_us = h.now_us() + int(lead * 1e6)
        due = [h.due_instant(t0_us, int(window * 1e6), i, jobs) for i in range(jobs)]
        created = h.create_jobs_via_api([emulator.url], due, lambda i: f"{nginx.base_url}/fire/{i}")
        if h.now_us() > t0_us - 1e6:
            sys.exit(f"creating {jobs:,} jobs took {created.seconds:.0f} s, past the window's start: fewer jobs?")
        get_load = h.GetLoad(emulator.url, jobs, h.user_collections(jobs), get_rate) if get_rate > 0 else None
        while h.now_us() < t0_us - 200_000:
            time.sleep(0.05)
        # The process tree: the API's process and, on two CPUs or more, the dispatcher role's child.
        roles = process_roles(emulator.pid)
        before = {pid: thread_cpu(pid) for pid in roles}
        profilers = [profile(pid, profile_dir / f"{path}-{role.split()[0]}.txt", window + drain)
                     for pid, role in roles.items() if profile_dir is not None]
        if get_load is not None:
            get_load.start(window)
        time.sleep(window + drain)
        after = {pid: thread_cpu(pid) for pid in roles}
        for profiler in profilers:
            profiler.wait(60)
        if get_load is not None:
            get_load.join()
        fired = len(nginx.arrivals())
        by_name: dict[str, float] = {}
        for pid, role in roles.items():
            names = thread_names(pid)
            for tid, seconds in after[pid].items():
                name = f"{role}: {names.get(tid, f'thread {tid}')}"
                by_name[name] = by_name.get(name, 0.0) + seconds - before[pid].get(tid, 0.0)
        total = sum(by_name.values())
        print(f"{path}: {fired:,} of {jobs:,} fired ({jobs / window:,.0f}/s demanded, GET {get_rate:g}/s); "
              f"{created.rate:,.0f} PUT/s to create them")
        for name, seconds in sorted(by_name.items(), key=lambda item: -item[1]):
            if seconds > 0:
                print(f"  {name:<44} {seconds:6.2f} s  {1e6 * seconds / max(1, fired):6.1f} µs per fire")
        print(f"  {'all threads, all processes':<44} {total:6.2f} s  {1e6 * total / max(1, fired):6.1f} µs per fire")
    finally:
        emulator.stop()
        nginx.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--paths", default="user,quiet", help="user, quiet (comma-separated, run in this order)")
    parser.add_argument("--rate", type=float, default=3000.0, help="fires/s demanded")
    parser.add_argument("--window", type=float, default=10.0, help="seconds over which the jobs fall due")
    parser.add_argument("--get-rate", type=float, default=0.0, help="GET job requests/s during the window")
    parser.add_argument("--drain", type=float, default=5.0, help="seconds counted after the window")
    parser.add_argument("--profile", type=Path, help="also write py-spy stacks (--gil) of the emulator's process "
                        "and of its dispatcher role's child over the window to this directory, as PATH-api.txt and "
                        "PATH-dispatcher.txt")
    args = parser.parse_args()
    for path in args.paths.split(","):
        run(path.strip(), int(args.rate * args.window), args.window, args.get_rate, args.drain, args.profile)


if __name__ == "__main__":
    main()
