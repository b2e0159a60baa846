"""The stores tests run on: the PostgreSQL test server (``require_postgres``, a fresh ``PostgresDatabase``),
``fresh_database`` of either kind, and the secret key the session server seals stored secrets with."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pytest

from support.environment import IN_CI
from support.waiting import unique

if TYPE_CHECKING:
    from scheduler_emulator.store.database import Database

PG_ADMIN_DSN = os.environ.get("SCHEDULER_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")
# The session server's key for stored secrets, so that tests reading its database directly can open them.
TEST_SECRET_KEY = "8Jm0nWv3kqy7cGk1c4mQb2mJ0d9h0b3x2y1z0a9b8c4="


def require_postgres() -> None:
    """Skip locally, fail in CI, when the PostgreSQL server is not reachable."""
    import psycopg

    try:
        psycopg.connect(PG_ADMIN_DSN, connect_timeout=3).close()
    except Exception as exc:  # noqa: BLE001 - report whatever stops the connection
        message = f"PostgreSQL is needed at {PG_ADMIN_DSN} for this test and is unreachable: {exc}"
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)


@dataclass
class PostgresDatabase:
    """A fresh database on the test server, dropped afterwards."""

    name: str = field(default_factory=lambda: unique("sched_test_"))

    @property
    def url(self) -> str:
        base = PG_ADMIN_DSN.rsplit("/", 1)[0]
        return f"{base}/{self.name}"

    def create(self) -> PostgresDatabase:
        import psycopg

        with psycopg.connect(PG_ADMIN_DSN, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{self.name}"')
        return self

    def drop(self) -> None:
        import psycopg

        with psycopg.connect(PG_ADMIN_DSN, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')


@dataclass
class Backend:
    """One store the API tests run on: its kind (``sqlite`` or ``postgresql``) and URL."""

    name: str
    database_url: str


@contextmanager
def fresh_database(kind: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The URL of a new, empty store of this kind: ``sqlite`` (a file in a new directory) or ``postgresql``
    (a database on the test server, dropped on leaving; skipped or failed as ``require_postgres`` says)."""
    if kind == "sqlite":
        yield f"sqlite:///{tmp_path_factory.mktemp('sqlite') / 'scheduler.db'}"
        return
    require_postgres()
    database = PostgresDatabase().create()
    try:
        yield database.url
    finally:
        database.drop()


@contextmanager
def sealing_postgres_database(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Database]:
    """A migrated Database over a new PostgreSQL database that seals secrets with a key of its own; disposed on
    leaving."""
    from cryptography.fernet import Fernet

    from scheduler_emulator.store.database import Database
    from scheduler_emulator.store.secrets import SecretBox

    with fresh_database("postgresql", tmp_path_factory) as url:
        database = Database(url, SecretBox(Fernet.generate_key()))
        try:
            database.migrate()
            yield database
        finally:
            database.dispose()
