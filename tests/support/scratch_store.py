"""What the in-process dispatcher and store tests share: a migrated scratch database of either kind and job
rows written straight into the store (these tests drive the dispatcher's side only; their clock is
support.clocks.SetClock)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import insert

from scheduler_emulator.store.database import Database
from scheduler_emulator.store.models import JobCollectionRow, JobRow
from support.databases import PostgresDatabase, require_postgres

T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
BACKENDS = ["sqlite", "postgresql"]


@contextmanager
def scratch_database(kind: str, folder: Path) -> Iterator[Database]:
    """A fresh, migrated database: a SQLite file in ``folder``, or a PostgreSQL database dropped afterwards."""
    pg: PostgresDatabase | None = None
    if kind == "sqlite":
        url = f"sqlite:///{folder / 'scheduler.db'}"
    else:
        require_postgres()
        pg = PostgresDatabase().create()
        url = pg.url
    database = Database(url)
    try:
        database.migrate()
        yield database
    finally:
        database.dispose()
        if pg is not None:
            pg.drop()


def add_collection(database: Database, name: str = "c", state: str = "Enabled") -> int:
    """A P20Premium job collection in West US; its id."""
    with database.session() as session:
        return int(
            session.execute(
                insert(JobCollectionRow).returning(JobCollectionRow.id),
                {
                    "subscription_id": "s",
                    "subscription_key": "s",
                    "resource_group": "g",
                    "resource_group_key": "g",
                    "name": name,
                    "name_key": name.lower(),
                    "location": "West US",
                    "properties": {"state": state},
                    "sku": "P20Premium",
                    "state": state,
                    "created_at": T0,
                    "updated_at": T0,
                },
            ).scalar_one()
        )


def add_job(
    database: Database,
    collection_id: int,
    name: str,
    due: datetime | None,
    *,
    uri: str = "http://127.0.0.1:1/",
    recurrence: dict[str, Any] | None = None,
    state: str = "Enabled",
    **columns: Any,
) -> int:
    """An Http GET job next due at ``due`` (its start time and series origin too; T0 when None); its id."""
    definition: dict[str, Any] = {
        "action": {"type": "Http", "request": {"uri": uri, "method": "GET"}},
        "startTime": (due or T0).isoformat(),
    }
    if recurrence:
        definition["recurrence"] = recurrence
    with database.session() as session:
        return int(
            session.execute(
                insert(JobRow).returning(JobRow.id),
                {
                    "collection_id": collection_id,
                    "name": name,
                    "name_key": name.lower(),
                    "definition": definition,
                    "state": state,
                    "series_origin": due or T0,
                    "next_execution_time": due,
                    "version": 1,
                    "execution_count": 0,
                    "failure_count": 0,
                    "faulted_count": 0,
                    "repeat_count": 0,
                    "created_at": T0,
                    "updated_at": T0,
                    **columns,
                },
            ).scalar_one()
        )
