"""Wake-ups across processes: PostgreSQL LISTEN on the channel API writes NOTIFY (see
dispatching.announce_change). The dispatcher's polling stays as the fallback."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from sqlalchemy.engine import make_url

from scheduler_emulator.store.dispatching import WAKE_CHANNEL, wake_payload

log = logging.getLogger("scheduler_emulator.dispatcher")


class PostgresWakeups:
    """Calls ``on_wake`` for every notification, with the time before which the change makes nothing due when
    the notification says (dispatching.announce_change), else None; reconnects (after a pause) when the
    connection is lost."""

    def __init__(
        self,
        database_url: str,
        on_wake: Callable[[datetime | None], None],
        parameters: Mapping[str, Any] | None = None,
    ) -> None:
        """``parameters``: further libpq connection parameters (keepalives, server options)."""
        url = make_url(database_url).set(drivername="postgresql")
        self.conninfo = url.render_as_string(hide_password=False)
        self.parameters = dict(parameters or {})
        self.on_wake = on_wake
        self._task: asyncio.Task[None] | None = None
        self.connected = asyncio.Event()

    def start(self) -> None:
        self._task = asyncio.create_task(self._listen(), name="postgres-wakeups")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _listen(self) -> None:
        import psycopg  # here, not at the top: a process on SQLite never needs it (~0.15 s of imports)

        pause = 0.5
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(
                    self.conninfo, autocommit=True, connect_timeout=5, **self.parameters
                ) as connection:
                    await connection.execute(f"LISTEN {WAKE_CHANNEL}")
                    self.connected.set()
                    pause = 0.5
                    self.on_wake(None)  # anything announced while we were not listening
                    async for notification in connection.notifies():
                        self.on_wake(wake_payload(notification.payload))
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - any failure: reconnect, polling covers the gap
                self.connected.clear()
                log.warning("listening for wake-ups failed (%s); retrying in %.1f s", str(exc).splitlines()[0], pause)
            await asyncio.sleep(pause)
            pause = min(pause * 2, 10.0)
