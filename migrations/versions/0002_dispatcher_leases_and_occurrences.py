"""dispatcher leases and occurrences

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22 00:04:02.902825
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "job_occurrences",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("job_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("expected_time", sa.DateTime(timezone=True), nullable=False),
        sa.Column("repeat_count", sa.Integer(), nullable=False),
        sa.Column("owner", sa.String(length=64), nullable=False),
        sa.Column("claimed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("outcome", sa.String(length=20), nullable=True),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("job_id", "expected_time"),
    )
    with op.batch_alter_table("job_occurrences", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_job_occurrences_job_id"), ["job_id"], unique=False)

    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("version", sa.Integer(), nullable=False, server_default="1"))
        batch_op.add_column(sa.Column("repeat_count", sa.Integer(), nullable=False, server_default="0"))
        batch_op.add_column(sa.Column("lease_owner", sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_column("finished_at")
        batch_op.drop_column("lease_until")
        batch_op.drop_column("lease_owner")
        batch_op.drop_column("repeat_count")
        batch_op.drop_column("version")

    with op.batch_alter_table("job_occurrences", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_job_occurrences_job_id"))

    op.drop_table("job_occurrences")
