"""Times as the tests write and read them on the wire: aware UTC datetimes, ISO 8601 with a ``Z``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta


def utcnow() -> datetime:
    """Now, as an aware UTC datetime."""
    return datetime.now(UTC)


def whole_seconds_from_now(seconds: float) -> datetime:
    """``seconds`` from now, truncated to a whole second."""
    return (utcnow() + timedelta(seconds=seconds)).replace(microsecond=0)


def iso(moment: datetime) -> str:
    """``moment`` in UTC as ISO 8601 with a ``Z``, with its fraction of a second when it has one."""
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def iso_seconds(moment: datetime) -> str:
    """``moment`` in UTC as ``YYYY-MM-DDThh:mm:ssZ`` (the fraction of a second dropped)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse(value: str) -> datetime:
    """An ISO 8601 time as the API writes it (``Z`` or an offset) → an aware datetime."""
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def days_ahead(days: float) -> str:
    """A start time ``days`` from now in whole seconds, far enough ahead that only POST /run fires a job."""
    return iso(whole_seconds_from_now(days * 86400))
