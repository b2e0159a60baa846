"""Engine, sessions and schema migrations. One `Database` per process, created at start-up."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import StaticPool


def migrations_dir() -> Path:
    """The Alembic scripts: inside the installed package, or the repository's top-level folder."""
    here = Path(__file__).resolve().parent.parent
    packaged = here / "migrations"
    return packaged if packaged.is_dir() else here.parent.parent / "migrations"


class Database:
    """Owns the engine and hands out sessions; applies migrations with :meth:`migrate`."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.dialect = url.split(":", 1)[0].split("+", 1)[0]
        kwargs: dict[str, Any] = {}
        self._lock: threading.RLock | None = None
        if self.dialect == "sqlite":
            kwargs["connect_args"] = {"check_same_thread": False, "timeout": 30}
            # SQLite has one writer at a time; queueing on a lock here is fairer and faster than its busy
            # handler's back-off sleeps (and avoids "database is locked" when a reader upgrades to a writer).
            self._lock = threading.RLock()
            if url in ("sqlite://", "sqlite:///:memory:"):
                kwargs["poolclass"] = StaticPool  # one shared connection holds the in-memory database
            else:
                Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
        elif self.dialect == "postgresql":
            url = url.replace("postgresql://", "postgresql+psycopg://", 1) if "+" not in url.split(":")[0] else url
            kwargs.update(
                pool_size=10, max_overflow=20, pool_pre_ping=True, pool_timeout=10, connect_args={"connect_timeout": 5}
            )
        self.engine: Engine = create_engine(url, **kwargs)
        if self.dialect == "sqlite":
            event.listen(self.engine, "connect", _sqlite_pragmas)
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A session in a transaction: committed on success, rolled back on error."""
        with self._lock or nullcontext(), self._sessions() as session, session.begin():
            yield session

    def migrate(self) -> None:
        """Bring the schema to the newest Alembic revision."""
        config = Config()
        config.set_main_option("script_location", str(migrations_dir()))
        with self._lock or nullcontext(), self.engine.begin() as connection:
            config.attributes["connection"] = connection
            command.upgrade(config, "head")

    def dispose(self) -> None:
        self.engine.dispose()


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()
