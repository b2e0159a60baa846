"""Firing lateness: N one-time jobs due within one window, fired at a local HTTP target.

Usage: python bench/lateness.py [--jobs 100] [--window 1.0] [--database-url URL]

Starts the emulator as a separate process (SQLite in a temporary directory unless --database-url),
creates the jobs through the API, and reports how late each request reached the target compared with
its x-ms-scheduler-expected-execution-time header. Everything stays on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx

API = {"api-version": "2016-03-01"}


class Target:
    """Records the arrival time and the expected-time header of every request."""

    def __init__(self) -> None:
        self.arrivals: list[tuple[float, str]] = []
        lock = threading.Lock()
        arrivals = self.arrivals

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                now = time.time()
                length = int(self.headers.get("content-length") or 0)
                self.rfile.read(length)
                with lock:
                    arrivals.append((now, self.headers.get("x-ms-scheduler-expected-execution-time", "")))
                self.send_response(200)
                self.send_header("content-length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args: object) -> None:
                pass

        # A listen backlog of 5 (the default) drops connection bursts, adding 1 s SYN retransmits.
        ThreadingHTTPServer.request_queue_size = 1024
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/fire"


def start_emulator(database_url: str | None, data_dir: str) -> tuple[subprocess.Popen[str], str]:
    args = [sys.executable, "-m", "scheduler_emulator", "--port", "0", "--data-dir", data_dir, "--log-level", "warning"]
    if database_url:
        args += ["--database-url", database_url]
    process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 30
    assert process.stdout is not None
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if match := re.search(r"Listening on (\S+)", line):
            threading.Thread(target=lambda: [None for _ in process.stdout], daemon=True).start()  # type: ignore[union-attr]
            return process, match.group(1)
        if not line and process.poll() is not None:
            break
    process.kill()
    raise SystemExit("emulator did not start")


async def create_jobs(base: str, target: str, jobs: int, due_at: datetime, window: float) -> None:
    root = f"{base}/subscriptions/bench/resourceGroups/bench/providers/Microsoft.Scheduler/jobCollections/bench"
    async with httpx.AsyncClient(timeout=30) as client:
        collection = {"location": "westus", "properties": {"sku": {"name": "P20Premium"}}}
        created = await client.put(root, params=API, json=collection)
        created.raise_for_status()
        semaphore = asyncio.Semaphore(8)

        async def one(index: int) -> None:
            start = due_at + timedelta(seconds=window * index / jobs)
            body = {"properties": {"startTime": start.isoformat(), "action": {
                "type": "Http", "request": {"uri": target, "method": "POST", "body": str(index)}}}}
            async with semaphore:
                response = await client.put(f"{root}/jobs/job{index}", params=API, json=body)
                response.raise_for_status()

        await asyncio.gather(*(one(i) for i in range(jobs)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=100)
    parser.add_argument("--window", type=float, default=1.0, help="seconds over which the jobs are due")
    parser.add_argument("--lead", type=float, default=8.0, help="seconds between start of creation and the window")
    parser.add_argument("--database-url")
    args = parser.parse_args()
    target = Target()
    with tempfile.TemporaryDirectory() as data_dir:
        process, base = start_emulator(args.database_url, data_dir)
        try:
            due_at = datetime.now(UTC) + timedelta(seconds=args.lead)
            began = time.monotonic()
            asyncio.run(create_jobs(base, target.url, args.jobs, due_at, args.window))
            created_in = time.monotonic() - began
            deadline = time.monotonic() + args.lead + args.window + 30
            while len(target.arrivals) < args.jobs and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(1.0)  # anything extra (a duplicate) would arrive now
        finally:
            process.terminate()
            process.wait(15)
    lateness = sorted(
        (arrived - datetime.fromisoformat(expected.replace("Z", "+00:00")).timestamp()) * 1000
        for arrived, expected in target.arrivals
    )
    expected_set = {e for _, e in target.arrivals}
    print(f"jobs {args.jobs} due within {args.window:.1f} s (created in {created_in:.1f} s); "
          f"store {'SQLite' if not args.database_url else args.database_url.split(':')[0]}")
    print(f"fired {len(target.arrivals)}, distinct {len(expected_set)}, missing {args.jobs - len(expected_set)}")
    if lateness:
        p99 = lateness[min(len(lateness) - 1, int(len(lateness) * 0.99))]
        print(f"lateness ms: p50 {statistics.median(lateness):.1f}  p99 {p99:.1f}  max {lateness[-1]:.1f}  "
              f"min {lateness[0]:.1f}")


if __name__ == "__main__":
    main()
