"""The reference point a Python user would reach for: APScheduler 3.11, an AsyncIOScheduler over a
SQLAlchemyJobStore on SQLite (default settings), one date-trigger job per request, the job an aiohttp GET
to the target with the expected-time header.

Run by bench/run.py: python bench/aps_bench.py --target URL --t0-us T --window-us W --jobs N --db PATH
The jobs are written into the job store in bulk before the scheduler starts — the very rows
SQLAlchemyJobStore.add_job would write (pickled Job state), like the emulator's store is seeded directly.
Prints "ready" once the scheduler runs, then stays up until SIGTERM or --max-seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import pickle
import signal
import time
from datetime import UTC

import aiohttp
from apscheduler.job import Job
from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.date import DateTrigger
from apscheduler.util import datetime_to_utc_timestamp
from harness import due_instant, isoformat_z

SESSION: aiohttp.ClientSession | None = None
TARGET = ""
FIRED = 0
FAILURES = 0


async def fire(index: int, expected: str) -> None:
    """The job: one GET to the target."""
    global FIRED, FAILURES
    assert SESSION is not None
    try:
        async with SESSION.get(f"{TARGET}/fire/{index}",
                               headers={"x-ms-scheduler-expected-execution-time": expected}) as response:
            await response.read()
            FAILURES += response.status != 200
    except Exception:
        FAILURES += 1
    FIRED += 1


def seed(scheduler: AsyncIOScheduler, store: SQLAlchemyJobStore, args: argparse.Namespace) -> float:
    began = time.monotonic()
    store.start(scheduler, "default")  # creates the table
    rows = []
    for i in range(args.jobs):
        when = due_instant(args.t0_us, args.window_us, i, args.jobs)
        job = Job(scheduler, id=f"job-{i:07d}", func=fire, trigger=DateTrigger(run_date=when, timezone=UTC),
                  executor="default", args=(i, isoformat_z(when)), kwargs={}, name=f"job-{i}",
                  misfire_grace_time=3600, coalesce=False, max_instances=1, next_run_time=when)
        rows.append({"id": job.id, "next_run_time": datetime_to_utc_timestamp(when),
                     "job_state": pickle.dumps(job.__getstate__(), store.pickle_protocol)})
    with store.engine.begin() as conn:
        for start in range(0, len(rows), 5000):
            conn.execute(store.jobs_t.insert(), rows[start:start + 5000])
    return time.monotonic() - began


async def main(args: argparse.Namespace) -> None:
    global SESSION, TARGET
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    TARGET = args.target
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    SESSION = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=1000),
                                    timeout=aiohttp.ClientTimeout(total=60))
    store = SQLAlchemyJobStore(url=f"sqlite:///{args.db}")
    scheduler = AsyncIOScheduler(
        jobstores={"default": store}, timezone=UTC,
        job_defaults={"misfire_grace_time": 3600, "coalesce": False, "max_instances": 1},
    )
    seconds = seed(scheduler, store, args)
    scheduler.start()
    print(f"ready seeded_in={seconds:.2f}", flush=True)
    give_up = time.monotonic() + args.max_seconds
    while not stop.is_set() and time.monotonic() < give_up and args.jobs > FIRED:
        await asyncio.sleep(0.2)
    print(f"done fired={FIRED} failures={FAILURES}", flush=True)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), timeout=max(0.0, give_up - time.monotonic()))
    scheduler.shutdown(wait=False)
    await SESSION.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", required=True)
    parser.add_argument("--t0-us", type=int, required=True)
    parser.add_argument("--window-us", type=int, required=True)
    parser.add_argument("--jobs", type=int, required=True)
    parser.add_argument("--db", required=True)
    parser.add_argument("--max-seconds", type=float, default=300)
    asyncio.run(main(parser.parse_args()))
