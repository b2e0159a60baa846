"""PostgreSQL: the function a new job's guarded insert calls (store.repository._guarded_job_insert), which takes the
collection's write lock and then checks, on a snapshot taken once the lock is granted, that the collection is still
the version read and holds fewer jobs than its limit: the lock and the insert are one statement, one round trip.

Revision ID: 0012
Revises: 0010
Create Date: 2026-12-02 04:40:00
"""

from __future__ import annotations

from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

# VOLATILE plpgsql: each statement inside takes its own snapshot (at READ COMMITTED), so the SELECT after the lock
# sees every write committed by the lock's previous holder, although the calling INSERT's snapshot is older. The
# advisory lock is the one store.write_scope.collection_lock names (hashtext, as store.repository.advisory_lock).
JOB_SLOT = """
CREATE OR REPLACE FUNCTION scheduler_job_slot(_lock text, _collection bigint, _version text, _max_jobs integer)
RETURNS boolean LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    free boolean;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext(_lock));
    SELECT EXISTS (SELECT 1 FROM job_collections c WHERE c.id = _collection AND c.xmin::text = _version)
        AND (SELECT count(*) FROM jobs j WHERE j.collection_id = _collection) < _max_jobs
    INTO free;
    RETURN free;
END
$$
"""


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(JOB_SLOT)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP FUNCTION IF EXISTS scheduler_job_slot(text, bigint, text, integer)")
