"""a table for values about the database itself (the secret key's check value)

Secrets in job definitions are encrypted at start-up, once, by the service (it holds the key; a
migration does not): see ``Database.prepare_secrets``.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-22 23:55:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "emulator_settings",
        sa.Column("name", sa.String(100), primary_key=True),
        sa.Column("value", sa.Text(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("emulator_settings")
