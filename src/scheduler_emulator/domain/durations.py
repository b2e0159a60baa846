"""Durations as the client generations send them: ISO-8601 (``PT30S``, ``P1D``) and .NET TimeSpan
(``00:00:30``, ``1.02:03:04``). This module reads them and writes a length back in either form; which
client gets which form is decided in ``api.client_dialects``."""

from __future__ import annotations

import re
from datetime import timedelta

# Calendar units are approximated for limit checks only (a month as 30 days, a year as 365).
_ISO = re.compile(
    r"^P(?!$)(?:(?P<years>\d+(?:\.\d+)?)Y)?(?:(?P<months>\d+(?:\.\d+)?)M)?(?:(?P<weeks>\d+(?:\.\d+)?)W)?"
    r"(?:(?P<days>\d+(?:\.\d+)?)D)?(?:T(?=\d)(?:(?P<hours>\d+(?:\.\d+)?)H)?(?:(?P<minutes>\d+(?:\.\d+)?)M)?"
    r"(?:(?P<seconds>\d+(?:\.\d+)?)S)?)?$",
    # ASCII digits only (docs/reference/security.md#limits-on-input): '\d' would take '٣٠' too, and float() reads it
    re.IGNORECASE | re.ASCII,
)
_TIMESPAN = re.compile(
    r"^(?:(?P<days>\d+)\.)?(?P<hours>\d{1,2}):(?P<minutes>\d{1,2})(?::(?P<seconds>\d{1,2}(?:\.\d{1,7})?))?$",
    re.ASCII,
)


# The longest duration accepted: anything longer cannot be added to a date without leaving years 1-9999.
MAX_DURATION = timedelta(days=9999 * 365)


def parse_duration(text: str, *, timespan_day_factor: int = 1) -> timedelta:
    """The length of an ISO-8601 or TimeSpan duration; ValueError with a readable reason otherwise
    (an overflowing one, e.g. ``P99999999999Y``, included). ``timespan_day_factor``: how many TimeSpan days
    make one real day (30 for the clients whose TimeSpan days are thirtieths, see ``api.client_dialects``;
    1 everywhere else)."""
    try:
        length = _parse(text.strip(), timespan_day_factor)
    except OverflowError:
        length = None
    if length is None or length > MAX_DURATION:
        raise ValueError(f"'{text[:40]}' is longer than the longest duration allowed (9999 years)")
    return length


def _parse(text: str, timespan_day_factor: int) -> timedelta | None:
    iso = _ISO.match(text)
    if iso:
        parts = {k: float(v) for k, v in iso.groupdict().items() if v is not None}
        return timedelta(
            days=parts.get("years", 0) * 365
            + parts.get("months", 0) * 30
            + parts.get("weeks", 0) * 7
            + parts.get("days", 0),
            hours=parts.get("hours", 0),
            minutes=parts.get("minutes", 0),
            seconds=parts.get("seconds", 0),
        )
    span = _TIMESPAN.match(text)
    if span:
        hours, minutes = int(span["hours"]), int(span["minutes"])
        if hours > 23 or minutes > 59 or float(span["seconds"] or 0) >= 60:
            raise ValueError(f"'{text}' is not a valid duration: hours must be 0-23, minutes and seconds 0-59")
        # A day is 86,400 s, divisible by 30: d/30 days is a whole number of seconds (d × 2,880).
        days_seconds = int(span["days"] or 0) * 86400 // timespan_day_factor
        return timedelta(seconds=days_seconds, hours=hours, minutes=minutes) + timedelta(
            seconds=float(span["seconds"] or 0)
        )
    raise ValueError(f"'{text}' is not a duration: use ISO-8601 (e.g. 'PT30S', 'P1D') or a TimeSpan (e.g. '00:00:30')")


def is_timespan_with_days(text: str) -> bool:
    """Whether ``text`` is a TimeSpan with a days part (``1.02:03:04``), the only form whose reading
    depends on the client."""
    span = _TIMESPAN.match(text.strip())
    return bool(span and span["days"])


def format_iso(delta: timedelta) -> str:
    """The shortest ISO-8601 form, as ``isodate`` (hence every msrest/azure-core client) writes it:
    ``PT30S``, ``P2D``, ``P1DT2H3M4S``, ``PT0.5S``, ``P0D``."""
    hours, rest = divmod(delta.seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    text = "P" + (f"{delta.days}D" if delta.days else "")
    if delta.seconds or delta.microseconds:
        text += "T" + (f"{hours}H" if hours else "") + (f"{minutes}M" if minutes else "")
        if seconds or delta.microseconds:
            text += f"{seconds + delta.microseconds / 1_000_000:.6f}".rstrip("0").rstrip(".") + "S"
    return text if text != "P" else "P0D"


def format_timespan(delta: timedelta, *, day_factor: int = 1, fractions: bool = True) -> str:
    """.NET TimeSpan ``[d.]hh:mm:ss[.fffffff]`` with two-digit hours; ``day_factor`` TimeSpan days per day."""
    hours, rest = divmod(delta.seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    text = f"{hours:02d}:{minutes:02d}:{seconds:02d}"
    if fractions and delta.microseconds:
        text += f".{delta.microseconds:06d}0".rstrip("0")
    return f"{delta.days * day_factor}.{text}" if delta.days else text


def describe(delta: timedelta) -> str:
    """A short human form (``15 seconds``, ``1 hour``) for messages."""
    seconds = int(delta.total_seconds())
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size and seconds % size == 0:
            n = seconds // size
            return f"{n} {unit}{'s' if n != 1 else ''}"
    return f"{seconds} second{'s' if seconds != 1 else ''}"
