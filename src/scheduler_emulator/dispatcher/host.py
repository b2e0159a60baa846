"""Where this process's dispatcher runs, as the API sees it: one small protocol, implemented by the dispatcher on
this process's event loop (dispatcher/here.py) and by the dispatcher role's process this one supervises
(dispatcher/child.py). The app is given one (app.py); the API reaches it only through this module."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol


class DispatcherHost(Protocol):
    """A dispatcher that the app starts with its lifespan and stops with it."""

    async def start(self) -> None:
        """Start dispatching (once the store is migrated); a dispatcher that cannot be built raises here."""
        ...

    def wake(self, not_before: datetime | None = None) -> None:
        """A write of this process may have made a job due earlier (``not_before``: see Dispatcher.wake); callable
        from any thread."""
        ...

    async def stop(self, grace: float) -> None:
        """Stop dispatching; attempts in flight get ``grace`` seconds to finish (Dispatcher.stop)."""
        ...

    def metrics(self) -> bytes:
        """The dispatcher's metrics (metrics.Metrics.DISPATCHER_FAMILIES) as Prometheus text, from wherever it runs."""
        ...

    def running(self) -> bool:
        """Whether the dispatcher runs now (for ``GET /_emulator/health``)."""
        ...
