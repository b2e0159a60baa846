"""The dispatcher's database path alone, in one process, no network: claim N due one-time jobs in batches and
complete their occurrences in batches through the store port (DispatchStore), as the dispatcher does, and print
the CPU microseconds each costs per occurrence. A quick, repeatable gauge of the per-fire persistence cost (the
part the HTTP client does not set).

    .venv/bin/python bench/dbpath.py [--jobs 20000] [--batch 500] [--database-url URL|postgresql] [--profile]

With --profile, DBPATH_CALLERS=<regex> also prints who called the functions matching it.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import insert

from scheduler_emulator.dispatcher.definitions import read_definition
from scheduler_emulator.domain.history import history_id
from scheduler_emulator.domain.states import ActionName, AttemptStatus
from scheduler_emulator.store.database import Database
from scheduler_emulator.store.dispatch_port import DispatchStore
from scheduler_emulator.store.dispatch_records import AttemptRecord, Completion
from scheduler_emulator.store.models import JobCollectionRow, JobRow


def seed(database: Database, jobs: int, due: datetime) -> None:
    now = datetime.now(UTC)
    with database.engine.begin() as conn:
        collection_id = conn.execute(
            insert(JobCollectionRow).returning(JobCollectionRow.id),
            {
                "subscription_id": "s", "subscription_key": "s", "resource_group": "g", "resource_group_key": "g",
                "name": "c", "name_key": "c", "location": "West US", "properties": {"state": "Enabled"},
                "sku": "P20Premium", "state": "Enabled", "created_at": now, "updated_at": now,
            },
        ).scalar_one()
        rows = [
            {
                "collection_id": collection_id, "name": f"job-{i}", "name_key": f"job-{i}",
                "definition": {
                    "action": {"type": "Http", "request": {"uri": f"http://127.0.0.1:1/fire/{i}", "method": "GET"}},
                    "startTime": due.isoformat(),
                },
                "state": "Enabled", "series_origin": now, "next_execution_time": due, "version": 1,
                "execution_count": 0, "failure_count": 0, "faulted_count": 0, "repeat_count": 0,
                "created_at": now, "updated_at": now,
            }
            for i in range(jobs)
        ]
        conn.execute(insert(JobRow), rows)


@contextmanager
def scratch_database(choice: str | None, folder: Path) -> Iterator[str]:
    if choice != "postgresql":
        yield choice or f"sqlite:///{folder / 'dbpath.db'}"
        return
    import psycopg

    admin, name = "postgresql://postgres@127.0.0.1:5432/postgres", f"dbpath_{os.getpid()}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"postgresql://postgres@127.0.0.1:5432/{name}"
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--database-url", help="default: a SQLite file; 'postgresql' for a fresh database on "
                        "postgresql://postgres@127.0.0.1:5432 (dropped afterwards)")
    parser.add_argument("--profile", action="store_true", help="print the top functions (cProfile)")
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, scratch_database(opts.database_url, Path(tmp)) as url:
        database = Database(url)
        database.migrate()
        due = datetime.now(UTC) - timedelta(seconds=1)
        seed(database, opts.jobs, due)
        store = DispatchStore(database, "bench:dbpath", read_definition=read_definition, history_max_entries=1000)
        profiler = cProfile.Profile() if opts.profile else None
        claims = []
        began = time.process_time()
        if profiler:
            profiler.enable()
        for _ in range(opts.jobs // opts.batch + 2):
            batch = store.claim_due(datetime.now(UTC), opts.batch)
            if not batch:
                break
            claims += batch
        claimed = time.process_time()
        for start in range(0, len(claims), opts.batch):
            completions = []
            for claim in claims[start:start + opts.batch]:
                moment = datetime.now(UTC)
                attempt = AttemptRecord(
                    job_id=claim.job_id, history_id=history_id(moment), start_time=moment, end_time=moment,
                    expected_time=claim.expected_time, action_name=ActionName.MainAction,
                    status=AttemptStatus.Completed,
                    message="Http Action - Response from host '127.0.0.1': '200 OK' Body: ok", retry_count=0,
                    repeat_count=claim.repeat_count, counts_as_execution=True,
                )
                completions.append(Completion(claim=claim, attempt=attempt, count_fault=False, faulted=False,
                                              max_occurrences=None))
            store.write(completions)
        completed = time.process_time()
        if profiler:
            profiler.disable()
        database.dispose()
    n = max(1, len(claims))
    print(f"{database.dialect}: {len(claims):,} occurrences in batches of {opts.batch}: "
          f"claim {1e6 * (claimed - began) / n:.0f} µs, complete {1e6 * (completed - claimed) / n:.0f} µs, "
          f"total {1e6 * (completed - began) / n:.0f} µs CPU per occurrence")
    if profiler:
        pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
        if os.environ.get("DBPATH_CALLERS"):
            pstats.Stats(profiler).print_callers(os.environ["DBPATH_CALLERS"])


if __name__ == "__main__":
    main()
