"""History entry identifiers: unique, and sorting newest first as text, like the real service's."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime

_EPOCH = datetime(1, 1, 1, tzinfo=UTC)
_INT64_MAX = 2**63 - 1
_sequence = itertools.count()


def history_id(moment: datetime) -> str:
    """``Int64.MaxValue - moment's .NET ticks`` as 20 digits (the real service's form, e.g.
    ``08587...``), plus two digits that keep entries written in the same tick apart."""
    delta = moment.astimezone(UTC) - _EPOCH
    ticks = (delta.days * 86_400 + delta.seconds) * 10_000_000 + delta.microseconds * 10
    return f"{_INT64_MAX - ticks:020d}{99 - next(_sequence) % 100:02d}"
