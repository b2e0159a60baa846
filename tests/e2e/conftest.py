"""Fixtures of the end-to-end tests that several files share."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from support.private_postgres import PrivatePostgres

from scheduler_emulator.store.database import Database


@pytest.fixture
def private_postgres() -> Iterator[PrivatePostgres]:
    """A migrated PostgreSQL server of the test's own: stopping the shared one would break every other test
    using it."""
    with PrivatePostgres() as server:
        Database(server.url).migrate()
        yield server
