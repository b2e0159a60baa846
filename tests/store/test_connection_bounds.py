"""The time bounds on the service's PostgreSQL connections: each flag (``--db-statement-timeout``,
``--db-lock-timeout``, ``--db-idle-in-transaction-timeout``, ``--db-keepalive``) with its default derived from
``--lease-seconds``, what the server then holds for the session, the client socket's keepalives, and what each
bound does: a long statement and a long lock wait end with an error; a session left idle inside a transaction
is ended by the server, releasing its locks."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import psycopg
import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError, OperationalError
from support.databases import PostgresDatabase, require_postgres

from scheduler_emulator.config import ConfigError, settings_from_args
from scheduler_emulator.dispatcher.here import connection_bounds
from scheduler_emulator.store.database import ConnectionBounds, Database


@pytest.fixture(scope="module")
def postgres() -> Iterator[PostgresDatabase]:
    require_postgres()
    database = PostgresDatabase().create()
    Database(database.url).migrate()
    yield database
    database.drop()


def bounds(*argv: str) -> ConnectionBounds:
    return connection_bounds(settings_from_args(list(argv)).store)


def test_defaults_follow_the_lease() -> None:
    assert bounds() == ConnectionBounds(statement=30, lock=10, idle_in_transaction=10, keepalive=15)
    assert bounds("--lease-seconds", "12") == ConnectionBounds(statement=12, lock=4, idle_in_transaction=4, keepalive=6)
    # Short leases (tests): the lock and idle bounds keep a second, keepalives three.
    assert bounds("--lease-seconds", "2") == ConnectionBounds(statement=2, lock=1, idle_in_transaction=1, keepalive=3)


@pytest.mark.parametrize(
    ("flag", "field"),
    [
        ("--db-statement-timeout", "statement"),
        ("--db-lock-timeout", "lock"),
        ("--db-idle-in-transaction-timeout", "idle_in_transaction"),
        ("--db-keepalive", "keepalive"),
    ],
)
def test_each_flag_sets_its_bound_and_only_that_one(flag: str, field: str, monkeypatch: pytest.MonkeyPatch) -> None:
    derived = bounds("--lease-seconds", "12")
    given = bounds("--lease-seconds", "12", flag, "7.5")
    assert getattr(given, field) == 7.5
    assert {k: v for k, v in vars_of(given).items() if k != field} == {
        k: v for k, v in vars_of(derived).items() if k != field
    }
    assert getattr(bounds(flag, "0"), field) == 0  # 0: no bound
    variable = "SCHEDULER_" + flag.removeprefix("--").replace("-", "_").upper()
    monkeypatch.setenv(variable, "9")
    assert getattr(bounds(), field) == 9
    with pytest.raises(ConfigError):
        settings_from_args([flag, "-1"])


def vars_of(value: ConnectionBounds) -> dict[str, float]:
    return {name: getattr(value, name) for name in ("statement", "lock", "idle_in_transaction", "keepalive")}


def test_the_server_holds_the_bounds_for_every_session(postgres: PostgresDatabase) -> None:
    database = Database(
        postgres.url, bounds=ConnectionBounds(statement=7.5, lock=2, idle_in_transaction=4, keepalive=10)
    )
    try:
        with database.session() as session:
            shown = {
                name: session.execute(text(f"SHOW {name}")).scalar_one()
                for name in (
                    "statement_timeout",
                    "lock_timeout",
                    "idle_in_transaction_session_timeout",
                    "tcp_keepalives_idle",
                    "tcp_keepalives_interval",
                    "tcp_keepalives_count",
                    "tcp_user_timeout",
                )
            }
            raw = session.connection().connection.dbapi_connection
            assert raw is not None
            client = socket.socket(fileno=raw.fileno())  # the client's end: keepalives on, same probes
            try:
                keepalive = client.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE)
                probes = [client.getsockopt(socket.IPPROTO_TCP, option) for option in _TCP_PROBES]
            finally:
                client.detach()
    finally:
        database.dispose()
    assert shown == {
        "statement_timeout": "7500ms",
        "lock_timeout": "2s",
        "idle_in_transaction_session_timeout": "4s",
        "tcp_keepalives_idle": "5",
        "tcp_keepalives_interval": "1",
        "tcp_keepalives_count": "3",
        "tcp_user_timeout": "10000",  # milliseconds, shown without a unit
    }
    assert keepalive and probes == [5, 1, 3]


_TCP_PROBES = [socket.TCP_KEEPIDLE, socket.TCP_KEEPINTVL, socket.TCP_KEEPCNT]


def test_without_bounds_the_servers_own_settings_stand(postgres: PostgresDatabase) -> None:
    database = Database(postgres.url)
    try:
        with database.session() as session:
            assert session.execute(text("SHOW statement_timeout")).scalar_one() == "0"
    finally:
        database.dispose()


def test_a_statement_past_its_bound_fails(postgres: PostgresDatabase) -> None:
    database = Database(postgres.url, bounds=ConnectionBounds.for_lease(30, statement=0.3))
    try:
        with pytest.raises(OperationalError, match="statement timeout"), database.session() as session:
            session.execute(text("SELECT pg_sleep(30)"))
    finally:
        database.dispose()


def test_a_lock_wait_past_its_bound_fails(postgres: PostgresDatabase) -> None:
    database = Database(postgres.url, bounds=ConnectionBounds.for_lease(30, lock=0.3))
    try:
        with psycopg.connect(postgres.url) as holder:
            holder.execute("SELECT pg_advisory_lock(2929)")  # held by another session for the whole test
            with pytest.raises(OperationalError, match="lock timeout"), database.session() as session:
                session.execute(text("SELECT pg_advisory_xact_lock(2929)"))
    finally:
        database.dispose()


def test_a_session_idle_in_a_transaction_is_ended_and_its_locks_released(postgres: PostgresDatabase) -> None:
    """What a frozen process leaves: a transaction holding a lock, and no client to finish it."""
    database = Database(postgres.url, bounds=ConnectionBounds.for_lease(30, idle_in_transaction=0.5))
    try:
        frozen = database.engine.connect()
        frozen.begin()
        frozen.execute(text("SELECT pg_advisory_xact_lock(2930)"))
        with psycopg.connect(postgres.url, autocommit=True) as other:
            deadline = time.monotonic() + 30
            while not other.execute("SELECT pg_try_advisory_lock(2930)").fetchone()[0]:  # type: ignore[index]
                assert time.monotonic() < deadline, "the idle transaction still holds its lock"
                time.sleep(0.1)
        with pytest.raises(DBAPIError) as ended:  # the frozen process, woken: its session is gone
            frozen.execute(text("SELECT 1"))
        assert ended.value.connection_invalidated, "seen as a lost connection (the pool replaces it)"
        frozen.close()
    finally:
        database.dispose()
