"""Rows written straight into a store, for states the API cannot produce quickly (thousands of due jobs)
or at all (a database as an earlier version left it)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import select

from scheduler_emulator.store.database import Database
from scheduler_emulator.store.models import JobCollectionRow, JobRow
from support.names import Names


def collection_row(names: Names, now: datetime, location: str, sku: str, **properties: Any) -> JobCollectionRow:
    """The row of the enabled collection ``names`` holds, with this location and SKU."""
    return JobCollectionRow(
        subscription_id=names.subscription,
        subscription_key=names.subscription.lower(),
        resource_group=names.resource_group,
        resource_group_key=names.resource_group.lower(),
        name=names.collection,
        name_key=names.collection.lower(),
        location=location,
        properties={"sku": {"name": sku}, **properties},
        sku=sku,
        state="Enabled",
        created_at=now,
        updated_at=now,
    )


def job_row(
    collection: JobCollectionRow, name: str, definition: dict[str, Any], now: datetime, **columns: Any
) -> JobRow:
    """The row of an enabled job of ``collection`` (flushed, so that it has its id) with this definition."""
    return JobRow(
        collection_id=collection.id,
        name=name,
        name_key=name.lower(),
        definition=definition,
        state="Enabled",
        series_origin=now,
        created_at=now,
        updated_at=now,
        **columns,
    )


def insert_due_jobs(
    database_url: str, names: Names, prefix: str, count: int, first: datetime, window: float, uri: str
) -> None:
    """``count`` one-time jobs due uniformly over ``window`` seconds from ``first``, written straight into
    the store (creating thousands through the API would take longer than the run itself)."""
    database = Database(database_url)
    now = datetime.now(UTC)
    try:
        with database.session() as session:
            collection = session.scalar(select(JobCollectionRow).where(JobCollectionRow.name == names.collection))
            if collection is None:
                collection = collection_row(names, now, "West US", "P20Premium")
                session.add(collection)
                session.flush()
            rows = []
            for index in range(count):
                due = first + timedelta(seconds=window * index / count)
                name = f"{prefix}{index}"
                definition = {
                    "startTime": due.isoformat(),
                    "action": {
                        "type": "Http",
                        "request": {"uri": f"{uri}/{name}", "method": "GET"},
                        "retryPolicy": {"retryType": "None"},
                    },
                }
                rows.append(
                    job_row(
                        collection,
                        name,
                        definition,
                        now,
                        next_execution_time=due,
                        version=1,
                        repeat_count=0,
                        execution_count=0,
                        failure_count=0,
                        faulted_count=0,
                    )
                )
            session.add_all(rows)
    finally:
        database.dispose()
