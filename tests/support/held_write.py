"""A write transaction of the process held open on a thread of the test, for tests of what must not wait for one
(SQLite's readers: Database.read_session)."""

from __future__ import annotations

import threading
from typing import Any

from scheduler_emulator.store.database import Database

BOUND = 60.0  # seconds: how long the holder waits to be released, and the test for it to start or end


class HeldWrite:
    """``with HeldWrite(database, statement):`` runs ``statement`` (any SQLAlchemy executable) in
    ``database.session()`` on another thread and holds that transaction open, uncommitted, until the block ends;
    then it is rolled back, so nothing it wrote is kept."""

    def __init__(self, database: Database, statement: Any) -> None:
        self.database = database
        self.statement = statement
        self.holding = threading.Event()
        self.release = threading.Event()
        self.failures: list[BaseException] = []
        self.thread = threading.Thread(target=self._hold, daemon=True)

    def _hold(self) -> None:
        try:
            with self.database.session() as session:
                session.execute(self.statement)
                session.flush()
                self.holding.set()
                self.release.wait(BOUND)
                raise _RolledBack
        except _RolledBack:
            pass
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.failures.append(exc)
            self.holding.set()

    def __enter__(self) -> HeldWrite:
        self.thread.start()
        assert self.holding.wait(BOUND) and not self.failures, self.failures
        return self

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        self.thread.join(BOUND)
        assert not self.thread.is_alive() and not self.failures, self.failures


class _RolledBack(Exception):
    pass
