"""stored job definitions and collection properties in their canonical form: older versions stored the body as
sent, so a number sent as text ("interval": "1", "maxJobCount": "10") was answered as text; each row that still
validates is rewritten as the model's dump (schemas.job.JobProperties.canonical), which is how every write stores
it from now on. A row today's rules refuse is left as it is (the dispatcher sets such a job aside).

Sealed secrets (store/secrets.py) are strings the model keeps as they are, so rows are rewritten without the key.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-02 04:30:00
"""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa
from alembic import op
from pydantic import ValidationError

from scheduler_emulator.domain.errors import FieldError
from scheduler_emulator.schemas.job import JobDefinitionIn
from scheduler_emulator.schemas.job_collection import JobCollectionProperties

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

BATCH = 1000


def upgrade() -> None:
    _canonicalise("jobs", "definition", _canonical_definition)
    _canonicalise("job_collections", "properties", _canonical_collection)


def downgrade() -> None:
    # The canonical form reads under the older versions too (they validated it as they stored it).
    pass


def _canonical_definition(stored: dict[str, Any]) -> dict[str, Any]:
    return JobDefinitionIn.model_validate({"properties": stored}).properties.canonical()


def _canonical_collection(stored: dict[str, Any]) -> dict[str, Any]:
    return JobCollectionProperties.model_validate(stored).canonical()


def _canonicalise(table: str, column: str, canonical: Any) -> None:
    """Rewrite ``column`` of every row of ``table`` that is not yet canonical, in batches by id."""
    bind = op.get_bind()
    rows = sa.table(table, sa.column("id", sa.BigInteger), sa.column(column, sa.JSON))
    last = 0
    while True:  # bounded: ids only grow, each batch starts after the last one seen
        batch = bind.execute(
            sa.select(rows.c.id, rows.c[column]).where(rows.c.id > last).order_by(rows.c.id).limit(BATCH)
        ).all()
        if not batch:
            return
        for row_id, value in batch:
            stored = json.loads(value) if isinstance(value, str) else value
            if not isinstance(stored, dict):
                continue
            try:
                rewritten = canonical(stored)
            except (ValidationError, FieldError, ValueError):
                continue
            if rewritten != stored:
                bind.execute(sa.update(rows).where(rows.c.id == row_id).values({column: rewritten}))
        last = batch[-1][0]
