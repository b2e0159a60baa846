"""role assignments (Microsoft.Authorization): a role given to a principal at a scope (docs/reference/authorization.md)

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-02 11:50:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
When = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "role_assignments",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column("name", sa.String(36), nullable=False),
        sa.Column("scope", sa.String(400), nullable=False),
        sa.Column("scope_key", sa.String(400), nullable=False),
        sa.Column("subscription_key", sa.String(100), nullable=False),
        sa.Column("role_definition_id", sa.String(36), nullable=False),
        sa.Column("principal_id", sa.String(100), nullable=False),
        sa.Column("principal_key", sa.String(100), nullable=False),
        sa.Column("principal_type", sa.String(40), nullable=False),
        sa.Column("created_by", sa.String(100), nullable=True),
        sa.Column("created_at", When, nullable=False),
        sa.Column("updated_at", When, nullable=False),
        sa.UniqueConstraint("name"),
    )
    op.create_index("ix_role_assignments_scope_key", "role_assignments", ["scope_key"])
    op.create_index("ix_role_assignments_subscription_key", "role_assignments", ["subscription_key"])
    op.create_index("ix_role_assignments_principal_key", "role_assignments", ["principal_key"])


def downgrade() -> None:
    op.drop_table("role_assignments")
