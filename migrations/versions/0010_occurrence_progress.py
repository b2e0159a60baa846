"""an occurrence keeps how far it got: the action whose attempt comes next, the attempts of it made so far and when
the pending retry is due, so that a stop or a crash between retries resumes with the retries left, at their time

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-01 23:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Plain ADD COLUMNs (nullable, or with a default): no table rebuild, on SQLite either.
    op.add_column("job_occurrences", sa.Column("pending_action", sa.String(20), nullable=True))
    op.add_column(
        "job_occurrences", sa.Column("attempts_made", sa.Integer(), nullable=False, server_default=sa.text("0"))
    )
    op.add_column("job_occurrences", sa.Column("retry_at", sa.DateTime(timezone=True), nullable=True))
    # Only the occurrences with a retry pending: what the dashboard lists by time.
    op.create_index(
        "ix_job_occurrences_retry_at",
        "job_occurrences",
        ["retry_at"],
        sqlite_where=sa.text("retry_at IS NOT NULL"),
        postgresql_where=sa.text("retry_at IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_index("ix_job_occurrences_retry_at", table_name="job_occurrences")
    with op.batch_alter_table("job_occurrences") as batch_op:
        batch_op.drop_column("retry_at")
        batch_op.drop_column("attempts_made")
        batch_op.drop_column("pending_action")
