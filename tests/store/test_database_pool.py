"""The PostgreSQL connection pool across a server restart: a pooled connection that sat idle while the server
restarted is replaced before it is handed out, so the first transaction afterwards succeeds (the pool checks
only idle connections, not one per transaction)."""

from __future__ import annotations

import time

import pytest
from sqlalchemy import text
from sqlalchemy.exc import OperationalError
from support.private_postgres import PrivatePostgres

from scheduler_emulator.store import database as database_module
from scheduler_emulator.store.database import Database


def _backend_pid(db: Database) -> int:
    with db.session() as session:
        return int(session.execute(text("SELECT pg_backend_pid()")).scalar_one())


def test_a_connection_idle_through_a_restart_is_replaced_before_use() -> None:
    with PrivatePostgres() as server:
        db = Database(server.url)
        try:
            first = _backend_pid(db)
            assert _backend_pid(db) == first, "a busy pool reuses its connection"
            server.stop()
            server.start()
            time.sleep(database_module.IDLE_PING_SECONDS + 0.2)
            assert _backend_pid(db) != first  # no error: the dead connection was replaced at checkout
        finally:
            db.engine.dispose()


def test_without_the_idle_check_the_first_transaction_after_a_restart_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    """The counterpart that shows what the check buys: the same restart, the connection used again at once."""
    monkeypatch.setattr(database_module, "IDLE_PING_SECONDS", 3600.0)
    with PrivatePostgres() as server:
        db = Database(server.url)
        try:
            _backend_pid(db)
            server.stop()
            server.start()
            with pytest.raises(OperationalError):
                _backend_pid(db)
            _backend_pid(db)  # and SQLAlchemy replaced it after that one failure
        finally:
            db.engine.dispose()
