"""Shared pieces of the benchmark: the nginx target, emulator processes, PostgreSQL databases, seeding the
store directly, /proc readings and the access-log analysis. Everything listens on 127.0.0.1 only, and every
wait here is bounded by a deadline."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import copy
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
PYTHON = sys.executable
PG_ADMIN_URL = os.environ.get("BENCH_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
# One key for stored secrets for every emulator of a run: processes sharing a database must share it.
SECRET_KEY = os.environ.get("SCHEDULER_SECRET_KEY") or base64.urlsafe_b64encode(os.urandom(32)).decode()
API = {"api-version": "2016-03-01"}
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
CLK_TCK = os.sysconf("SC_CLK_TCK")
ON_TIME_SECONDS = 1.0  # docs/reference/recurrence-and-retries.md#execution: "well under a second late"


# -- time and due instants --------------------------------------------------------------------------


def isoformat_z(moment: datetime) -> str:
    """The form the emulator writes (domain.clock.isoformat_z), so every system sends the same header."""
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def due_instant(t0_us: int, window_us: int, index: int, count: int) -> datetime:
    """Job ``index`` of ``count`` is due uniformly over [t0, t0 + window): integer microseconds, so every
    process computes exactly the same instant."""
    return EPOCH + timedelta(microseconds=t0_us + window_us * index // count)


def now_us() -> int:
    return time.time_ns() // 1000


# -- /proc ---------------------------------------------------------------------------------------------


def proc_status_kb(pid: int, key: str) -> int | None:
    """A kB value of /proc/PID/status (VmHWM = peak RSS, VmRSS = current RSS); None if the process is gone."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    match = re.search(rf"^{key}:\s+(\d+) kB", text, re.M)
    return int(match.group(1)) if match else None


def proc_cpu_seconds(pid: int) -> float | None:
    """utime + stime of the process (all its threads), in seconds."""
    split = proc_cpu_split(pid)
    return None if split is None else split[0] + split[1]


def proc_cpu_split(pid: int) -> tuple[float, float] | None:
    """(utime, stime) of the process (all its threads), in seconds: its own code, and the kernel's on its behalf
    (system calls: sockets, the database's files, thread wake-ups)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()
    return int(fields[11]) / CLK_TCK, int(fields[12]) / CLK_TCK


def children_of(pid: int) -> list[int]:
    """The pids of ``pid``'s children (/proc/PID/task/*/children); none if the process is gone."""
    found: list[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError):
                found += [int(child) for child in Path(f"/proc/{pid}/task/{task}/children").read_text().split()]
    except OSError:
        pass
    return found


def descendants_of(pid: int) -> list[int]:
    """``pid``'s children, theirs, and so on (bounded by the process tree: each pid once)."""
    found: list[int] = []
    waiting = children_of(pid)
    while waiting:
        child = waiting.pop(0)
        if child not in found:
            found.append(child)
            waiting += children_of(child)
    return found


def cpu_split_of(pids: list[int]) -> tuple[float, float]:
    """(all CPU, the kernel's share) of the processes together, in seconds; a process gone counts 0."""
    splits = [proc_cpu_split(pid) or (0.0, 0.0) for pid in pids]
    return sum(user + system for user, system in splits), sum(system for _, system in splits)


def loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def machine_jiffies() -> tuple[int, int]:
    """(busy, total) CPU jiffies of the whole machine, all cores (/proc/stat)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    return sum(fields) - fields[3] - fields[4], sum(fields)


def machine_busy_pct(before: tuple[int, int], after: tuple[int, int]) -> float:
    """How busy the machine was between two readings, in % of one core (0 … 100 × cores)."""
    total = after[1] - before[1]
    return 100.0 * (os.cpu_count() or 1) * (after[0] - before[0]) / total if total > 0 else 0.0


class Quiet:
    """Waits (bounded per call and in total) for other work on the shared machine to calm down before a
    measurement, so runs are comparable; reports what it saw."""

    def __init__(self, threshold_pct: float, max_wait: float, budget: float) -> None:
        self.threshold, self.max_wait, self.budget = threshold_pct, max_wait, budget

    def wait(self) -> tuple[float, float]:
        """(seconds waited, machine busy % in the last 2 s sample)."""
        began = time.monotonic()
        limit = min(self.max_wait, self.budget)
        while True:
            before = machine_jiffies()
            time.sleep(2.0)
            busy = machine_busy_pct(before, machine_jiffies())
            waited = time.monotonic() - began
            if busy <= self.threshold or waited >= limit:
                self.budget = max(0.0, self.budget - waited)
                return waited, busy


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for_port(port: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after {timeout:.0f} s")


def stop_process(process: subprocess.Popen[Any], sig: int = signal.SIGTERM, timeout: float = 30.0) -> None:
    """Signal one process we started and wait for it; kill it if it does not stop in time."""
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        process.send_signal(sig)
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(10)


# -- nginx: the target ------------------------------------------------------------------------------

NGINX_CONF = """\
worker_processes 1;
worker_rlimit_nofile 16384;
error_log {dir}/error.log warn;
pid {dir}/nginx.pid;
events {{ worker_connections 8192; }}
http {{
    client_body_temp_path {dir}/tmp/body;
    proxy_temp_path {dir}/tmp/proxy;
    fastcgi_temp_path {dir}/tmp/fastcgi;
    uwsgi_temp_path {dir}/tmp/uwsgi;
    scgi_temp_path {dir}/tmp/scgi;
    log_format bench '$msec|$request_uri|$http_x_ms_scheduler_expected_execution_time|$status|$connection';
    access_log {dir}/access.log bench buffer=256k flush=1s;
    keepalive_requests 1000000;
    keepalive_timeout 75s;
    default_type text/plain;
    server {{
        listen 127.0.0.1:{port} backlog=4096;
        location / {{ return 200 "ok"; }}
    }}
}}
"""


class Nginx:
    """nginx (the Debian package) in the foreground on a free port, logging arrival time ($msec) and the
    x-ms-scheduler-expected-execution-time header of every request."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def access_log(self) -> Path:
        return self.dir / "access.log"

    def start(self) -> None:
        (self.dir / "tmp").mkdir(parents=True, exist_ok=True)
        self.dir.chmod(0o755)
        self.port = free_port()
        conf = self.dir / "nginx.conf"
        conf.write_text(NGINX_CONF.format(dir=self.dir, port=self.port))
        self.process = subprocess.Popen(
            ["nginx", "-e", str(self.dir / "error.log"), "-c", str(conf), "-p", str(self.dir), "-g", "daemon off;"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        try:
            wait_for_port(self.port, 10)
        except RuntimeError:
            self.stop()
            raise RuntimeError("nginx did not start: " + (self.dir / "error.log").read_text()[-2000:]) from None

    def lines(self) -> int:
        """Requests logged so far (the log buffer is flushed at least every second)."""
        try:
            with self.access_log.open("rb") as f:
                return f.read().count(b"\n")
        except OSError:
            return 0

    def stop(self) -> None:
        """Graceful stop (SIGQUIT): nginx flushes the log buffer before it exits."""
        if self.process is not None:
            stop_process(self.process, signal.SIGQUIT, 15)

    def connections(self) -> int:
        """Distinct connections the logged requests came over (each new one cost the client a connect)."""
        seen = set()
        with contextlib.suppress(OSError), self.access_log.open() as f:
            for line in f:
                seen.add(line.rstrip("\n").rsplit("|", 1)[-1])
        return len(seen)

    def arrivals(self) -> list[tuple[float, str, str]]:
        """(arrival epoch seconds, request URI, expected-time header) of every logged request."""
        out = []
        with contextlib.suppress(OSError), self.access_log.open() as f:
            for line in f:
                parts = line.rstrip("\n").split("|")
                if len(parts) >= 3:
                    out.append((float(parts[0]), parts[1], parts[2]))
        return out


# -- the access-log analysis -----------------------------------------------------------------------


@dataclass
class FireStats:
    jobs: int
    fired: int  # distinct expected fires that arrived by the deadline
    achieved: float  # fires/s from the first due instant to the last first-arrival
    on_time: float  # share of the jobs that arrived at most ON_TIME_SECONDS late
    p50_ms: float | None
    p99_ms: float | None
    max_ms: float | None
    missed: int
    duplicates: int
    unexpected: int
    late_after_deadline: int


def percentile(sorted_values: list[float], share: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, int(len(sorted_values) * share))]


def parse_expected(header: str) -> int | None:
    """The expected-time header as integer microseconds since the epoch."""
    try:
        moment = datetime.fromisoformat(header.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return (moment - EPOCH) // timedelta(microseconds=1)


def analyse(arrivals: list[tuple[float, str, str]], t0_us: int, window_us: int, count: int,
            deadline: float) -> FireStats:
    """Match arrivals against the N expected (job path, expected instant) pairs. A pair seen twice is a
    duplicate; a pair never seen by ``deadline`` is missed."""
    expected = {f"/fire/{i}": due_instant(t0_us, window_us, i, count) for i in range(count)}
    expected_us = {path: (moment - EPOCH) // timedelta(microseconds=1) for path, moment in expected.items()}
    first: dict[str, float] = {}
    seen: dict[tuple[str, int | None], int] = {}
    unexpected = late_after = 0
    for arrived, uri, header in arrivals:
        key = (uri, parse_expected(header))
        seen[key] = seen.get(key, 0) + 1
        if expected_us.get(uri) != key[1]:
            unexpected += 1
            continue
        if arrived > deadline:
            late_after += 1
            continue
        if uri not in first or arrived < first[uri]:
            first[uri] = arrived
    duplicates = sum(n - 1 for n in seen.values() if n > 1)
    lateness = sorted((first[uri] - expected_us[uri] / 1e6) for uri in first)
    t0 = t0_us / 1e6
    span = (max(first.values()) - t0) if first else 0.0
    fired = len(first)
    return FireStats(
        jobs=count,
        fired=fired,
        achieved=fired / max(span, window_us / 1e6) if fired else 0.0,
        on_time=sum(1 for x in lateness if x <= ON_TIME_SECONDS) / count,
        p50_ms=statistics.median(lateness) * 1000 if lateness else None,
        p99_ms=percentile(lateness, 0.99) * 1000 if lateness else None,
        max_ms=lateness[-1] * 1000 if lateness else None,
        missed=count - fired,
        duplicates=duplicates,
        unexpected=unexpected,
        late_after_deadline=late_after,
    )


def drain(nginx: Nginx, count: int, window_end: float, hard_stop: float, stall: float = 30.0) -> float:
    """Wait until all ``count`` requests were logged (plus a moment for duplicates), progress stalls, or
    ``hard_stop`` (epoch seconds). Returns the deadline used for 'missed'."""
    last, changed = -1, time.time()
    while True:
        now = time.time()
        if now >= hard_stop:
            return hard_stop
        time.sleep(0.5)
        lines = nginx.lines()
        now = time.time()
        if lines != last:
            last, changed = lines, now
        if now > window_end and lines >= count and now - changed >= 2.5:
            return now
        if now > window_end + 5 and now - changed >= stall:
            return now


# -- emulator processes -----------------------------------------------------------------------------


class Emulator:
    """One ``python -m scheduler_emulator`` process; its output goes to a log file."""

    def __init__(self, data_dir: Path, database_url: str | None, *extra: str, defaults: bool = False) -> None:
        """``defaults``: the flags a user starts it with (``info`` logs as JSON, since the output is a file);
        otherwise quiet (``--log-level warning``, text), as the dispatcher-only rows run it."""
        data_dir.mkdir(parents=True, exist_ok=True)
        self.data_dir = data_dir
        self.log_path = data_dir / f"emulator-{uuid.uuid4().hex[:6]}.log"
        quiet = [] if defaults else ["--log-level", "warning", "--log-format", "text"]
        self.args = [PYTHON, "-m", "scheduler_emulator", "--port", "0", "--data-dir", str(data_dir),
                     *quiet, *extra]
        if database_url:
            self.args += ["--database-url", database_url]
        self.process: subprocess.Popen[bytes] | None = None
        self.url = ""
        self.spawned_at = 0.0
        self.listening_at = 0.0

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    @property
    def pids(self) -> list[int]:
        """The process and its descendants (the dispatcher's process and the action process it forks: their CPU
        is the emulator's too)."""
        return [self.pid, *descendants_of(self.pid)]

    def spawn(self) -> None:
        self.spawned_at = time.time()
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(self.args, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT,
                                            env={**os.environ, "PYTHONUNBUFFERED": "1",
                                                 "SCHEDULER_SECRET_KEY": SECRET_KEY})

    def wait_listening(self, timeout: float = 60.0) -> str:
        assert self.process is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.log_path.read_text(errors="replace")
            if match := re.search(r"Listening on (\S+)", text):
                self.listening_at = time.time()
                self.url = match.group(1)
                return self.url
            if self.process.poll() is not None:
                break
            time.sleep(0.02)
        self.stop()
        raise RuntimeError(f"emulator did not start:\n{self.log_tail()}")

    def start(self, timeout: float = 60.0) -> str:
        self.spawn()
        return self.wait_listening(timeout)

    def log_tail(self, chars: int = 3000) -> str:
        with contextlib.suppress(OSError):
            return self.log_path.read_text(errors="replace")[-chars:]
        return ""

    def counter(self, name: str) -> float | None:
        """A counter from the emulator's /metrics (None when it cannot be read)."""
        try:
            with urllib.request.urlopen(f"{self.url}/metrics", timeout=5) as response:
                text = response.read().decode()
        except OSError:
            return None
        match = re.search(rf"^{re.escape(name)} (\S+)$", text, re.MULTILINE)
        return float(match.group(1)) if match else None

    def errors_logged(self) -> list[str]:
        """Lines of the log that look like errors (tracebacks, ERROR records)."""
        with contextlib.suppress(OSError), self.log_path.open(errors="replace") as f:
            return [line for line in f if "Traceback" in line or " ERROR " in line or "Error:" in line
                    or '"level": "error"' in line or '"level": "critical"' in line][:20]
        return []

    def log_lines(self) -> int:
        """Lines in its log file so far (with info logging: one per request and one per attempt, and a few)."""
        with contextlib.suppress(OSError), self.log_path.open("rb") as f:
            return sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))
        return 0

    def stop(self, timeout: float = 40.0) -> None:
        if self.process is not None:
            stop_process(self.process, signal.SIGTERM, timeout)


# -- PostgreSQL -----------------------------------------------------------------------------------


def create_pg_database() -> str:
    import psycopg

    name = f"bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(PG_ADMIN_URL, autocommit=True, connect_timeout=5) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return PG_ADMIN_URL.rsplit("/", 1)[0] + f"/{name}"


def drop_pg_database(url: str) -> None:
    import psycopg

    name = url.rsplit("/", 1)[1]
    with psycopg.connect(PG_ADMIN_URL, autocommit=True, connect_timeout=5) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# -- seeding the emulator's store -------------------------------------------------------------------

SUBSCRIPTION = "00000000-0000-0000-0000-00000000bench"
RESOURCE_GROUP = "bench"
TEMPLATE = "bench-template"
JOBS_PER_COLLECTION = 1000  # the P20Premium plan's limit, kept although rows are written directly


def arm_root(base: str) -> str:
    return f"{base}/subscriptions/{SUBSCRIPTION}/resourceGroups/{RESOURCE_GROUP}/providers/Microsoft.Scheduler"


def make_template(data_dir: Path, database_url: str, target: str) -> None:
    """Start the emulator once without its dispatcher (this migrates the schema) and create one collection
    and one job through the API, so the rows cloned below carry whatever the current code stores."""
    import httpx

    emulator = Emulator(data_dir, database_url, "--no-dispatcher")
    base = emulator.start()
    try:
        with httpx.Client(timeout=30) as client:
            root = f"{arm_root(base)}/jobCollections/{TEMPLATE}"
            client.put(root, params=API, json={
                "location": "westus", "properties": {"sku": {"name": "P20Premium"}}}).raise_for_status()
            start = isoformat_z(datetime.now(UTC) + timedelta(hours=1))
            client.put(f"{root}/jobs/template", params=API, json={"properties": {
                "startTime": start, "action": {"type": "Http", "request": {"uri": target, "method": "GET"}}}}
            ).raise_for_status()
    finally:
        emulator.stop()


def _columns(row: Any) -> dict[str, Any]:
    from sqlalchemy import inspect

    return {attr.columns[0].name: getattr(row, attr.key) for attr in inspect(type(row)).column_attrs}


def seed_jobs(database_url: str, due: list[datetime], uri_of: Any, batch: int = 5000) -> float:
    """Clone the template into ceil(N/1000) collections of one-time Http GET jobs, job i due at ``due[i]``
    with the URI ``uri_of(i)``; remove the template. Returns the seconds spent."""
    from sqlalchemy import delete, insert, select

    from scheduler_emulator.store.database import Database
    from scheduler_emulator.store.models import JobCollectionRow, JobRow

    began = time.monotonic()
    database = Database(database_url)
    try:
        with database.session() as session:
            collection = session.scalars(select(JobCollectionRow).where(JobCollectionRow.name == TEMPLATE)).one()
            job = session.scalars(select(JobRow).where(JobRow.collection_id == collection.id)).one()
            collection_values, job_values = _columns(collection), _columns(job)
            template_ids = (collection.id, job.id)
        for values in (collection_values, job_values):
            values.pop("id")
        moment = datetime.now(UTC)
        collections = [
            {**collection_values, "name": f"bench-{c:04d}", "name_key": f"bench-{c:04d}",
             "created_at": moment, "updated_at": moment}
            for c in range((len(due) + JOBS_PER_COLLECTION - 1) // JOBS_PER_COLLECTION)
        ]
        with database.engine.begin() as conn:
            conn.execute(insert(JobCollectionRow), collections)
            ids = dict(conn.execute(select(JobCollectionRow.name, JobCollectionRow.id)
                                    .where(JobCollectionRow.name.like("bench-0%"))).tuples().all())
        definition = job_values["definition"]
        for start in range(0, len(due), batch):
            rows = []
            for i in range(start, min(start + batch, len(due))):
                when = due[i]
                body = copy.deepcopy(definition)
                body["startTime"] = isoformat_z(when)
                body["action"]["request"]["uri"] = uri_of(i)
                name = f"job-{i:07d}"
                rows.append({**job_values, "collection_id": ids[f"bench-{i // JOBS_PER_COLLECTION:04d}"],
                             "name": name, "name_key": name, "definition": body, "next_execution_time": when,
                             "series_origin": min(moment, when), "created_at": moment, "updated_at": moment})
            with database.engine.begin() as conn:
                conn.execute(insert(JobRow), rows)
        with database.engine.begin() as conn:
            conn.execute(delete(JobRow).where(JobRow.id == template_ids[1]))
            conn.execute(delete(JobCollectionRow).where(JobCollectionRow.id == template_ids[0]))
    finally:
        database.dispose()
    return time.monotonic() - began


def seed_jobs_in_sql(database_url: str, jobs: int, due_soon: int, moment: datetime, spread: timedelta,
                     uri_prefix: str, batch: int = 500_000, progress: Any = None) -> float:
    """PostgreSQL only, for tens of millions of jobs: like ``seed_jobs``, but the rows are made by the server
    (INSERT ... SELECT over generate_series) from the template's own rows. Job i is due at ``moment`` for
    i < ``due_soon``, else spread evenly over ``spread`` starting a day after ``moment``; its URI is
    ``uri_prefix`` + i. Indexes are built once after the load (as pg_restore does). Returns the seconds spent."""
    from sqlalchemy import bindparam, text

    from scheduler_emulator.store.database import Database
    from scheduler_emulator.store.models import JobCollectionRow, JobRow

    began = time.monotonic()
    database = Database(database_url)
    collections = (jobs + JOBS_PER_COLLECTION - 1) // JOBS_PER_COLLECTION
    times = {"moment": bindparam("moment", moment, type_=JobRow.__table__.c.created_at.type)}

    def column_list(table: Any, overrides: dict[str, str]) -> tuple[str, str]:
        names = [c.name for c in table.columns if c.name != "id"]
        return ", ".join(names), ", ".join(overrides.get(n, f"t.{n}") for n in names)

    try:
        with database.engine.begin() as conn:
            tc, tj = conn.execute(text(
                "SELECT c.id, j.id FROM job_collections c JOIN jobs j ON j.collection_id = c.id WHERE c.name = :n"
            ), {"n": TEMPLATE}).one()
            names, values = column_list(JobCollectionRow.__table__, {
                "name": "'bench-' || lpad(g::text, 6, '0')", "name_key": "'bench-' || lpad(g::text, 6, '0')",
                "created_at": ":moment", "updated_at": ":moment"})
            conn.execute(text(f"INSERT INTO job_collections ({names}) SELECT {values} FROM job_collections t, "
                              f"generate_series(0, {collections - 1}) g WHERE t.id = {tc}").bindparams(times["moment"]))
        per_job = spread.total_seconds() / max(1, jobs - due_soon)
        due = (f"CASE WHEN g < {due_soon} THEN CAST(:moment AS timestamptz) ELSE CAST(:moment AS timestamptz) "
               f"+ interval '1 day' + (g - {due_soon}) * interval '{per_job:.6f} seconds' END")
        names, values = column_list(JobRow.__table__, {
            "collection_id": "c.id", "name": "'job-' || lpad(g::text, 8, '0')",
            "name_key": "'job-' || lpad(g::text, 8, '0')",
            "definition": "jsonb_set(jsonb_set(t.definition::jsonb, '{startTime}', to_jsonb(to_char(d.due AT TIME "
                          "ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'))), '{action,request,uri}', "
                          f"to_jsonb('{uri_prefix}' || g::text))::json",
            "next_execution_time": "d.due", "series_origin": "LEAST(CAST(:moment AS timestamptz), d.due)",
            "created_at": ":moment", "updated_at": ":moment"})
        with database.engine.begin() as conn:  # indexes other than the primary key: dropped, rebuilt after
            indexes = conn.execute(text(
                "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'jobs' AND indexname <> 'jobs_pkey' "
                "AND indexdef NOT LIKE '%UNIQUE%'")).all()
            for name, _ in indexes:
                conn.execute(text(f'DROP INDEX "{name}"'))
        for start in range(0, jobs, batch):
            end = min(jobs, start + batch) - 1
            with database.engine.begin() as conn:
                conn.execute(text(
                    f"INSERT INTO jobs ({names}) SELECT {values} FROM jobs t "
                    f"CROSS JOIN generate_series({start}, {end}) g "
                    f"CROSS JOIN LATERAL (SELECT {due} AS due) d "
                    f"JOIN job_collections c ON c.subscription_key = (SELECT subscription_key FROM job_collections "
                    f"WHERE id = {tc}) AND c.resource_group_key = (SELECT resource_group_key FROM job_collections "
                    f"WHERE id = {tc}) AND c.name_key = 'bench-' || lpad((g / {JOBS_PER_COLLECTION})::text, 6, '0') "
                    f"WHERE t.id = {tj}").bindparams(times["moment"]))
            if progress is not None:
                progress(end + 1)
        with database.engine.begin() as conn:
            for _, definition in indexes:
                conn.execute(text(definition))
            conn.execute(text(f"DELETE FROM jobs WHERE id = {tj}"))
            conn.execute(text(f"DELETE FROM job_collections WHERE id = {tc}"))
        with database.engine.connect() as conn:
            conn.execution_options(isolation_level="AUTOCOMMIT").execute(text("VACUUM ANALYZE jobs"))
    finally:
        database.dispose()
    return time.monotonic() - began


def history_engine(database_url: str) -> Any:
    """An engine for reading the history table by its name: plain SQL, none of the service's modules, so that
    bench/ab.sh can measure another commit with these scripts whatever its store code looks like."""
    from sqlalchemy import create_engine

    if database_url.startswith("postgresql://"):
        database_url = database_url.replace("postgresql://", "postgresql+psycopg://", 1)
    return create_engine(database_url)


def wait_for_history(database_url: str, fires: int, timeout: float) -> tuple[int, float]:
    """Poll the history table until it holds ``fires`` rows (or ``timeout`` passes): (rows, seconds waited)."""
    from sqlalchemy import text

    engine = history_engine(database_url)
    began = time.monotonic()
    rows = -1
    try:
        while True:
            with contextlib.suppress(Exception), engine.connect() as conn:
                rows = conn.execute(text("SELECT count(*) FROM job_history")).scalar_one()
            waited = time.monotonic() - began
            if rows >= fires or waited >= timeout:
                return rows, waited
            time.sleep(1.0)
    finally:
        engine.dispose()


def history_counts(database_url: str) -> dict[str, int]:
    """History rows by status (what the dispatcher persisted)."""
    from sqlalchemy import text

    engine = history_engine(database_url)
    try:
        with engine.connect() as conn:
            return {status: count for status, count in conn.execute(
                text("SELECT status, count(*) FROM job_history GROUP BY status")).tuples()}
    finally:
        engine.dispose()


@dataclass
class Measured:
    """One fire-rate run of one system."""

    system: str
    demand: float
    stats: FireStats | None = None
    history: str = "—"
    peak_rss_mb: float | None = None  # of the largest process
    peak_rss_total_mb: float | None = None  # summed over the processes (pages shared after a fork counted in each)
    cpu_s: float | None = None
    setup_s: float | None = None
    margin_s: float | None = None  # seconds between 'ready' and the first due instant
    history_lag_s: float | None = None  # from the end of the drain until every fire had its history row
    box_busy_pct: float | None = None  # whole-machine CPU from the first due instant to the deadline (of 100 × cores)
    load: str = ""
    notes: list[str] = field(default_factory=list)
    error: str | None = None
    path: str = "seeded"  # user (jobs through the API, default flags), quiet (the same, --log-level warning), seeded
    creation: dict[str, Any] | None = None  # the user's path: what creating the jobs through the API took
    gets: dict[str, Any] | None = None  # the user's path: GET latency while the fires ran
    log_lines: int | None = None  # lines the emulator(s) logged
    processes: int | None = None  # how many processes of the system under test were measured
    variant: str = ""  # run.py --variant: the name of the flags the emulator ran with ("": none)
    round: int = 1  # run.py --repeat: which round of the interleaved runs this was


def dump_json(path: Path, payload: Any) -> None:
    path.write_text(json.dumps(payload, indent=2, default=str))


# -- the user's path: jobs created through the ARM API -------------------------------------------------

USER_COLLECTIONS = 30  # the user's path spreads its jobs over this many collections (more when N > 30,000)


def user_collections(jobs: int) -> int:
    return max(USER_COLLECTIONS, (jobs + JOBS_PER_COLLECTION - 1) // JOBS_PER_COLLECTION)


def user_job_path(base: str, index: int, collections: int) -> str:
    """Job ``index`` lives in collection ``index % collections``: due jobs of any instant span every collection."""
    return f"{arm_root(base)}/jobCollections/user-{index % collections:03d}/jobs/job-{index:07d}"


@dataclass
class ApiCreation:
    """What creating the jobs through the API took."""

    jobs: int = 0
    seconds: float = 0.0
    p50_ms: float | None = None
    p99_ms: float | None = None
    errors: dict[int, int] = field(default_factory=dict)
    server_cpu_s: float | None = None

    @property
    def rate(self) -> float:
        return self.jobs / self.seconds if self.seconds > 0 else 0.0


async def _create_jobs(bases: list[str], due: list[datetime], uri_of: Any, concurrency: int,
                       collections: int) -> ApiCreation:
    import aiohttp

    result = ApiCreation()
    connector = aiohttp.TCPConnector(limit=concurrency * len(bases))
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=60)) as client:
        for c in range(collections):
            async with client.put(f"{arm_root(bases[0])}/jobCollections/user-{c:03d}", params=API, json={
                    "location": "westus", "properties": {"sku": {"name": "P20Premium"}}}) as response:
                response.raise_for_status()
        counter = iter(range(len(due)))
        latencies: list[float] = []
        errors: dict[int, int] = {}

        async def worker(k: int) -> None:
            base = bases[k % len(bases)]
            for i in counter:
                body = {"properties": {"startTime": isoformat_z(due[i]), "action": {
                    "type": "Http", "request": {"uri": uri_of(i), "method": "GET"}}}}
                sent = time.perf_counter()
                async with client.put(user_job_path(base, i, collections), params=API, json=body) as response:
                    await response.read()
                latencies.append(time.perf_counter() - sent)
                if response.status >= 300:
                    errors[response.status] = errors.get(response.status, 0) + 1

        began = time.perf_counter()
        await asyncio.gather(*(worker(k) for k in range(concurrency)))
        result.seconds = time.perf_counter() - began
    latencies.sort()
    result.jobs = len(latencies) - sum(errors.values())
    result.errors = errors
    if latencies:
        result.p50_ms = percentile(latencies, 0.5) * 1000
        result.p99_ms = percentile(latencies, 0.99) * 1000
    return result


def create_jobs_via_api(bases: list[str], due: list[datetime], uri_of: Any, concurrency: int = 16,
                        pids: list[int] | None = None) -> ApiCreation:
    """Create ``user_collections(N)`` P20Premium collections, then job i (due at ``due[i]``, a one-time Http GET
    of ``uri_of(i)``) through ``PUT`` with ``concurrency`` clients in flight, spread over the API processes
    ``bases`` (client k talks to ``bases[k % len]``). ``pids``: the processes whose CPU the creation took."""
    before = cpu_split_of(pids)[0] if pids else None
    result = asyncio.run(_create_jobs(bases, due, uri_of, concurrency, user_collections(len(due))))
    if pids and before is not None:
        result.server_cpu_s = cpu_split_of(pids)[0] - before
    return result


class GetLoad:
    """GET of random created jobs at a steady ``rate`` per second (each request its own task, at most
    ``concurrency`` in flight; one that would exceed it is skipped and counted), on a thread of its own, while
    the fires run: the latency a user's client sees then."""

    def __init__(self, base: str, jobs: int, collections: int, rate: float = 100.0, concurrency: int = 16) -> None:
        self.base, self.jobs, self.collections = base, jobs, collections
        self.rate, self.concurrency = rate, concurrency
        self.latencies: list[float] = []
        self.errors = 0
        self.skipped = 0
        self._thread: Any = None
        self._stop = False

    def start(self, seconds: float) -> None:
        import threading

        self._thread = threading.Thread(target=lambda: asyncio.run(self._run(seconds)), daemon=True)
        self._thread.start()

    def join(self, timeout: float = 60.0) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    async def _run(self, seconds: float) -> None:
        import random

        import aiohttp

        connector = aiohttp.TCPConnector(limit=self.concurrency)
        in_flight = 0
        async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=30)) as client:
            async def one(path: str) -> None:
                nonlocal in_flight
                sent = time.perf_counter()
                try:
                    async with client.get(path, params=API) as response:
                        await response.read()
                        if response.status != 200:
                            self.errors += 1
                    self.latencies.append(time.perf_counter() - sent)
                except Exception:  # noqa: BLE001 - counted, the load goes on
                    self.errors += 1
                finally:
                    in_flight -= 1

            tasks = set()
            began = time.perf_counter()
            for n in range(int(seconds * self.rate)):
                delay = began + n / self.rate - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                if in_flight >= self.concurrency:
                    self.skipped += 1
                    continue
                in_flight += 1
                task = asyncio.ensure_future(one(user_job_path(self.base, random.randrange(self.jobs),
                                                               self.collections)))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
            if tasks:
                await asyncio.wait(tasks, timeout=30)

    def summary(self) -> dict[str, Any]:
        values = sorted(self.latencies)
        return {"requests": len(values), "rate": self.rate, "errors": self.errors, "skipped": self.skipped,
                "p50_ms": percentile(values, 0.5) * 1000 if values else None,
                "p99_ms": percentile(values, 0.99) * 1000 if values else None,
                "max_ms": values[-1] * 1000 if values else None}
