"""History entry identifiers: unique within their job, and sorting newest first as text, like the real service's."""

from __future__ import annotations

import itertools
import secrets
from datetime import UTC, datetime

_EPOCH = datetime(1, 1, 1, tzinfo=UTC)
_INT64_MAX = 2**63 - 1
# From a random start in each process, so that processes stamping in the same tick rarely agree (the ids of
# different jobs may coincide: they are only shown under their own job).
_sequence = itertools.count(secrets.randbelow(100))


def history_id(moment: datetime) -> str:
    """``Int64.MaxValue - moment's .NET ticks`` as 20 digits (the real service's form, e.g.
    ``08587...``), plus two digits that keep entries written in the same tick apart."""
    delta = moment.astimezone(UTC) - _EPOCH
    ticks = (delta.days * 86_400 + delta.seconds) * 10_000_000 + delta.microseconds * 10
    return f"{_INT64_MAX - ticks:020d}{99 - next(_sequence) % 100:02d}"
