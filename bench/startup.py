"""What starting an emulator process costs: the CPU of importing the package (a new interpreter's CPU once the
imports are done), and the wall time and CPU from exec'ing ``python -m scheduler_emulator --port 0 --data-dir D``
to its "Listening on" line, plus the CPU of its whole life when stopped (SIGTERM) right then, on SQLite with a
fresh data dir, on SQLite with an existing (already migrated) one, and on an existing PostgreSQL database. The
test suite starts a couple of hundred emulator processes, so each 0.1 s of CPU here is felt. A benchmark, not a
test.

With ``--first-fire`` each start is measured as a user sees it instead: the wall seconds from exec to the first
``GET /_emulator/health`` that answers 200 (asked every 10 ms on a port chosen beforehand), and to the first fire
of a job created (PUT, ``startTime`` now, an Http action to a target in this process) as soon as it did. And, as
the wall time of a start is mostly the machine's load on a shared host, the CPU that decides it on an idle one
with two CPUs: the emulator's CPU until its dispatcher role's child appears (``pre``), its CPU from then until
health answers (``post``), and the child's until then (``child``); the parent serves once the child has made its
first claim cycle, so an idle two-CPU start takes about ``pre + max(child, post)`` ("modelled 2-CPU start").

Usage: .venv/bin/python bench/startup.py [--runs 9] [--stores sqlite-fresh,sqlite-existing,pg]
                                         [--src NAME=DIR ...] [--first-fire]

``--src NAME=DIR`` (repeatable) compares versions of the code in one run, interleaved (each round runs every
version once, so a change in the machine's load hits them alike): DIR holds the ``scheduler_emulator`` package
(e.g. ``git archive main src migrations | tar -x -C /tmp/main``, then ``--src main=/tmp/main/src --src this=src``);
it is put first on PYTHONPATH for the processes started. Default: this checkout's ``src`` only. With
PYTHONDONTWRITEBYTECODE set, a DIR without compiled files (``python -m compileall DIR``) pays for compiling the
package's sources at every start.

Prints the median (and the spread: min-max) of each figure over the runs, and the load average before and
after. CPU is the process's user+system time read from /proc when the line arrives (1/CLK_TCK resolution, all
threads; the preview pool's workers are not started before a preview is asked for), so it is far less sensitive
to a busy machine than the wall time. PostgreSQL as in run.py (BENCH_PG); its databases are dropped afterwards.
"""

from __future__ import annotations

import argparse
import http.server
import json
import os
import resource
import selectors
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import harness as h

STORES = ("sqlite-fresh", "sqlite-existing", "pg")
START_TIMEOUT = 120.0  # seconds for one process to print its "Listening on" line
# What the server's process imports before it serves, for every version of the code (the CLI's own module
# layout aside): the package's import cost as a library, with the collector running as usual.
IMPORT = "import scheduler_emulator.cli, scheduler_emulator.app, scheduler_emulator.tls, scheduler_emulator.connections"


@dataclass
class Version:
    name: str
    src: Path
    existing_dir: Path | None = None
    pg_url: str | None = None
    figures: dict[str, list[float]] = field(default_factory=dict)

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(self.src), *filter(None, [env.get("PYTHONPATH")])])
        env["SCHEDULER_SECRET_KEY"] = h.SECRET_KEY
        env.pop("SCHEDULER_DATABASE_URL", None)
        return env

    def add(self, figure: str, value: float) -> None:
        self.figures.setdefault(figure, []).append(value)


def children_cpu() -> float:
    """User+system CPU seconds of this process's children that have ended and been waited for."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def import_cpu(code: str, env: dict[str, str]) -> float:
    """The CPU seconds a new interpreter has used once ``code`` has run (its start included, its exit not)."""
    report = "import resource; u = resource.getrusage(resource.RUSAGE_SELF); print(u.ru_utime + u.ru_stime)"
    out = subprocess.run(
        [sys.executable, "-c", f"{code}\n{report}"], env=env, check=True, capture_output=True, text=True
    )
    return float(out.stdout.split()[-1])


def process_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / h.CLK_TCK  # utime, stime


def start_to_listening(version: Version, data_dir: Path, database_url: str | None) -> tuple[float, float, float]:
    """(wall seconds, CPU seconds) from exec to the "Listening on" line, and the CPU seconds of the whole life of
    the process, stopped (SIGTERM) right after that line."""
    command = [sys.executable, "-m", "scheduler_emulator", "--port", "0", "--data-dir", str(data_dir)]
    if database_url:
        command += ["--database-url", database_url]
    before = children_cpu()
    started = time.perf_counter()
    process = subprocess.Popen(
        command, env=version.env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
    )
    assert process.stdout is not None
    output = b""  # read with os.read: a buffered readline could hold the line while select() waits for more
    try:
        with selectors.DefaultSelector() as selector:
            selector.register(process.stdout, selectors.EVENT_READ)
            deadline = started + START_TIMEOUT
            while True:
                remaining = deadline - time.perf_counter()
                if remaining <= 0 or not selector.select(remaining):
                    raise RuntimeError(f"{version.name}: no 'Listening on' within {START_TIMEOUT:g} s: {output!r}")
                chunk = os.read(process.stdout.fileno(), 65536)
                if not chunk:
                    raise RuntimeError(f"{version.name}: the emulator exited before listening: {output!r}")
                output += chunk
                if b"\nListening on" in b"\n" + output:
                    wall = time.perf_counter() - started
                    cpu = process_cpu(process.pid)
                    break
    finally:
        h.stop_process(process, signal.SIGTERM, 40.0)
        process.stdout.close()
    return wall, cpu, children_cpu() - before


class Target:
    """An HTTP target on loopback that notes when each path was first asked for (perf_counter)."""

    def __init__(self) -> None:
        self.arrived: dict[str, float] = {}
        self.event = threading.Condition()
        target = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the library's name
                with target.event:
                    target.arrived.setdefault(self.path, time.perf_counter())
                    target.event.notify_all()
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def wait(self, path: str, timeout: float) -> float:
        with self.event:
            if not self.event.wait_for(lambda: path in self.arrived, timeout):
                raise RuntimeError(f"no fire of {path} within {timeout:g} s")
            return self.arrived[path]


def _request(method: str, url: str, body: object | None = None) -> int:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            response.read()
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


@dataclass
class Start:
    healthy: float  # wall seconds from exec to the first health 200
    fired: float  # ... to the first fire of a job created then
    pre: float  # the emulator's CPU seconds until its child appeared (all of them when it has none)
    post: float  # ... from then until health answered
    child: float  # the child's CPU seconds until then


def start_to_first_fire(version: Version, data_dir: Path, database_url: str | None, target: Target) -> Start:
    """A start measured as a user sees it (the module's docstring)."""
    port = h.free_port()
    command = [sys.executable, "-m", "scheduler_emulator", "--port", str(port), "--data-dir", str(data_dir)]
    if database_url:
        command += ["--database-url", database_url]
    base = f"http://127.0.0.1:{port}"
    started = time.perf_counter()
    process = subprocess.Popen(
        command, env=version.env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    spawn: dict[str, float] = {}  # the child's pid and the emulator's CPU when it appeared

    def watch_for_the_child() -> None:  # apart: the first health request waits on the bound port's backlog
        while process.poll() is None and time.perf_counter() - started < START_TIMEOUT and "healthy" not in spawn:
            if children := h.children_of(process.pid):
                spawn.update(pid=children[0], cpu=process_cpu(process.pid))
                return
            time.sleep(0.005)

    watcher = threading.Thread(target=watch_for_the_child, daemon=True)
    watcher.start()
    try:
        while True:
            if time.perf_counter() - started > START_TIMEOUT or process.poll() is not None:
                raise RuntimeError(f"{version.name}: no health 200 within {START_TIMEOUT:g} s")
            try:
                if _request("GET", f"{base}/_emulator/health") == 200:
                    healthy = time.perf_counter() - started
                    total = process_cpu(process.pid)
                    spawn["healthy"] = healthy
                    watcher.join()
                    child_cpu = process_cpu(int(spawn["pid"])) if "pid" in spawn else 0.0
                    break
            except OSError:
                pass
            time.sleep(0.005)
        collection = f"{h.arm_root(base)}/jobCollections/startup"
        assert _request("PUT", f"{collection}?api-version=2016-03-01", {"location": "westus"}) in (200, 201)
        path = f"/{uuid.uuid4().hex}"
        body = {
            "properties": {
                "startTime": h.isoformat_z(datetime.now(UTC)),
                "action": {"type": "Http", "request": {"uri": target.url + path, "method": "GET"}},
            }
        }
        status = _request("PUT", f"{collection}/jobs/{path[1:]}?api-version=2016-03-01", body)
        assert status in (200, 201), status
        fired = target.wait(path, START_TIMEOUT) - started
    finally:
        h.stop_process(process, signal.SIGTERM, 40.0)
    pre = spawn.get("cpu", total)
    return Start(healthy, fired, pre, total - pre, child_cpu)


def loaded_from(version: Version) -> str:
    out = subprocess.run(
        [sys.executable, "-c", "import scheduler_emulator; print(scheduler_emulator.__file__)"],
        env=version.env(),
        check=True,
        capture_output=True,
        text=True,
    )
    return out.stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--stores", default=",".join(STORES))
    parser.add_argument("--src", action="append", default=[], metavar="NAME=DIR")
    parser.add_argument("--first-fire", action="store_true", help="exec to health 200 and to a first fire instead")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # stopped: still drop the databases, remove the dirs
    stores = [s for s in args.stores.split(",") if s]
    for store in stores:
        if store not in STORES:
            parser.error(f"--stores: unknown {store!r} (choose from {', '.join(STORES)})")
    versions = [Version(name, Path(d).resolve()) for name, d in (s.split("=", 1) for s in args.src)]
    if not versions:
        versions = [Version("this", h.ROOT / "src")]
    for version in versions:
        print(f"{version.name}: {loaded_from(version)}")
    load_before = os.getloadavg()
    python_cpu: list[float] = []
    with tempfile.TemporaryDirectory(prefix="startup-bench-") as tmp:
        root = Path(tmp)
        try:
            for version in versions:  # the existing stores: migrated by one start beforehand
                if "sqlite-existing" in stores:
                    version.existing_dir = root / f"{version.name}-existing"
                    start_to_listening(version, version.existing_dir, None)
                if "pg" in stores:
                    version.pg_url = h.create_pg_database()
                    start_to_listening(version, root / f"{version.name}-pg", version.pg_url)
            target = Target()
            for run in range(args.runs):
                python_cpu.append(import_cpu("pass", versions[0].env()))
                for version in versions if run % 2 == 0 else versions[::-1]:
                    if args.first_fire:
                        for store in stores:
                            if store == "sqlite-fresh":
                                where, url = root / f"{version.name}-fresh-{run}", None
                            elif store == "sqlite-existing":
                                assert version.existing_dir is not None
                                where, url = version.existing_dir, None
                            else:
                                where, url = root / f"{version.name}-pg", version.pg_url
                            measured = start_to_first_fire(version, where, url, target)
                            version.add(f"{store}: exec→health 200 wall", measured.healthy)
                            version.add(f"{store}: exec→first fire wall", measured.fired)
                            version.add(f"{store}: CPU pre (before the child)", measured.pre)
                            version.add(f"{store}: CPU post (after it, to health)", measured.post)
                            version.add(f"{store}: CPU child (to health)", measured.child)
                            modelled = measured.pre + max(measured.child, measured.post)
                            version.add(f"{store}: modelled 2-CPU start", modelled)
                        continue
                    version.add("import CPU", import_cpu(IMPORT, version.env()))
                    for store in stores:
                        if store == "sqlite-fresh":
                            wall, cpu, life = start_to_listening(version, root / f"{version.name}-fresh-{run}", None)
                        elif store == "sqlite-existing":
                            assert version.existing_dir is not None
                            wall, cpu, life = start_to_listening(version, version.existing_dir, None)
                        else:
                            wall, cpu, life = start_to_listening(version, root / f"{version.name}-pg", version.pg_url)
                        version.add(f"{store}: exec→Listening CPU", cpu)
                        version.add(f"{store}: exec→Listening wall", wall)
                        version.add(f"{store}: exec→exit CPU (stopped at once)", life)
                print(f"run {run + 1}/{args.runs} done (load {os.getloadavg()[0]:.1f})", file=sys.stderr)
        finally:
            for version in versions:
                if version.pg_url:
                    h.drop_pg_database(version.pg_url)
    load_after = os.getloadavg()
    print(f"\nmedian of {args.runs} runs (min-max), seconds; python {sys.version.split()[0]}; {os.cpu_count()} CPUs")
    print(
        f"load average before {load_before[0]:.1f} {load_before[1]:.1f} {load_before[2]:.1f}, "
        f"after {load_after[0]:.1f} {load_after[1]:.1f} {load_after[2]:.1f}"
    )
    print(f"`python -c pass` CPU (the interpreter alone): {statistics.median(python_cpu):.3f}")
    names = list(versions[0].figures)
    width = max(len(n) for n in names)
    print(f"{'':{width}}  " + "  ".join(f"{v.name:>20}" for v in versions))
    for name in names:
        cells = []
        for version in versions:
            values = version.figures[name]
            cells.append(f"{statistics.median(values):.3f} ({min(values):.2f}-{max(values):.2f})".rjust(20))
        print(f"{name:{width}}  " + "  ".join(cells))


if __name__ == "__main__":
    main()
