"""dispatcher heartbeats hold the leases

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-22 00:44:08.482861
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "dispatchers",
        sa.Column("owner", sa.String(length=64), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("owner"),
    )
    with op.batch_alter_table("job_occurrences", schema=None) as batch_op:
        batch_op.add_column(sa.Column("first_owner", sa.String(length=64), nullable=True))
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_jobs_lease_until"))
        batch_op.create_index("ix_jobs_lease_owner", ["lease_owner"], unique=False)
        batch_op.drop_column("lease_until")


def downgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True))
        batch_op.drop_index("ix_jobs_lease_owner")
        batch_op.create_index(batch_op.f("ix_jobs_lease_until"), ["lease_until"], unique=False)

    with op.batch_alter_table("job_occurrences", schema=None) as batch_op:
        batch_op.drop_column("first_owner")
    op.drop_table("dispatchers")
