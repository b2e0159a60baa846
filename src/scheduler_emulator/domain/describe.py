"""A job's schedule in plain words, for people (the dashboard): "every 15 minutes", "on the last Friday of
each month at 09:00 (UTC−08:00)". Reads the definition as stored (any key casing the API accepts)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

_ORDINALS = {1: "first", 2: "second", 3: "third", 4: "fourth", 5: "fifth", -1: "last"}
_UNITS = {"minute": "minute", "hour": "hour", "day": "day", "week": "week", "month": "month"}


def describe_schedule(definition: dict[str, Any]) -> str:
    """``definition``: a job's properties (startTime, recurrence)."""
    start = _time(definition.get("startTime"))
    recurrence = _get(definition, "recurrence")
    if not isinstance(recurrence, dict):
        return f"once, at {_clock(start)} on {start:%Y-%m-%d}{_zone(start)}" if start else "once, as soon as created"
    frequency = str(_get(recurrence, "frequency") or "").lower()
    interval = _get(recurrence, "interval")
    interval = interval if isinstance(interval, int) and interval > 0 else 1
    schedule = _get(recurrence, "schedule") if isinstance(_get(recurrence, "schedule"), dict) else {}
    unit = _UNITS.get(frequency, frequency or "time")
    every = f"every {unit}" if interval == 1 else f"every {interval} {unit}s"
    occurrences = _get(schedule, "monthlyOccurrences")
    month_days = _get(schedule, "monthDays")
    week_days = _get(schedule, "weekDays")
    if frequency == "month" and isinstance(occurrences, list) and occurrences:
        days = _join(
            f"the {_ORDINALS.get(_get(o, 'occurrence'), str(_get(o, 'occurrence')))} {str(_get(o, 'day')).capitalize()}"
            for o in occurrences
            if isinstance(o, dict)
        )
        period = "each month" if interval == 1 else f"every {interval} months"
        text = f"on {days} of {period}"
    elif frequency == "month" and isinstance(month_days, list) and month_days:
        period = "each month" if interval == 1 else f"every {interval} months"
        text = f"on day {_join(str(d) if d != -1 else 'last' for d in month_days)} of {period}"
    elif isinstance(week_days, list) and week_days:
        text = f"{every} on {_join(str(d).capitalize() for d in week_days)}"
    else:
        text = every
    text += _at(schedule, start, frequency)
    count = _get(recurrence, "count")
    if isinstance(count, int):
        text += f", {count} time{'s' if count != 1 else ''}"
    end = _time(_get(recurrence, "endTime"))
    if end is not None:
        text += f", until {end:%Y-%m-%d %H:%M}"
    return text


def _at(schedule: dict[str, Any], start: datetime | None, frequency: str) -> str:
    hours, minutes = _get(schedule, "hours"), _get(schedule, "minutes")
    zone = _zone(start) if start else ""
    if isinstance(hours, list) and hours:
        mins = minutes if isinstance(minutes, list) and minutes else [start.minute if start else 0]
        times = sorted(f"{h:02d}:{m:02d}" for h in hours for m in mins if isinstance(h, int) and isinstance(m, int))
        return f" at {_join(times)}{zone}"
    if isinstance(minutes, list) and minutes:
        return f" at minute {_join(str(m) for m in minutes)} of the hour"
    if start is not None and frequency in ("day", "week", "month"):
        return f" at {_clock(start)}{zone}"
    return ""


def _zone(moment: datetime | None) -> str:
    offset = moment.utcoffset() if moment is not None else None
    if not offset:
        return ""
    sign = "+" if offset >= timedelta(0) else "\u2212"
    total = abs(int(offset.total_seconds())) // 60
    return f" (UTC{sign}{total // 60:02d}:{total % 60:02d})"


def _clock(moment: datetime | None) -> str:
    return f"{moment:%H:%M}" if moment is not None else ""


def _time(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def _get(node: Any, key: str) -> Any:
    """A member by name in any case (the API accepts ``weekDays`` and ``weekdays`` alike)."""
    if not isinstance(node, dict):
        return None
    if key in node:
        return node[key]
    lowered = key.lower()
    return next((value for name, value in node.items() if name.lower() == lowered), None)


def _join(items: Any) -> str:
    parts = [str(item) for item in items]
    if len(parts) <= 1:
        return "".join(parts)
    return ", ".join(parts[:-1]) + " and " + parts[-1]
