"""Rows written straight into a store, for states the API cannot produce quickly (thousands of due jobs)
or at all (a database as an earlier version left it)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

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
