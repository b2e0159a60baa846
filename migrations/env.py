"""Alembic environment: uses the connection the service hands over, or SCHEDULER_DATABASE_URL."""

from __future__ import annotations

from alembic import context

from scheduler_emulator.config import load_settings
from scheduler_emulator.store.database import Database, hold_migration_lock
from scheduler_emulator.store.models import Base

config = context.config
target_metadata = Base.metadata


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        context.configure(connection=connection, target_metadata=target_metadata, render_as_batch=True)
        with context.begin_transaction():
            context.run_migrations()
        return
    database = Database(load_settings().store.url)
    with database.engine.begin() as own_connection:
        hold_migration_lock(own_connection)  # as the service does at start (Database.migrate)
        context.configure(connection=own_connection, target_metadata=target_metadata, render_as_batch=True)
        with context.begin_transaction():
            context.run_migrations()
    database.dispose()


run_migrations_online()
