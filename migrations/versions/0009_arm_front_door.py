"""the ARM front door (Microsoft.Resources): resource groups, provider registrations, template deployments and
their operations, other providers' inert resources, and long-running operations

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-27 06:20:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
When = sa.DateTime(timezone=True)


def _scoped(*columns: sa.Column) -> list[sa.Column]:
    return [
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column("subscription_id", sa.String(100), nullable=False),
        sa.Column("subscription_key", sa.String(100), nullable=False),
        *columns,
    ]


def upgrade() -> None:
    op.create_table(
        "resource_groups",
        *_scoped(
            sa.Column("name", sa.String(100), nullable=False),
            sa.Column("name_key", sa.String(100), nullable=False),
            sa.Column("location", sa.String(100), nullable=False),
            sa.Column("tags", sa.JSON(), nullable=True),
            sa.Column("created_at", When, nullable=False),
        ),
        sa.UniqueConstraint("subscription_key", "name_key"),
    )
    op.create_table(
        "provider_registrations",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column("subscription_key", sa.String(100), nullable=False),
        sa.Column("namespace_key", sa.String(100), nullable=False),
        sa.Column("state", sa.String(20), nullable=False),
        sa.UniqueConstraint("subscription_key", "namespace_key"),
    )
    op.create_table(
        "deployments",
        *_scoped(
            sa.Column("resource_group", sa.String(100), nullable=False),
            sa.Column("resource_group_key", sa.String(100), nullable=False),
            sa.Column("name", sa.String(100), nullable=False),
            sa.Column("name_key", sa.String(100), nullable=False),
            sa.Column("state", sa.String(20), nullable=False),
            sa.Column("mode", sa.String(20), nullable=False),
            sa.Column("operation_id", sa.String(64), nullable=False),
            sa.Column("correlation_id", sa.String(64), nullable=False),
            sa.Column("template", sa.JSON(), nullable=False),
            sa.Column("template_hash", sa.String(40), nullable=False),
            sa.Column("parameters", sa.JSON(), nullable=False),
            sa.Column("plan", sa.JSON(), nullable=False),
            sa.Column("outputs", sa.JSON(), nullable=True),
            sa.Column("output_resources", sa.JSON(), nullable=True),
            sa.Column("error", sa.JSON(), nullable=True),
            sa.Column("on_error", sa.JSON(), nullable=True),
            sa.Column("cancel_requested", sa.Boolean(), nullable=False),
            sa.Column("started_at", When, nullable=False),
            sa.Column("updated_at", When, nullable=False),
        ),
        sa.UniqueConstraint("subscription_key", "resource_group_key", "name_key"),
    )
    op.create_index("ix_deployments_operation_id", "deployments", ["operation_id"])
    op.create_table(
        "deployment_operations",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column("deployment_id", BigId, sa.ForeignKey("deployments.id", ondelete="CASCADE"), nullable=False),
        sa.Column("operation_id", sa.String(40), nullable=False),
        sa.Column("resource_type", sa.String(200), nullable=False),
        sa.Column("resource_name", sa.String(300), nullable=False),
        sa.Column("target_id", sa.Text(), nullable=False),
        sa.Column("state", sa.String(20), nullable=False),
        sa.Column("status_code", sa.String(40), nullable=False),
        sa.Column("status_message", sa.JSON(), nullable=True),
        sa.Column("timestamp", When, nullable=False),
        sa.Column("duration_ms", sa.Integer(), nullable=False),
    )
    op.create_index("ix_deployment_operations_deployment_id", "deployment_operations", ["deployment_id"])
    op.create_table(
        "generic_resources",
        *_scoped(
            sa.Column("resource_group", sa.String(100), nullable=False),
            sa.Column("resource_group_key", sa.String(100), nullable=False),
            sa.Column("type", sa.String(200), nullable=False),
            sa.Column("type_key", sa.String(200), nullable=False),
            sa.Column("name", sa.String(300), nullable=False),
            sa.Column("name_key", sa.String(300), nullable=False),
            sa.Column("location", sa.String(100), nullable=True),
            sa.Column("tags", sa.JSON(), nullable=True),
            sa.Column("body", sa.JSON(), nullable=False),
            sa.Column("keys", sa.JSON(), nullable=False),
            sa.Column("created_at", When, nullable=False),
        ),
        sa.UniqueConstraint("subscription_key", "resource_group_key", "type_key", "name_key"),
    )
    op.create_table(
        "arm_operations",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("subscription_key", sa.String(100), nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("created_at", When, nullable=False),
    )
    op.create_index("ix_arm_operations_created_at", "arm_operations", ["created_at"])


def downgrade() -> None:
    op.drop_index("ix_arm_operations_created_at", "arm_operations")
    op.drop_table("arm_operations")
    op.drop_table("generic_resources")
    op.drop_index("ix_deployment_operations_deployment_id", "deployment_operations")
    op.drop_table("deployment_operations")
    op.drop_index("ix_deployments_operation_id", "deployments")
    op.drop_table("deployments")
    op.drop_table("provider_registrations")
    op.drop_table("resource_groups")
