"""Direct access to the session server's store, for states and rows the API cannot produce yet (final job
states, counters, history entries): what it holds for a job, and columns set straight into a job's row."""

from __future__ import annotations

import copy
from typing import Any

from sqlalchemy import select

from scheduler_emulator.store.database import Database
from scheduler_emulator.store.models import JobCollectionRow, JobRow
from scheduler_emulator.store.secrets import SecretBox
from support.databases import TEST_SECRET_KEY, Backend
from support.names import Names

_databases: dict[str, Database] = {}


def store(backend: Backend) -> Database:
    """The server's own store, opened on its database (not migrated: the server did that)."""
    if backend.database_url not in _databases:
        _databases[backend.database_url] = Database(backend.database_url, SecretBox(TEST_SECRET_KEY.encode()))
    return _databases[backend.database_url]


def _collection_row(session: Any, names: Names) -> JobCollectionRow:
    row = session.scalar(
        select(JobCollectionRow).where(
            JobCollectionRow.subscription_key == names.subscription.lower(),
            JobCollectionRow.resource_group_key == names.resource_group.lower(),
            JobCollectionRow.name_key == names.collection.lower(),
        )
    )
    assert row is not None, f"no stored collection {names.collection}"
    return row


def _job_row(session: Any, names: Names, job: str) -> JobRow:
    collection = _collection_row(session, names)
    row = session.scalar(select(JobRow).where(JobRow.collection_id == collection.id, JobRow.name_key == job.lower()))
    assert row is not None, f"no stored job {job}"
    return row


def stored_job(backend: Backend, names: Names, job: str) -> dict[str, Any]:
    """What the store holds for a job: its definition (secrets included), state, counters, row id."""
    with store(backend).session() as session:
        row = _job_row(session, names, job)
        return {
            "id": row.id,
            "definition": copy.deepcopy(row.definition),
            "state": row.state,
            "counters": (row.execution_count, row.failure_count, row.faulted_count),
        }


def update_job_row(backend: Backend, names: Names, job: str, **columns: Any) -> int:
    """Set columns of a job's row directly (e.g. ``state="Completed"``); returns the row id."""
    with store(backend).session() as session:
        row = _job_row(session, names, job)
        for column, value in columns.items():
            setattr(row, column, value)
        return row.id
