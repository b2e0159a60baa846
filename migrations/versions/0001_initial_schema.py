"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-11-21 23:56:04.573461
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:

    op.create_table(
        "job_collections",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("subscription_id", sa.String(length=100), nullable=False),
        sa.Column("subscription_key", sa.String(length=100), nullable=False),
        sa.Column("resource_group", sa.String(length=100), nullable=False),
        sa.Column("resource_group_key", sa.String(length=100), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("name_key", sa.String(length=100), nullable=False),
        sa.Column("location", sa.String(length=100), nullable=False),
        sa.Column("tags", sa.JSON(), nullable=True),
        sa.Column("properties", sa.JSON(), nullable=False),
        sa.Column("sku", sa.String(length=20), nullable=False),
        sa.Column("state", sa.String(length=20), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("subscription_key", "resource_group_key", "name_key"),
    )
    with op.batch_alter_table("job_collections", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_job_collections_subscription_key"), ["subscription_key"], unique=False)

    op.create_table(
        "jobs",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("collection_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("name_key", sa.String(length=100), nullable=False),
        sa.Column("definition", sa.JSON(), nullable=False),
        sa.Column("state", sa.String(length=20), nullable=False),
        sa.Column("series_origin", sa.DateTime(timezone=True), nullable=False),
        sa.Column("execution_count", sa.Integer(), nullable=False),
        sa.Column("failure_count", sa.Integer(), nullable=False),
        sa.Column("faulted_count", sa.Integer(), nullable=False),
        sa.Column("last_execution_time", sa.DateTime(timezone=True), nullable=True),
        sa.Column("next_execution_time", sa.DateTime(timezone=True), nullable=True),
        sa.Column("run_requested_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["collection_id"], ["job_collections.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("collection_id", "name_key"),
    )
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.create_index("ix_jobs_next_execution_time", ["next_execution_time"], unique=False)

    op.create_table(
        "job_history",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("job_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("history_id", sa.String(length=40), nullable=False),
        sa.Column("start_time", sa.DateTime(timezone=True), nullable=False),
        sa.Column("end_time", sa.DateTime(timezone=True), nullable=True),
        sa.Column("expected_execution_time", sa.DateTime(timezone=True), nullable=True),
        sa.Column("action_name", sa.String(length=20), nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("retry_count", sa.Integer(), nullable=False),
        sa.Column("repeat_count", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("history_id"),
    )
    with op.batch_alter_table("job_history", schema=None) as batch_op:
        batch_op.create_index("ix_job_history_job_id_id", ["job_id", "id"], unique=False)


def downgrade() -> None:

    with op.batch_alter_table("job_history", schema=None) as batch_op:
        batch_op.drop_index("ix_job_history_job_id_id")

    op.drop_table("job_history")
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_index("ix_jobs_next_execution_time")

    op.drop_table("jobs")
    with op.batch_alter_table("job_collections", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_job_collections_subscription_key"))

    op.drop_table("job_collections")
