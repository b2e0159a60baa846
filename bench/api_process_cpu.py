"""CPU per request of one emulator's API process on PostgreSQL (default flags; its dispatcher child not counted):
500 warm-up creates, then N creates, N GETs and N creates again, 16 clients, user and kernel time apart. Run from a
tree's root (bench/ab.sh's trees have one each), so that two commits are measured back to back on one host:
    .venv/bin/python bench/api_process_cpu.py [N]"""
import asyncio
import shutil
import sys
import tempfile
import time
from pathlib import Path
from datetime import UTC, datetime, timedelta
sys.path.insert(0, "bench")
import harness as h
import aiohttp

N = int(sys.argv[1]) if len(sys.argv) > 1 else 3000

async def main(base, pid):
    root = f"{h.arm_root(base)}/jobCollections"
    conn = aiohttp.TCPConnector(limit=16)
    async with aiohttp.ClientSession(connector=conn) as client:
        for c in range(30):
            async with client.put(f"{root}/api-{c:03d}", params=h.API, json={"location": "westus", "properties": {"sku": {"name": "P20Premium"}}}) as r:
                r.raise_for_status()
        start = h.isoformat_z(datetime.now(UTC) + timedelta(days=1))
        def body(i): return {"properties": {"startTime": start, "action": {"type": "Http", "request": {"uri": "http://127.0.0.1:9/never", "method": "POST", "body": f"job {i}"}}}}
        async def run(label, make, n):
            it = iter(range(n))
            cpu0 = h.proc_cpu_split(pid); t0 = time.perf_counter()
            async def worker():
                for i in it:
                    m, url, js = make(i)
                    async with client.request(m, url, params=h.API, json=js) as r:
                        await r.read(); assert r.status < 300, r.status
            await asyncio.gather(*(worker() for _ in range(16)))
            cpu1 = h.proc_cpu_split(pid); el = time.perf_counter() - t0
            user, system = cpu1[0] - cpu0[0], cpu1[1] - cpu0[1]
            print(f"{label}: {n} in {el:.1f} s, API process CPU {1000 * (user + system) / n:.3f} ms/request "
                  f"(user {1000 * user / n:.3f}, kernel {1000 * system / n:.3f})")
        put = lambda i: ("PUT", f"{root}/api-{i % 30:03d}/jobs/job-{i:07d}", body(i))
        get = lambda i: ("GET", f"{root}/api-{i % 30:03d}/jobs/job-{i % N:07d}", None)
        await run("PUT warm-up", lambda i: ("PUT", f"{root}/api-{i % 30:03d}/jobs/warm-{i:07d}", body(i)), 500)
        await run("PUT job (create)", put, N)
        await run("GET job", get, N)
        await run("PUT job (create), again", lambda i: ("PUT", f"{root}/api-{i % 30:03d}/jobs/two-{i:07d}", body(i)), N)


tmp = Path(tempfile.mkdtemp())
url = h.create_pg_database()
e = h.Emulator(tmp / "d", url, defaults=True)
try:
    base = e.start()
    asyncio.run(main(base, e.pids[0]))
finally:
    e.stop(); h.drop_pg_database(url); shutil.rmtree(tmp, ignore_errors=True)
