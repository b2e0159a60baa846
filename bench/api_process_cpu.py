"""CPU per request of one emulator's API process on PostgreSQL (default flags; its dispatcher child not counted),
and of PostgreSQL's own processes over the same requests: 500 warm-up creates, then N creates, N GETs and N creates
again, from 16 clients, user and kernel time apart. Run from a tree's root (bench/ab.sh's trees have one each), so
that two commits are measured back to back on one host:
    .venv/bin/python bench/api_process_cpu.py [N]
bench/README.md#the-apis-way-into-postgresql has its figures."""

import asyncio
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import aiohttp

sys.path.insert(0, "bench")
import harness as h  # noqa: E402

N = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
CLIENTS = 16
COLLECTIONS = 30
Request = tuple[str, str, dict | None]


def postgres_cpu() -> float:
    """CPU seconds used so far by every process named postgres: the server's backends that exist now, plus those
    gone (their time is in their parent's fields for waited-for children, cutime and cstime)."""
    total = 0.0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        if "(postgres)" not in text:
            continue
        fields = text[text.rindex(")") + 2 :].split()
        total += sum(int(f) for f in fields[11:15]) / h.CLK_TCK
    return total


async def main(base: str, pid: int) -> None:
    root = f"{h.arm_root(base)}/jobCollections"
    start = h.isoformat_z(datetime.now(UTC) + timedelta(days=1))

    def body(i: int) -> dict:
        request = {"uri": "http://127.0.0.1:9/never", "method": "POST", "body": f"job {i}"}
        return {"properties": {"startTime": start, "action": {"type": "Http", "request": request}}}

    def create(prefix: str) -> Callable[[int], Request]:
        return lambda i: ("PUT", f"{root}/api-{i % COLLECTIONS:03d}/jobs/{prefix}-{i:07d}", body(i))

    def read(i: int) -> Request:
        return ("GET", f"{root}/api-{i % COLLECTIONS:03d}/jobs/job-{i % N:07d}", None)

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=CLIENTS)) as client:
        collection = {"location": "westus", "properties": {"sku": {"name": "P20Premium"}}}
        for c in range(COLLECTIONS):
            async with client.put(f"{root}/api-{c:03d}", params=h.API, json=collection) as r:
                r.raise_for_status()

        async def run(label: str, make: Callable[[int], Request], n: int) -> None:
            numbers = iter(range(n))

            async def client_loop() -> None:
                for i in numbers:
                    method, url, json = make(i)
                    async with client.request(method, url, params=h.API, json=json) as r:
                        await r.read()
                        assert r.status < 300, r.status

            cpu0, pg0, t0 = h.proc_cpu_split(pid), postgres_cpu(), time.perf_counter()
            await asyncio.gather(*(client_loop() for _ in range(CLIENTS)))
            cpu1, pg1, elapsed = h.proc_cpu_split(pid), postgres_cpu(), time.perf_counter() - t0
            user, system = cpu1[0] - cpu0[0], cpu1[1] - cpu0[1]
            print(
                f"{label}: {n} in {elapsed:.1f} s, API process CPU {1000 * (user + system) / n:.3f} ms/request "
                f"(user {1000 * user / n:.3f}, kernel {1000 * system / n:.3f}); "
                f"PostgreSQL's processes {1000 * (pg1 - pg0) / n:.3f} ms/request"
            )

        await run("PUT warm-up", create("warm"), 500)
        await run("PUT job (create)", create("job"), N)
        await run("GET job", read, N)
        await run("PUT job (create), again", create("two"), N)


tmp = Path(tempfile.mkdtemp())
url = h.create_pg_database()
emulator = h.Emulator(tmp / "d", url, defaults=True)
try:
    asyncio.run(main(emulator.start(), emulator.pids[0]))
finally:
    emulator.stop()
    h.drop_pg_database(url)
    shutil.rmtree(tmp, ignore_errors=True)
