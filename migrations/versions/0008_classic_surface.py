"""the classic (2014) surface: cloud services, asynchronous operations, and a collection's label

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-24 20:20:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    with op.batch_alter_table("job_collections") as batch:
        batch.add_column(sa.Column("label", sa.Text(), nullable=True))
    op.create_table(
        "classic_cloud_services",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column("subscription_id", sa.String(100), nullable=False),
        sa.Column("subscription_key", sa.String(100), nullable=False),
        sa.Column("name", sa.String(100), nullable=False),
        sa.Column("name_key", sa.String(100), nullable=False),
        sa.Column("label", sa.Text(), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("geo_region", sa.String(100), nullable=False),
        sa.Column("email", sa.String(256), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("subscription_key", "name_key"),
    )
    op.create_table(
        "classic_operations",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("subscription_key", sa.String(100), nullable=False),
        sa.Column("http_status", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_classic_operations_created_at", "classic_operations", ["created_at"])


def downgrade() -> None:
    op.drop_index("ix_classic_operations_created_at", "classic_operations")
    op.drop_table("classic_operations")
    op.drop_table("classic_cloud_services")
    with op.batch_alter_table("job_collections") as batch:
        batch.drop_column("label")
