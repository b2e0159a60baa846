"""The overview's attempt counts, kept between calls (the dashboard:
docs/reference/test-support.md#the-dashboard-and-its-api).

Counting a day of tries reads every history entry of that day (there is no index on start times), which grows
with the load: about half a second for 250,000 entries. Between two refreshes of the page few entries are
added, so each window's counts are kept and only the entries past the highest id counted are read (a
primary-key range). They are counted again in full when the window moves on to a new slot, and when the
history changed in a way that range cannot see: fewer entries than expected (retention, a deleted job or
collection) or more (an entry committed late with a lower id, as concurrent writers on PostgreSQL may).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy.orm import Session

from scheduler_emulator.store import overview as queries


@dataclass
class _Tally:
    edges: tuple[datetime, ...]
    total: int  # history entries (all of them) when last counted
    top: int  # the highest history id counted
    counts: Counter[tuple[int, str]] = field(default_factory=Counter)


class AttemptCounts:
    """Main-action tries per slot of named windows, by ``(slot index, status)``; one per process, shared by
    every request (thread-safe)."""

    def __init__(self) -> None:
        self._tallies: dict[str, _Tally] = {}
        self._lock = threading.Lock()
        self.full_counts = 0  # how many times a window was counted in full (for tests and curiosity)

    def count(self, session: Session, window: str, edges: Sequence[datetime]) -> dict[tuple[int, str], int]:
        """The tries in each slot ``[edges[i], edges[i+1])`` of ``window``, as store.overview.attempts_by_bucket
        answers them, read incrementally when the last call was for the same edges."""
        key = tuple(edges)
        with self._lock:
            total, top = queries.history_mark(session)
            tally = self._tallies.get(window)
            if tally is not None and tally.edges == key and total >= tally.total and top >= tally.top:
                added = queries.entries_between(session, tally.top, top)
                if tally.total + added == total:
                    tally.counts.update(queries.attempts_by_bucket(session, edges, after_id=tally.top, up_to_id=top))
                    tally.total, tally.top = total, top
                    return dict(tally.counts)
            self.full_counts += 1
            counts = Counter(queries.attempts_by_bucket(session, edges, up_to_id=top))
            self._tallies[window] = _Tally(edges=key, total=total, top=top, counts=counts)
            return dict(counts)
