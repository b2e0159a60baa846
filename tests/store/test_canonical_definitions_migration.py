"""Rows older versions stored as the body was sent (numbers as text, "Occurrence", a lower-case frequency) are
rewritten in the canonical form by migration 0011 (migrations/versions/0011_canonical_definitions.py); a row
today's rules refuse is left as it is."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from alembic import command
from alembic.config import Config
from sqlalchemy.orm import Session
from support.databases import fresh_database

from scheduler_emulator.store.database import Database, migrations_dir
from scheduler_emulator.store.models import JobCollectionRow, JobRow

MOMENT = datetime(2026, 1, 1, tzinfo=UTC)
AS_SENT = {
    "action": {
        "type": "http",
        "request": {"uri": "https://example.org/", "method": "GET"},
        "retryPolicy": {"retryType": "fixed", "retryCount": "3", "retryInterval": "00:00:30"},
    },
    "recurrence": {
        "frequency": "month",
        "interval": "1",
        "count": "10",
        "schedule": {"minutes": ["0", 30], "hours": "6", "monthlyOccurrences": [{"day": "Monday", "Occurrence": "2"}]},
    },
}
CANONICAL = {
    "action": {
        "type": "http",
        "request": {"uri": "https://example.org/", "method": "GET"},
        "retryPolicy": {"retryType": "fixed", "retryCount": 3, "retryInterval": "00:00:30"},
    },
    "recurrence": {
        "frequency": "month",
        "interval": 1,
        "count": 10,
        "schedule": {"minutes": [0, 30], "hours": 6, "monthlyOccurrences": [{"day": "Monday", "occurrence": 2}]},
    },
}
REFUSED = {"action": {"type": "Http", "request": {"uri": "not a uri", "method": "GET"}}}


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Database]:
    with fresh_database(request.param, tmp_path_factory) as url:
        database = Database(url)
        try:
            yield database
        finally:
            database.dispose()


def _job(collection: JobCollectionRow, name: str, definition: dict[str, Any]) -> JobRow:
    return JobRow(
        collection_id=collection.id,
        name=name,
        name_key=name,
        definition=definition,
        state="Enabled",
        series_origin=MOMENT,
        created_at=MOMENT,
        updated_at=MOMENT,
    )


def test_rows_stored_as_sent_are_rewritten_canonical(database: Database) -> None:
    database.migrate()
    config = Config()
    config.set_main_option("script_location", str(migrations_dir()))
    with database.engine.begin() as connection:
        config.attributes["connection"] = connection
        command.downgrade(config, "0010")
    with Session(database.engine) as session, session.begin():
        collection = JobCollectionRow(
            subscription_id="s",
            subscription_key="s",
            resource_group="rg",
            resource_group_key="rg",
            name="jc",
            name_key="jc",
            location="West US",
            properties={"sku": {"name": "standard"}, "quota": {"maxJobCount": "10", "maxJobOccurrence": "5"}},
            sku="Standard",
            state="Enabled",
            created_at=MOMENT,
            updated_at=MOMENT,
        )
        session.add(collection)
        session.flush()
        session.add_all([_job(collection, "sent", AS_SENT), _job(collection, "refused", REFUSED)])
    database.migrate()
    with Session(database.engine) as session:
        stored = {job.name: job.definition for job in session.query(JobRow)}
        properties = session.query(JobCollectionRow).one().properties
    assert stored == {"sent": CANONICAL, "refused": REFUSED}
    assert properties == {"sku": {"name": "standard"}, "quota": {"maxJobCount": 10, "maxJobOccurrence": 5}}
