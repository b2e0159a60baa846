"""management certificates: the classic surface's credentials per subscription (docs/classic-api.md)

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-02 12:40:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "management_certificates",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column("subscription_key", sa.String(100), nullable=False),
        sa.Column("thumbprint", sa.String(40), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("subscription_key", "thumbprint"),
    )
    op.create_index("ix_management_certificates_thumbprint", "management_certificates", ["thumbprint"])


def downgrade() -> None:
    op.drop_table("management_certificates")
