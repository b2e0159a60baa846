"""partial indexes for run requests and leases

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-22 01:15:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_index("ix_jobs_run_requested_at")
        batch_op.drop_index("ix_jobs_lease_owner")
    op.create_index(
        "ix_jobs_run_requested_at",
        "jobs",
        ["run_requested_at"],
        sqlite_where=sa.text("run_requested_at IS NOT NULL"),
        postgresql_where=sa.text("run_requested_at IS NOT NULL"),
    )
    op.create_index(
        "ix_jobs_lease_owner",
        "jobs",
        ["lease_owner"],
        sqlite_where=sa.text("lease_owner IS NOT NULL"),
        postgresql_where=sa.text("lease_owner IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_index("ix_jobs_lease_owner", table_name="jobs")
    op.drop_index("ix_jobs_run_requested_at", table_name="jobs")
    op.create_index("ix_jobs_run_requested_at", "jobs", ["run_requested_at"])
    op.create_index("ix_jobs_lease_owner", "jobs", ["lease_owner"])
