"""Which HTTP client for the dispatcher's hot path: requests/s of httpx and aiohttp against a local nginx
at several concurrency levels, in one asyncio process (as the dispatcher is).

Usage: python bench/http_clients.py [--seconds 5] [--concurrency 1 8 64]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import aiohttp
import httpx

NGINX_CONF = """
worker_processes 1;
pid {dir}/nginx.pid;
error_log {dir}/error.log;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    keepalive_requests 1000000;
    server {{
        listen 127.0.0.1:{port};
        location / {{ return 200 "ok"; }}
    }}
}}
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def drive(send: object, concurrency: int, seconds: float) -> tuple[int, float]:
    done = 0
    deadline = time.perf_counter() + seconds

    async def worker() -> None:
        nonlocal done
        while time.perf_counter() < deadline:
            await send()  # type: ignore[operator]
            done += 1

    began = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return done, time.perf_counter() - began


async def measure(url: str, concurrency: int, seconds: float) -> dict[str, float]:
    results = {}
    headers = {"x-ms-scheduler-jobid": "bench", "x-ms-execution-tag": "0" * 32}
    async with httpx.AsyncClient(limits=httpx.Limits(max_connections=1000, max_keepalive_connections=200)) as client:
        async def httpx_send() -> None:
            response = await client.get(url, headers=headers)
            response.raise_for_status()

        count, elapsed = await drive(httpx_send, concurrency, seconds)
        results["httpx"] = count / elapsed
    connector = aiohttp.TCPConnector(limit=1000)
    async with aiohttp.ClientSession(connector=connector) as session:
        async def aiohttp_send() -> None:
            async with session.get(url, headers=headers) as response:
                await response.read()
                response.raise_for_status()

        count, elapsed = await drive(aiohttp_send, concurrency, seconds)
        results["aiohttp"] = count / elapsed
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 64])
    args = parser.parse_args()
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    with tempfile.TemporaryDirectory() as directory:
        port = free_port()
        conf = Path(directory) / "nginx.conf"
        conf.write_text(NGINX_CONF.format(dir=directory, port=port))
        process = subprocess.Popen([nginx, "-c", str(conf), "-p", directory, "-g", "daemon off;"])
        try:
            time.sleep(0.5)
            url = f"http://127.0.0.1:{port}/fire"
            print(f"{'concurrency':>11}  {'httpx req/s':>11}  {'aiohttp req/s':>13}")
            for concurrency in args.concurrency:
                result = asyncio.run(measure(url, concurrency, args.seconds))
                print(f"{concurrency:>11}  {result['httpx']:>11.0f}  {result['aiohttp']:>13.0f}")
        finally:
            process.terminate()
            process.wait(10)


if __name__ == "__main__":
    main()
