"""The ceiling: a plain asyncio loop that sleeps until each due instant and fires the same request the
emulator would (GET with the expected-time header) through aiohttp — no persistence, no claims.

Run by bench/run.py: python bench/plain_loop.py --target URL --t0-us T --window-us W --jobs N
Prints "ready" once it can fire, then stays up (so its peak RSS can be read) until SIGTERM or --max-seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import time

import aiohttp
from harness import due_instant, isoformat_z


async def main(args: argparse.Namespace) -> None:
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    due = [due_instant(args.t0_us, args.window_us, i, args.jobs) for i in range(args.jobs)]
    headers = [{"x-ms-scheduler-expected-execution-time": isoformat_z(d)} for d in due]
    at = [d.timestamp() for d in due]
    failures = 0
    # The emulator's httpx client allows 1000 connections; give the ceiling the same.
    connector = aiohttp.TCPConnector(limit=1000)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=60)) as session:

        async def fire(i: int) -> None:
            nonlocal failures
            try:
                async with session.get(f"{args.target}/fire/{i}", headers=headers[i]) as response:
                    await response.read()
                    failures += response.status != 200
            except Exception:
                failures += 1

        print("ready", flush=True)
        tasks: set[asyncio.Task[None]] = set()
        i = 0
        give_up = time.monotonic() + args.max_seconds
        while i < args.jobs and not stop.is_set() and time.monotonic() < give_up:
            now = time.time()
            if at[i] > now:
                await asyncio.sleep(at[i] - now)
                continue
            while i < args.jobs and at[i] <= now:  # everything due by now, in order
                task = asyncio.create_task(fire(i))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
                i += 1
            await asyncio.sleep(0)
        if tasks:
            await asyncio.wait(tasks, timeout=max(1.0, give_up - time.monotonic()))
        print(f"done fired={i} failures={failures}", flush=True)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=max(0.0, give_up - time.monotonic()))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", required=True)
    parser.add_argument("--t0-us", type=int, required=True)
    parser.add_argument("--window-us", type=int, required=True)
    parser.add_argument("--jobs", type=int, required=True)
    parser.add_argument("--max-seconds", type=float, default=300)
    asyncio.run(main(parser.parse_args()))
