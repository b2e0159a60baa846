"""CPU of the dispatcher's store port per job, in one process with no HTTP: claim N due one-time Http jobs in
batches of 200 (as the dispatcher's loop does), then complete them in batches of 100 (as its recorder writes
them). Only this process's CPU is counted (time.process_time: the database server's is not), so a change to
the claim or the completion shows here with less noise than in the fire-rate runs, where HTTP and the event
loop share the core.

Usage: .venv/bin/python bench/store_cost.py [--stores sqlite,pg] [--jobs 30000] [--rounds 3]
Prints µs of CPU per claimed job and per completed job, each round and the median; PostgreSQL as in run.py
(BENCH_PG), a fresh database per round, dropped afterwards.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import harness as h

from scheduler_emulator.collector import tune_garbage_collector
from scheduler_emulator.dispatcher.definitions import Claim, read_definition
from scheduler_emulator.domain.history import history_id
from scheduler_emulator.domain.states import ActionName, AttemptStatus
from scheduler_emulator.store.database import Database
from scheduler_emulator.store.dispatch_port import DispatchStore
from scheduler_emulator.store.dispatch_records import AttemptRecord, Completion

CLAIM_BATCH = 200
WRITE_BATCH = 100


def completion(claim: Claim) -> Completion:
    """A successful first attempt, as the dispatcher records it."""
    ended = datetime.now(UTC)
    attempt = AttemptRecord(
        job_id=claim.job_id,
        history_id=history_id(ended),
        start_time=ended,
        end_time=ended,
        expected_time=claim.expected_time,
        action_name=ActionName.MainAction,
        status=AttemptStatus.Completed,
        message="Http Action - Response from host '127.0.0.1': '200 OK' Body: ok",
        retry_count=0,
        repeat_count=claim.repeat_count,
        counts_as_execution=True,
    )
    return Completion(claim=claim, attempt=attempt, count_fault=False, faulted=False, max_occurrences=None)


def one_round(store_kind: str, jobs: int) -> tuple[float, float]:
    """(µs per claimed job, µs per completed job) for a fresh store of ``jobs`` due jobs."""
    tmp = Path(tempfile.mkdtemp(prefix="store-cost-"))
    url = h.create_pg_database() if store_kind == "pg" else f"sqlite:///{tmp}/store.sqlite"
    database = None
    try:
        h.make_template(tmp / "template", url, "http://127.0.0.1:9/fire/template")
        now = datetime.now(UTC)
        due = [now - timedelta(seconds=60) + timedelta(microseconds=i) for i in range(jobs)]
        h.seed_jobs(url, due, lambda i: f"http://127.0.0.1:9/fire/{i}")
        database = Database(url)
        store = DispatchStore(database, "store-cost", read_definition=read_definition)
        store.heartbeat(now, now + timedelta(hours=1))
        tune_garbage_collector()  # as the service does once it is built
        claims: list[Claim] = []
        began = time.process_time()
        for _ in range(jobs // CLAIM_BATCH + 10):  # bounded: each pass claims up to a batch
            batch = store.claim_due(datetime.now(UTC), CLAIM_BATCH)
            if not batch:
                break
            claims += batch
        claim_us = (time.process_time() - began) / max(1, len(claims)) * 1e6
        if len(claims) != jobs:
            raise RuntimeError(f"claimed {len(claims)} of {jobs} jobs")
        began = time.process_time()
        for start in range(0, len(claims), WRITE_BATCH):
            store.write([completion(claim) for claim in claims[start : start + WRITE_BATCH]])
        complete_us = (time.process_time() - began) / len(claims) * 1e6
        return claim_us, complete_us
    finally:
        if database is not None:
            database.dispose()
        if store_kind == "pg":
            h.drop_pg_database(url)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stores", default="sqlite,pg")
    parser.add_argument("--jobs", type=int, default=30_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    for store_kind in args.stores.split(","):
        claims, completions = [], []
        for index in range(args.rounds):
            claim_us, complete_us = one_round(store_kind, args.jobs)
            claims.append(claim_us)
            completions.append(complete_us)
            print(f"{store_kind} round {index + 1}: claim {claim_us:.1f} µs/job, complete {complete_us:.1f} µs/job",
                  flush=True)
        print(f"{store_kind}: median claim {statistics.median(claims):.1f} µs/job, "
              f"complete {statistics.median(completions):.1f} µs/job ({args.jobs:,} jobs, {args.rounds} rounds)",
              flush=True)


if __name__ == "__main__":
    main()
