"""Clocks the tests set: ``SetClock`` reads the moment a test gave it (the app's ``Clock`` protocol, as the
wall clock implements it, with ``now`` fixed), for the in-process API tier and the dispatcher and store tests."""

from __future__ import annotations

from datetime import datetime

from scheduler_emulator.domain.clock import WallClock


class SetClock(WallClock):
    """A clock that reads what the test set (``moment``)."""

    def __init__(self, now: datetime) -> None:
        self.moment = now

    def now(self) -> datetime:
        return self.moment
