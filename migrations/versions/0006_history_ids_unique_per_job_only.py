"""history ids are no longer unique across all jobs

A history id is the entry's time in .NET ticks plus two digits, shown under its job's path only. Dispatcher
processes sharing one PostgreSQL database can stamp entries of different jobs in the same microsecond with the
same digits; a table-wide unique key then refused the second entry, and that occurrence never finished.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-22 06:30:00
"""

from __future__ import annotations

from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

# 0001 created the constraint unnamed: PostgreSQL named it job_history_history_id_key; on SQLite it is found
# through this naming convention when the table is rebuilt.
_CONVENTION = {"uq": "uq_%(table_name)s_%(column_0_name)s"}


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.drop_constraint("job_history_history_id_key", "job_history", type_="unique")
    else:
        with op.batch_alter_table("job_history", naming_convention=_CONVENTION) as batch_op:
            batch_op.drop_constraint("uq_job_history_history_id", type_="unique")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.create_unique_constraint("job_history_history_id_key", "job_history", ["history_id"])
    else:
        with op.batch_alter_table("job_history", naming_convention=_CONVENTION) as batch_op:
            batch_op.create_unique_constraint("uq_job_history_history_id", ["history_id"])
