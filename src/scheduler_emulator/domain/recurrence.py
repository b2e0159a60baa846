"""When a job runs: the occurrences of its start time and recurrence
(docs/reference/recurrence-and-retries.md#recurrence).

Everything here is pure calendar arithmetic on the job's timing; the dispatcher, the quota check
and the preview endpoint all read occurrences from this one module.

How a series is read (docs/reference/recurrence-and-retries.md#recurrence, plus the choices that page and Microsoft's
``scheduler-advanced-complexity.md`` leave open, marked *Decision*):

- Zone: schedule hours and minutes are read in the fixed UTC offset of ``start_time`` (of ``origin``
  when there is no start time); a naive datetime counts as UTC. Results are always aware UTC.
- No recurrence: one run at ``start_time``, or at ``origin`` when the start is absent or past.
- Recurrence without a schedule (or with an empty one): ``start + k·interval·frequency`` with the
  start's seconds and microseconds kept; months are calendar months and a start on the 29th-31st
  skips months lacking that day. Without a start time the series starts at ``origin``.
- With a schedule, the candidate instants are the cross product of hours × minutes on the matching
  days. *Decision*: they fall on whole minutes (seconds and microseconds are 0), because every
  schedule in the doc is stated to the minute ("Run at 5:15AM").
- Omitted schedule fields: minutes default to the start's minute (*Decision*: to every minute when
  the frequency is Minute, as iCalendar does for its own unit); hours default to every hour when
  minutes are given or the frequency is Minute or Hour, otherwise to the start's hour.
  *Decision*: Week without ``week_days`` runs on the start's weekday and Month without
  ``month_days``/``monthly_occurrences`` on the start's day of the month (the doc: ``{minutes:[0]}``
  with frequency week "would execute only one day a week"). ``month_days`` and
  ``monthly_occurrences`` together mean their union. Day-level fields are ignored for frequencies
  they do not belong to.
- Interval: an instant is eligible when the number of whole frequency units between the start's unit
  and its own unit is a multiple of ``interval``. Minutes, hours and days are those of the local
  clock, weeks are ISO weeks (Monday to Sunday, *Decision*), months are calendar months.
- Never before ``start_time``; instants before ``origin`` are skipped and do not use up ``count``;
  ``end_time`` is inclusive; with both ``count`` and ``end_time`` whichever ends first wins.
  *Decision*: with a schedule and no start time the schedule is anchored at ``origin`` and there is
  no extra immediate run (the doc's table says "run once immediately").

Bounds (no search loops without one): day-based frequencies repeat every ``period`` local days
(Minute: interval/gcd(interval, 1440) ≤ 1000 days, Hour: interval/gcd(interval, 24) ≤ 1000 days,
Day: interval, Week: 7·interval) and the non-empty days of one period are found arithmetically; a
monthly search gives up (series empty) after one Gregorian cycle, 400 years = 4800 months, of
eligible months without a match; nothing is produced after local day 9999-12-30.
"""

from __future__ import annotations

import calendar
import functools
from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, timezone
from enum import StrEnum
from itertools import accumulate, islice
from math import gcd


class Frequency(StrEnum):
    MINUTE = "Minute"
    HOUR = "Hour"
    DAY = "Day"
    WEEK = "Week"
    MONTH = "Month"


@dataclass(frozen=True)
class MonthlyOccurrence:
    day: int  # 0=Monday..6=Sunday, as datetime.weekday()
    occurrence: int | None = None  # 1..5 or -5..-1; None = every such weekday of the month


@dataclass(frozen=True)
class Schedule:
    minutes: tuple[int, ...] = ()
    hours: tuple[int, ...] = ()
    week_days: tuple[int, ...] = ()  # 0=Monday..6=Sunday
    month_days: tuple[int, ...] = ()  # 1..31 or -31..-1 (-1 = last day)
    monthly_occurrences: tuple[MonthlyOccurrence, ...] = ()

    def is_empty(self) -> bool:
        return not (self.minutes or self.hours or self.week_days or self.month_days or self.monthly_occurrences)


@dataclass(frozen=True)
class Recurrence:
    frequency: Frequency
    interval: int = 1
    count: int | None = None
    end_time: datetime | None = None  # aware
    schedule: Schedule | None = None


@dataclass(frozen=True)
class Timing:
    start_time: datetime | None  # aware; its utcoffset is the zone in which schedule hours/minutes are read
    recurrence: Recurrence | None


_MINUTES_PER_DAY = 1440
_US_PER_MINUTE = 60_000_000
_LAST_DAY = date.max.toordinal() - 1  # later local days may not survive the shift to UTC
_GREGORIAN_CYCLE_MONTHS = 4800  # month lengths and weekdays repeat every 400 years
# the Minute/Hour interval maximum (schemas.job.MAX_INTERVAL); bounds the period of their day pattern
_MAX_SUBDAY_INTERVAL = 1000


def occurrences(timing: Timing, origin: datetime) -> Iterator[datetime]:
    """Every occurrence of the job's series, in increasing order, as aware UTC datetimes.

    `origin` is the instant the series was defined (job creation/replacement, or the preview's `now`):
    instances before it are skipped and do not use up `count`. Honours count and endTime (inclusive).
    Finite when the series is.
    """
    plan = _plan(timing, origin)  # here, so that bad input fails at the call rather than at first use
    return _occurrences_of(plan)


def _occurrences_of(plan: _Plan) -> Iterator[datetime]:
    if plan.pattern is None:
        yield _to_utc(plan.lower, plan.offset)
        return
    produced: Iterator[datetime] = plan.pattern.iter_from(plan.lower)
    if plan.count is not None:
        produced = islice(produced, plan.count)
    for moment in produced:
        if plan.end is not None and moment > plan.end:
            return
        yield _to_utc(moment, plan.offset)


def first_occurrences(timing: Timing, origin: datetime, limit: int) -> tuple[list[datetime], bool]:
    """Up to `limit` occurrences and whether that list is the complete series."""
    if limit < 0:
        raise ValueError("limit must be >= 0")
    found = list(islice(occurrences(timing, origin), limit + 1))
    if len(found) > limit:
        return found[:limit], False
    return found, True


def smallest_gap(timing: Timing, origin: datetime, sample: int = 100) -> timedelta | None:
    """Smallest gap between consecutive occurrences among the first `sample`; None if fewer than two."""
    found, _ = first_occurrences(timing, origin, sample)
    if len(found) < 2:
        return None
    return min(later - earlier for earlier, later in zip(found, found[1:], strict=False))


def next_occurrence_after(timing: Timing, origin: datetime, after: datetime) -> datetime | None:
    """First occurrence strictly after `after` (None when the series has ended)."""
    plan = _plan(timing, origin)
    try:
        after_local = _local(after, plan.offset)
    except OverflowError:  # beyond the representable range: nothing can follow it
        return None
    if plan.pattern is None:
        return _to_utc(plan.lower, plan.offset) if plan.lower > after_local else None
    if after_local < plan.lower:
        following = plan.pattern.iter_from(plan.lower)
        already = 0
    else:
        following = (t for t in plan.pattern.iter_from(after_local) if t > after_local)
        already = plan.pattern.count_between(plan.lower, after_local) if plan.count is not None else 0
    if plan.count is not None and already >= plan.count:
        return None
    moment = next(following, None)
    if moment is None or (plan.end is not None and moment > plan.end):
        return None
    return _to_utc(moment, plan.offset)


# --- the compiled series -------------------------------------------------------------------------


@dataclass(frozen=True)
class _Plan:
    offset: timedelta  # the zone every local (naive) datetime below is in
    lower: datetime  # first admissible local instant: max(start, origin); the run itself if no pattern
    pattern: _DayPattern | _MonthPattern | None
    count: int | None
    end: datetime | None  # local, inclusive


@functools.lru_cache(maxsize=4096)
def _plan(timing: Timing, origin: datetime) -> _Plan:
    # Cached: compiling a schedule costs far more than walking it, and the dispatcher asks about the
    # same few series over and over (Timing and datetimes are immutable and hashable).
    reference = timing.start_time if timing.start_time is not None else origin
    offset = reference.utcoffset() or timedelta(0)
    origin_local = _local(origin, offset)
    if timing.start_time is None:
        anchor = lower = origin_local
    else:
        anchor = _local(timing.start_time, offset)
        lower = max(anchor, origin_local)
    recurrence = timing.recurrence
    if recurrence is None:
        return _Plan(offset, lower, None, None, None)
    end = None
    if recurrence.end_time is not None:
        try:
            end = _local(recurrence.end_time, offset)
        except OverflowError:  # an end beyond year 9999 is no end at all
            end = None
    return _Plan(offset, lower, _pattern(recurrence, anchor), recurrence.count, end)


def _pattern(recurrence: Recurrence, anchor: datetime) -> _DayPattern | _MonthPattern:
    frequency = Frequency(recurrence.frequency)
    interval = recurrence.interval
    if interval < 1:
        raise ValueError("interval must be >= 1")
    if frequency in (Frequency.MINUTE, Frequency.HOUR) and interval > _MAX_SUBDAY_INTERVAL:
        raise ValueError(f"interval must be <= {_MAX_SUBDAY_INTERVAL} for frequency {frequency.value}")
    schedule = recurrence.schedule
    if schedule is not None and schedule.is_empty():
        schedule = None
    if schedule is not None:
        _check_schedule(schedule)
    tail_us = 0 if schedule is not None else anchor.second * 1_000_000 + anchor.microsecond
    minutes_of_day = _minutes_of_day(frequency, schedule or Schedule(), anchor)
    anchor_day = anchor.toordinal()

    if frequency is Frequency.MONTH:
        rule = _MonthDays(
            schedule.month_days if schedule else (),
            schedule.monthly_occurrences if schedule else (),
            anchor.day,
        )
        return _MonthPattern(anchor.year * 12 + anchor.month - 1, interval, rule, minutes_of_day, tail_us)
    if frequency is Frequency.WEEK:
        week_days = sorted(set(schedule.week_days)) if schedule and schedule.week_days else [anchor.weekday()]
        return _DayPattern(
            anchor_day - anchor.weekday(),
            7 * interval,
            week_days,
            [len(minutes_of_day)] * len(week_days),
            lambda _: minutes_of_day,
            tail_us,
        )
    if frequency is Frequency.DAY:
        return _DayPattern(anchor_day, interval, [0], [len(minutes_of_day)], lambda _: minutes_of_day, tail_us)
    if frequency is Frequency.HOUR:
        return _hourly_pattern(anchor, interval, minutes_of_day, tail_us)
    return _minutely_pattern(anchor, interval, minutes_of_day, tail_us)


def _minutes_of_day(frequency: Frequency, schedule: Schedule, anchor: datetime) -> tuple[int, ...]:
    """The candidate times of a matching day (minute of the day), hours × minutes with the defaults."""
    if schedule.minutes:
        minutes: set[int] | range = set(schedule.minutes)
    elif frequency is Frequency.MINUTE:
        minutes = range(60)
    else:
        minutes = {anchor.minute}
    if schedule.hours:
        hours: set[int] | range = set(schedule.hours)
    elif schedule.minutes or frequency in (Frequency.MINUTE, Frequency.HOUR):
        hours = range(24)
    else:
        hours = {anchor.hour}
    return tuple(sorted(hour * 60 + minute for hour in hours for minute in minutes))


def _hourly_pattern(anchor: datetime, interval: int, minutes_of_day: tuple[int, ...], tail_us: int) -> _DayPattern:
    # Day r after the anchor's day has the hours h with (24·r + h - anchor.hour) % interval == 0.
    by_hour: dict[int, list[int]] = {}
    for minute_of_day in minutes_of_day:
        by_hour.setdefault(minute_of_day // 60, []).append(minute_of_day)

    def first_hour(residue: int) -> int:
        return (anchor.hour - 24 * residue) % interval

    def times(residue: int) -> tuple[int, ...]:
        return tuple(m for h in range(first_hour(residue), 24, interval) for m in by_hour.get(h, ()))

    period = interval // gcd(interval, 24)
    residues, lengths = [], []
    for residue in range(period):
        length = sum(len(by_hour.get(h, ())) for h in range(first_hour(residue), 24, interval))
        if length:
            residues.append(residue)
            lengths.append(length)
    return _DayPattern(anchor.toordinal(), period, residues, lengths, times, tail_us)


def _minutely_pattern(anchor: datetime, interval: int, minutes_of_day: tuple[int, ...], tail_us: int) -> _DayPattern:
    # Day r after the anchor's day has the minutes m with (1440·r + m - anchor_minute) % interval == 0.
    anchor_minute = anchor.hour * 60 + anchor.minute
    by_remainder = Counter(m % interval for m in minutes_of_day)
    candidates = frozenset(minutes_of_day)

    def first_minute(residue: int) -> int:
        return (anchor_minute - _MINUTES_PER_DAY * residue) % interval

    def times(residue: int) -> tuple[int, ...]:
        first = first_minute(residue)
        if len(minutes_of_day) * interval > _MINUTES_PER_DAY:  # fewer eligible minutes than candidates
            return tuple(m for m in range(first, _MINUTES_PER_DAY, interval) if m in candidates)
        return tuple(m for m in minutes_of_day if m % interval == first)

    period = interval // gcd(interval, _MINUTES_PER_DAY)
    residues, lengths = [], []
    for residue in range(period):
        length = by_remainder[first_minute(residue)]
        if length:
            residues.append(residue)
            lengths.append(length)
    return _DayPattern(anchor.toordinal(), period, residues, lengths, times, tail_us)


def _check_schedule(schedule: Schedule) -> None:
    # Validation proper happens at the API; this only keeps impossible values out of the arithmetic.
    checks: list[tuple[str, tuple[int, ...], range]] = [
        ("minutes", schedule.minutes, range(60)),
        ("hours", schedule.hours, range(24)),
        ("week_days", schedule.week_days, range(7)),
        ("month_days", tuple(abs(v) for v in schedule.month_days), range(1, 32)),
    ]
    for name, values, valid in checks:
        if not all(v in valid for v in values):
            raise ValueError(f"schedule.{name} out of range: {values}")
    for item in schedule.monthly_occurrences:
        if not 0 <= item.day <= 6 or (item.occurrence is not None and not 1 <= abs(item.occurrence) <= 5):
            raise ValueError(f"schedule.monthly_occurrences out of range: {item}")


class _DayPattern:
    """Occurrences that repeat every `period` local days counted from day ordinal `base`.

    `residues` are the days (offsets into the period) that have occurrences, with how many in
    `lengths`; `times(residue)` gives that day's minutes of the day, sorted.
    """

    def __init__(
        self,
        base: int,
        period: int,
        residues: list[int],
        lengths: list[int],
        times: Callable[[int], tuple[int, ...]],
        tail_us: int,
    ) -> None:
        self._base = base
        self._period = period
        self._residues = residues
        self._before = [0, *accumulate(lengths)]  # occurrences on the residues before index i
        self._times = times
        self._tail_us = tail_us
        self._keys: dict[int, tuple[int, ...]] = {}

    def _keys_of(self, residue: int) -> tuple[int, ...]:
        """Microseconds into the day of each occurrence on a day with this residue."""
        keys = self._keys.get(residue)
        if keys is None:
            keys = tuple(m * _US_PER_MINUTE + self._tail_us for m in self._times(residue))
            self._keys[residue] = keys
        return keys

    def iter_from(self, lower: datetime) -> Iterator[datetime]:
        """Local occurrences at or after `lower`, in order."""
        if not self._residues:
            return
        day, lower_key = lower.toordinal(), _microsecond_of_day(lower)
        into_cycle = (day - self._base) % self._period
        cycle_start = day - into_cycle
        index = bisect_left(self._residues, into_cycle)
        while True:
            if index == len(self._residues):
                index = 0
                cycle_start += self._period
            residue = self._residues[index]
            current = cycle_start + residue
            if current > _LAST_DAY:
                return
            keys = self._keys_of(residue)
            midnight = datetime.fromordinal(current)
            for key in keys[bisect_left(keys, lower_key) if current == day else 0 :]:
                yield midnight + timedelta(microseconds=key)
            index += 1

    def count_between(self, lower: datetime, upper: datetime) -> int:
        """How many occurrences fall in [lower, upper]."""
        return self._count_before(upper, inclusive=True) - self._count_before(lower, inclusive=False)

    def _count_before(self, moment: datetime, inclusive: bool) -> int:
        """Occurrences from the base day up to `moment` (excluded unless `inclusive`)."""
        day = min(moment.toordinal(), _LAST_DAY)
        if day < self._base:
            return 0
        key = _microsecond_of_day(moment) if day == moment.toordinal() else _MINUTES_PER_DAY * _US_PER_MINUTE
        cycles, into_cycle = divmod(day - self._base, self._period)
        index = bisect_left(self._residues, into_cycle)
        total = cycles * self._before[-1] + self._before[index]
        if index < len(self._residues) and self._residues[index] == into_cycle:
            keys = self._keys_of(into_cycle)
            total += bisect_right(keys, key) if inclusive else bisect_left(keys, key)
        return total


@dataclass(frozen=True)
class _MonthDays:
    """Which days of a given month match: month_days ∪ monthly_occurrences, else the anchor's day."""

    month_days: tuple[int, ...]
    monthly_occurrences: tuple[MonthlyOccurrence, ...]
    anchor_day: int

    def of(self, year: int, month: int) -> list[int]:
        first_weekday, length = calendar.monthrange(year, month)
        if not self.month_days and not self.monthly_occurrences:
            return [self.anchor_day] if self.anchor_day <= length else []
        days = set()
        for value in self.month_days:
            day = value if value > 0 else length + 1 + value
            if 1 <= day <= length:
                days.add(day)
        for item in self.monthly_occurrences:
            first = 1 + (item.day - first_weekday) % 7
            if item.occurrence is None:
                days.update(range(first, length + 1, 7))
            elif item.occurrence > 0:
                day = first + 7 * (item.occurrence - 1)
                if day <= length:
                    days.add(day)
            else:
                day = first + 7 * ((length - first) // 7) + 7 * (item.occurrence + 1)
                if day >= 1:
                    days.add(day)
        return sorted(days)


class _MonthPattern:
    """Occurrences on matching days of every `interval`-th calendar month from month index `anchor_month`."""

    def __init__(
        self,
        anchor_month: int,
        interval: int,
        days: _MonthDays,
        minutes_of_day: tuple[int, ...],
        tail_us: int,
    ) -> None:
        self._anchor_month = anchor_month
        self._interval = interval
        self._days = days
        self._offsets = [timedelta(microseconds=m * _US_PER_MINUTE + tail_us) for m in minutes_of_day]
        # The eligible months' day sets repeat after this many eligible months (one Gregorian cycle).
        self._give_up_after = _GREGORIAN_CYCLE_MONTHS // gcd(interval, _GREGORIAN_CYCLE_MONTHS) + 1

    def _eligible_months(self, lower: datetime) -> Iterator[tuple[int, int]]:
        index = lower.year * 12 + lower.month - 1
        index += (self._anchor_month - index) % self._interval
        while True:
            year, month0 = divmod(index, 12)
            if year > date.max.year:
                return
            yield year, month0 + 1
            index += self._interval

    def iter_from(self, lower: datetime) -> Iterator[datetime]:
        """Local occurrences at or after `lower`, in order."""
        empty_months = 0
        for year, month in self._eligible_months(lower):
            produced = False
            for day in self._days.of(year, month):
                midnight = datetime(year, month, day)
                if midnight.toordinal() > _LAST_DAY:
                    return
                for offset in self._offsets:
                    moment = midnight + offset
                    if moment >= lower:
                        produced = True
                        yield moment
            empty_months = 0 if produced else empty_months + 1
            if empty_months > self._give_up_after:  # a whole cycle without a match: never again
                return

    def count_between(self, lower: datetime, upper: datetime) -> int:
        """How many occurrences fall in [lower, upper]."""
        total = 0
        per_day = len(self._offsets)
        for year, month in self._eligible_months(lower):
            if (year, month) > (upper.year, upper.month):
                break
            for day in self._days.of(year, month):
                midnight = datetime(year, month, day)
                if midnight.toordinal() > _LAST_DAY:
                    return total
                if lower <= midnight and midnight + self._offsets[-1] <= upper:
                    total += per_day
                else:
                    total += sum(1 for offset in self._offsets if lower <= midnight + offset <= upper)
        return total


def _local(moment: datetime, offset: timedelta) -> datetime:
    """`moment` as a naive datetime in the fixed `offset` (naive input counts as UTC)."""
    if moment.tzinfo is None or moment.utcoffset() is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(timezone(offset)).replace(tzinfo=None)


def _to_utc(local: datetime, offset: timedelta) -> datetime:
    return (local - offset).replace(tzinfo=UTC)


def _microsecond_of_day(moment: datetime) -> int:
    return ((moment.hour * 60 + moment.minute) * 60 + moment.second) * 1_000_000 + moment.microsecond
