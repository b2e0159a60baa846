"""indexes for claims

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22 00:22:25.739420
"""

from __future__ import annotations

from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.create_index("ix_jobs_lease_until", ["lease_until"], unique=False)
        batch_op.create_index("ix_jobs_run_requested_at", ["run_requested_at"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_index("ix_jobs_run_requested_at")
        batch_op.drop_index("ix_jobs_lease_until")
