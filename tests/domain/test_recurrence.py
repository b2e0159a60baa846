"""Occurrences of a job's recurrence (docs/reference/recurrence-and-retries.md#recurrence), checked three ways.

1. Every row of the schedule table in Microsoft's ``scheduler-advanced-complexity.md`` and its
   past-start-time example, as named tests with the occurrences written out by hand.
2. Named tests for the edges: month ends, fifth Fridays, count/endTime, offsets, sparse schedules.
3. Properties: the module against a deliberately simple enumerator in this file that walks the
   local calendar minute by minute and tests each minute against the rules directly.
"""

from __future__ import annotations

import calendar
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from itertools import takewhile

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.times import iso as iso_utc

from scheduler_emulator.domain.recurrence import (
    Frequency,
    MonthlyOccurrence,
    Recurrence,
    Schedule,
    Timing,
    first_occurrences,
    next_occurrence_after,
    occurrences,
    smallest_gap,
)

MON, TUE, WED, THU, FRI, SAT, SUN = range(7)


def at(text: str) -> datetime:
    return datetime.fromisoformat(text)


def iso(moment: datetime) -> str:
    assert moment.utcoffset() == timedelta(0)
    return iso_utc(moment)


def first(
    frequency: Frequency,
    schedule: Schedule | None = None,
    *,
    start: str | None = "2024-01-01T00:00:00Z",  # a Monday
    origin: str | None = None,
    interval: int = 1,
    count: int | None = None,
    end: str | None = None,
    n: int = 6,
) -> list[str]:
    recurrence = Recurrence(frequency, interval, count, at(end) if end else None, schedule)
    timing = Timing(at(start) if start else None, recurrence)
    found, _ = first_occurrences(timing, at(origin or start or "2024-01-01T00:00:00Z"), n)
    return [iso(moment) for moment in found]


# --- the doc's table of schedules (interval 1; the frequency the schedule's fields call for) ------


def test_doc_hours_5_runs_at_5am_every_day() -> None:
    assert first(Frequency.DAY, Schedule(hours=(5,)), n=3) == [
        "2024-01-01T05:00:00Z",
        "2024-01-02T05:00:00Z",
        "2024-01-03T05:00:00Z",
    ]


def test_doc_minutes_15_hours_5_runs_at_5_15am_every_day() -> None:
    assert first(Frequency.DAY, Schedule(minutes=(15,), hours=(5,)), n=3) == [
        "2024-01-01T05:15:00Z",
        "2024-01-02T05:15:00Z",
        "2024-01-03T05:15:00Z",
    ]


def test_doc_minutes_15_hours_5_17_runs_at_5_15am_and_5_15pm_every_day() -> None:
    assert first(Frequency.DAY, Schedule(minutes=(15,), hours=(5, 17)), n=4) == [
        "2024-01-01T05:15:00Z",
        "2024-01-01T17:15:00Z",
        "2024-01-02T05:15:00Z",
        "2024-01-02T17:15:00Z",
    ]


def test_doc_minutes_15_45_hours_5_17_runs_at_5_15_5_45_17_15_17_45_every_day() -> None:
    assert first(Frequency.DAY, Schedule(minutes=(15, 45), hours=(5, 17)), n=5) == [
        "2024-01-01T05:15:00Z",
        "2024-01-01T05:45:00Z",
        "2024-01-01T17:15:00Z",
        "2024-01-01T17:45:00Z",
        "2024-01-02T05:15:00Z",
    ]


def test_doc_minutes_0_15_30_45_runs_every_15_minutes() -> None:
    assert first(Frequency.DAY, Schedule(minutes=(0, 15, 30, 45)), start="2024-01-01T23:20:00Z", n=4) == [
        "2024-01-01T23:30:00Z",
        "2024-01-01T23:45:00Z",
        "2024-01-02T00:00:00Z",
        "2024-01-02T00:15:00Z",
    ]


def test_doc_all_24_hours_runs_every_hour_at_the_start_times_minute() -> None:
    # "if the start time ... is 12:25 PM, the job will be run at 00:25, 01:25, 02:25, …, 23:25"
    assert first(Frequency.DAY, Schedule(hours=tuple(range(24))), start="2024-01-01T12:25:00Z", n=13) == [
        f"2024-01-{day:02d}T{hour:02d}:25:00Z" for day, hour in [(1, h) for h in range(12, 24)] + [(2, 0)]
    ]


def test_doc_all_24_hours_with_month_frequency_runs_on_one_day_a_month() -> None:
    # "if the frequency were 'month', the schedule would run only once a month instead of every day"
    found = first(Frequency.MONTH, Schedule(hours=tuple(range(24))), start="2024-01-05T12:25:00Z", n=14)
    assert found[11:] == ["2024-01-05T23:25:00Z", "2024-02-05T00:25:00Z", "2024-02-05T01:25:00Z"]


def test_doc_minutes_0_runs_every_hour_on_the_hour() -> None:
    assert first(Frequency.DAY, Schedule(minutes=(0,)), start="2024-01-01T22:10:00Z", n=3) == [
        "2024-01-01T23:00:00Z",
        "2024-01-02T00:00:00Z",
        "2024-01-02T01:00:00Z",
    ]


def test_doc_minutes_0_with_week_frequency_runs_on_one_day_a_week() -> None:
    # "if the frequency were 'week' ... the schedule would execute only one day a week"
    found = first(Frequency.WEEK, Schedule(minutes=(0,)), start="2024-01-01T22:10:00Z", n=3)
    assert found == ["2024-01-01T23:00:00Z", "2024-01-08T00:00:00Z", "2024-01-08T01:00:00Z"]


def test_doc_minutes_15_runs_at_15_past_every_hour() -> None:
    assert first(Frequency.DAY, Schedule(minutes=(15,)), start="2024-01-01T22:20:00Z", n=3) == [
        "2024-01-01T23:15:00Z",
        "2024-01-02T00:15:00Z",
        "2024-01-02T01:15:00Z",
    ]


def test_doc_hours_17_saturday_runs_at_5pm_on_saturdays() -> None:
    assert first(Frequency.WEEK, Schedule(hours=(17,), week_days=(SAT,)), n=3) == [
        "2024-01-06T17:00:00Z",
        "2024-01-13T17:00:00Z",
        "2024-01-20T17:00:00Z",
    ]


def test_doc_hours_17_mon_wed_fri_runs_at_5pm_on_monday_wednesday_friday() -> None:
    assert first(Frequency.WEEK, Schedule(hours=(17,), week_days=(MON, WED, FRI)), n=4) == [
        "2024-01-01T17:00:00Z",
        "2024-01-03T17:00:00Z",
        "2024-01-05T17:00:00Z",
        "2024-01-08T17:00:00Z",
    ]


def test_doc_minutes_15_45_hours_17_mon_wed_fri_runs_at_5_15pm_and_5_45pm() -> None:
    schedule = Schedule(minutes=(15, 45), hours=(17,), week_days=(MON, WED, FRI))
    assert first(Frequency.WEEK, schedule, n=4) == [
        "2024-01-01T17:15:00Z",
        "2024-01-01T17:45:00Z",
        "2024-01-03T17:15:00Z",
        "2024-01-03T17:45:00Z",
    ]


def test_doc_hours_5_17_mon_wed_fri_runs_at_5am_and_5pm() -> None:
    assert first(Frequency.WEEK, Schedule(hours=(5, 17), week_days=(MON, WED, FRI)), n=4) == [
        "2024-01-01T05:00:00Z",
        "2024-01-01T17:00:00Z",
        "2024-01-03T05:00:00Z",
        "2024-01-03T17:00:00Z",
    ]


def test_doc_minutes_15_45_hours_5_17_mon_wed_fri_runs_four_times_those_days() -> None:
    schedule = Schedule(minutes=(15, 45), hours=(5, 17), week_days=(MON, WED, FRI))
    assert first(Frequency.WEEK, schedule, n=5) == [
        "2024-01-01T05:15:00Z",
        "2024-01-01T05:45:00Z",
        "2024-01-01T17:15:00Z",
        "2024-01-01T17:45:00Z",
        "2024-01-03T05:15:00Z",
    ]


def test_doc_every_15_minutes_on_weekdays() -> None:
    schedule = Schedule(minutes=(0, 15, 30, 45), week_days=(MON, TUE, WED, THU, FRI))
    assert first(Frequency.WEEK, schedule, start="2024-01-05T23:40:00Z", n=3) == [
        "2024-01-05T23:45:00Z",
        "2024-01-08T00:00:00Z",
        "2024-01-08T00:15:00Z",
    ]


def test_doc_every_15_minutes_on_weekdays_between_9am_and_4_45pm() -> None:
    schedule = Schedule(minutes=(0, 15, 30, 45), hours=tuple(range(9, 17)), week_days=(MON, TUE, WED, THU, FRI))
    found = first(Frequency.WEEK, schedule, start="2024-01-05T08:00:00Z", n=33)
    assert found[:2] == ["2024-01-05T09:00:00Z", "2024-01-05T09:15:00Z"]
    assert found[31:] == ["2024-01-05T16:45:00Z", "2024-01-08T09:00:00Z"]


def test_doc_sunday_runs_on_sundays_at_start_time() -> None:
    assert first(Frequency.WEEK, Schedule(week_days=(SUN,)), start="2024-01-01T09:30:00Z", n=3) == [
        "2024-01-07T09:30:00Z",
        "2024-01-14T09:30:00Z",
        "2024-01-21T09:30:00Z",
    ]


def test_doc_tuesday_thursday_runs_on_tuesdays_and_thursdays_at_start_time() -> None:
    assert first(Frequency.WEEK, Schedule(week_days=(TUE, THU)), start="2024-01-01T09:30:00Z", n=4) == [
        "2024-01-02T09:30:00Z",
        "2024-01-04T09:30:00Z",
        "2024-01-09T09:30:00Z",
        "2024-01-11T09:30:00Z",
    ]


def test_doc_6am_on_the_28th_of_every_month() -> None:
    assert first(Frequency.MONTH, Schedule(minutes=(0,), hours=(6,), month_days=(28,)), n=3) == [
        "2024-01-28T06:00:00Z",
        "2024-02-28T06:00:00Z",
        "2024-03-28T06:00:00Z",
    ]


def test_doc_6am_on_the_last_day_of_the_month() -> None:
    assert first(Frequency.MONTH, Schedule(minutes=(0,), hours=(6,), month_days=(-1,)), n=4) == [
        "2024-01-31T06:00:00Z",
        "2024-02-29T06:00:00Z",
        "2024-03-31T06:00:00Z",
        "2024-04-30T06:00:00Z",
    ]


def test_doc_6am_on_the_first_and_last_day_of_every_month() -> None:
    assert first(Frequency.MONTH, Schedule(minutes=(0,), hours=(6,), month_days=(1, -1)), n=4) == [
        "2024-01-01T06:00:00Z",
        "2024-01-31T06:00:00Z",
        "2024-02-01T06:00:00Z",
        "2024-02-29T06:00:00Z",
    ]


def test_doc_first_and_last_day_of_every_month_at_start_time() -> None:
    assert first(Frequency.MONTH, Schedule(month_days=(1, -1)), start="2024-01-01T09:30:00Z", n=4) == [
        "2024-01-01T09:30:00Z",
        "2024-01-31T09:30:00Z",
        "2024-02-01T09:30:00Z",
        "2024-02-29T09:30:00Z",
    ]


def test_doc_first_and_fourteenth_day_of_every_month_at_start_time() -> None:
    assert first(Frequency.MONTH, Schedule(month_days=(1, 14)), start="2024-01-01T09:30:00Z", n=3) == [
        "2024-01-01T09:30:00Z",
        "2024-01-14T09:30:00Z",
        "2024-02-01T09:30:00Z",
    ]


def test_doc_second_day_of_the_month_at_start_time() -> None:
    assert first(Frequency.MONTH, Schedule(month_days=(2,)), start="2024-01-01T09:30:00Z", n=3) == [
        "2024-01-02T09:30:00Z",
        "2024-02-02T09:30:00Z",
        "2024-03-02T09:30:00Z",
    ]


def test_doc_first_friday_of_every_month_at_5am() -> None:
    schedule = Schedule(minutes=(0,), hours=(5,), monthly_occurrences=(MonthlyOccurrence(FRI, 1),))
    assert first(Frequency.MONTH, schedule, n=3) == [
        "2024-01-05T05:00:00Z",
        "2024-02-02T05:00:00Z",
        "2024-03-01T05:00:00Z",
    ]


def test_doc_first_friday_of_every_month_at_start_time() -> None:
    schedule = Schedule(monthly_occurrences=(MonthlyOccurrence(FRI, 1),))
    assert first(Frequency.MONTH, schedule, start="2024-01-01T09:30:00Z", n=3) == [
        "2024-01-05T09:30:00Z",
        "2024-02-02T09:30:00Z",
        "2024-03-01T09:30:00Z",
    ]


def test_doc_third_friday_from_end_of_month_at_start_time() -> None:
    schedule = Schedule(monthly_occurrences=(MonthlyOccurrence(FRI, -3),))
    assert first(Frequency.MONTH, schedule, start="2024-01-01T09:30:00Z", n=3) == [
        "2024-01-12T09:30:00Z",
        "2024-02-09T09:30:00Z",
        "2024-03-15T09:30:00Z",
    ]


def test_doc_first_and_last_friday_of_every_month_at_5_15am() -> None:
    schedule = Schedule(
        minutes=(15,), hours=(5,), monthly_occurrences=(MonthlyOccurrence(FRI, 1), MonthlyOccurrence(FRI, -1))
    )
    assert first(Frequency.MONTH, schedule, n=4) == [
        "2024-01-05T05:15:00Z",
        "2024-01-26T05:15:00Z",
        "2024-02-02T05:15:00Z",
        "2024-02-23T05:15:00Z",
    ]


def test_doc_first_and_last_friday_of_every_month_at_start_time() -> None:
    schedule = Schedule(monthly_occurrences=(MonthlyOccurrence(FRI, 1), MonthlyOccurrence(FRI, -1)))
    assert first(Frequency.MONTH, schedule, start="2024-03-01T09:30:00Z", n=4) == [
        "2024-03-01T09:30:00Z",
        "2024-03-29T09:30:00Z",
        "2024-04-05T09:30:00Z",
        "2024-04-26T09:30:00Z",
    ]


def test_doc_fifth_friday_of_every_month_skips_months_without_one() -> None:
    schedule = Schedule(monthly_occurrences=(MonthlyOccurrence(FRI, 5),))
    assert first(Frequency.MONTH, schedule, start="2024-01-01T09:30:00Z", n=5) == [
        "2024-03-29T09:30:00Z",
        "2024-05-31T09:30:00Z",
        "2024-08-30T09:30:00Z",
        "2024-11-29T09:30:00Z",
        "2025-01-31T09:30:00Z",
    ]


def test_doc_every_15_minutes_on_the_last_friday_of_the_month() -> None:
    schedule = Schedule(minutes=(0, 15, 30, 45), monthly_occurrences=(MonthlyOccurrence(FRI, -1),))
    found = first(Frequency.MONTH, schedule, n=97)
    assert found[:2] == ["2024-01-26T00:00:00Z", "2024-01-26T00:15:00Z"]
    assert found[95:] == ["2024-01-26T23:45:00Z", "2024-02-23T00:00:00Z"]


def test_doc_5_15_5_45_17_15_17_45_on_the_third_wednesday_of_every_month() -> None:
    schedule = Schedule(minutes=(15, 45), hours=(5, 17), monthly_occurrences=(MonthlyOccurrence(WED, 3),))
    assert first(Frequency.MONTH, schedule, n=5) == [
        "2024-01-17T05:15:00Z",
        "2024-01-17T05:45:00Z",
        "2024-01-17T17:15:00Z",
        "2024-01-17T17:45:00Z",
        "2024-02-21T05:15:00Z",
    ]


# --- the doc's past-start-time example and the startTime table -----------------------------------


def test_doc_past_start_every_2_days_first_runs_at_next_future_instance() -> None:
    # start 2015-04-07 14:00, every 2 days, now 2015-04-08 13:00 → 2015-04-09 14:00, 04-11, 04-13, …
    assert first(Frequency.DAY, start="2015-04-07T14:00:00Z", origin="2015-04-08T13:00:00Z", interval=2, n=4) == [
        "2015-04-09T14:00:00Z",
        "2015-04-11T14:00:00Z",
        "2015-04-13T14:00:00Z",
        "2015-04-15T14:00:00Z",
    ]


def test_doc_past_start_gives_same_first_run_for_earlier_starts_on_the_same_cadence() -> None:
    for start in ("2015-04-05T14:00:00Z", "2015-04-01T14:00:00Z"):
        found = first(Frequency.DAY, start=start, origin="2015-04-08T13:00:00Z", interval=2, n=1)
        assert found == ["2015-04-09T14:00:00Z"]


def test_no_recurrence_runs_once_at_a_future_start() -> None:
    timing = Timing(at("2024-01-02T10:00:00Z"), None)
    assert first_occurrences(timing, at("2024-01-01T00:00:00Z"), 5) == ([at("2024-01-02T10:00:00Z")], True)


def test_no_recurrence_runs_once_immediately_when_start_is_past_or_absent() -> None:
    now = at("2024-01-01T12:34:56.789+00:00")
    assert list(occurrences(Timing(at("2023-06-01T00:00:00Z"), None), now)) == [now]
    assert list(occurrences(Timing(None, None), now)) == [now]


def test_no_start_time_runs_immediately_then_every_interval() -> None:
    now = at("2024-01-01T12:34:56.5+00:00")
    timing = Timing(None, Recurrence(Frequency.HOUR, 2))
    assert [iso(t) for t in first_occurrences(timing, now, 3)[0]] == [
        "2024-01-01T12:34:56.500000Z",
        "2024-01-01T14:34:56.500000Z",
        "2024-01-01T16:34:56.500000Z",
    ]


def test_no_start_time_with_a_schedule_anchors_the_schedule_at_origin() -> None:
    timing = Timing(None, Recurrence(Frequency.WEEK, schedule=Schedule(week_days=(WED,))))
    found, _ = first_occurrences(timing, at("2024-01-01T10:15:00Z"), 2)
    assert [iso(t) for t in found] == ["2024-01-03T10:15:00Z", "2024-01-10T10:15:00Z"]


def test_start_exactly_at_origin_runs_at_start() -> None:
    assert first(Frequency.DAY, start="2024-01-01T10:00:00Z", origin="2024-01-01T10:00:00Z", n=1) == [
        "2024-01-01T10:00:00Z"
    ]


# --- month ends and fifth weekdays ---------------------------------------------------------------


def test_month_day_31_skips_months_without_a_31st() -> None:
    assert first(Frequency.MONTH, Schedule(minutes=(0,), hours=(6,), month_days=(31,)), n=5) == [
        "2024-01-31T06:00:00Z",
        "2024-03-31T06:00:00Z",
        "2024-05-31T06:00:00Z",
        "2024-07-31T06:00:00Z",
        "2024-08-31T06:00:00Z",
    ]


def test_month_days_30_and_last_day_run_once_on_april_30th() -> None:
    schedule = Schedule(minutes=(0,), hours=(6,), month_days=(30, -1))
    assert first(Frequency.MONTH, schedule, start="2024-04-01T00:00:00Z", n=4) == [
        "2024-04-30T06:00:00Z",
        "2024-05-30T06:00:00Z",
        "2024-05-31T06:00:00Z",
        "2024-06-30T06:00:00Z",
    ]


def test_negative_month_day_beyond_a_short_month_is_skipped() -> None:
    # -31 is the 1st of a 31-day month and does not exist in shorter ones.
    schedule = Schedule(minutes=(0,), hours=(6,), month_days=(-31,))
    assert first(Frequency.MONTH, schedule, n=3) == [
        "2024-01-01T06:00:00Z",
        "2024-03-01T06:00:00Z",
        "2024-05-01T06:00:00Z",
    ]


def test_monthly_without_schedule_from_january_31st_skips_short_months() -> None:
    assert first(Frequency.MONTH, start="2024-01-31T09:00:00Z", n=5) == [
        "2024-01-31T09:00:00Z",
        "2024-03-31T09:00:00Z",
        "2024-05-31T09:00:00Z",
        "2024-07-31T09:00:00Z",
        "2024-08-31T09:00:00Z",
    ]


def test_monthly_without_schedule_from_february_29th_runs_only_in_leap_years() -> None:
    assert first(Frequency.MONTH, start="2096-02-29T09:00:00Z", interval=12, n=3) == [
        "2096-02-29T09:00:00Z",
        "2104-02-29T09:00:00Z",  # 2100 is not a leap year
        "2108-02-29T09:00:00Z",
    ]


def test_fifth_friday_in_february_only_every_28_years_or_so() -> None:
    schedule = Schedule(minutes=(0,), hours=(5,), monthly_occurrences=(MonthlyOccurrence(FRI, 5),))
    assert first(Frequency.MONTH, schedule, start="2024-02-01T00:00:00Z", interval=12, n=3) == [
        "2036-02-29T05:00:00Z",
        "2064-02-29T05:00:00Z",
        "2092-02-29T05:00:00Z",
    ]


def test_every_friday_of_the_month_when_occurrence_is_absent() -> None:
    schedule = Schedule(minutes=(0,), hours=(5,), monthly_occurrences=(MonthlyOccurrence(FRI),))
    assert first(Frequency.MONTH, schedule, n=6) == [
        "2024-01-05T05:00:00Z",
        "2024-01-12T05:00:00Z",
        "2024-01-19T05:00:00Z",
        "2024-01-26T05:00:00Z",
        "2024-02-02T05:00:00Z",
        "2024-02-09T05:00:00Z",
    ]


def test_month_days_and_monthly_occurrences_together_are_their_union() -> None:
    schedule = Schedule(minutes=(0,), hours=(5,), month_days=(1, 26), monthly_occurrences=(MonthlyOccurrence(FRI, -1),))
    assert first(Frequency.MONTH, schedule, n=4) == [
        "2024-01-01T05:00:00Z",
        "2024-01-26T05:00:00Z",  # both the 26th and the last Friday: once
        "2024-02-01T05:00:00Z",
        "2024-02-23T05:00:00Z",
    ]


# --- intervals with a schedule -------------------------------------------------------------------


def test_week_interval_2_runs_every_other_week_counted_from_the_starts_week() -> None:
    # Start on Wednesday 2024-01-03: that week's Friday, then the week of 2024-01-15, and so on.
    schedule = Schedule(minutes=(0,), hours=(9,), week_days=(MON, FRI))
    assert first(Frequency.WEEK, schedule, start="2024-01-03T00:00:00Z", interval=2, n=5) == [
        "2024-01-05T09:00:00Z",
        "2024-01-15T09:00:00Z",
        "2024-01-19T09:00:00Z",
        "2024-01-29T09:00:00Z",
        "2024-02-02T09:00:00Z",
    ]


def test_month_interval_3_runs_every_third_month_from_the_starts_month() -> None:
    schedule = Schedule(minutes=(0,), hours=(6,), month_days=(1, 15))
    assert first(Frequency.MONTH, schedule, start="2024-01-10T00:00:00Z", interval=3, n=4) == [
        "2024-01-15T06:00:00Z",
        "2024-04-01T06:00:00Z",
        "2024-04-15T06:00:00Z",
        "2024-07-01T06:00:00Z",
    ]


def test_day_interval_2_with_schedule_runs_every_other_day() -> None:
    assert first(Frequency.DAY, Schedule(minutes=(0,), hours=(6, 18)), interval=2, n=4) == [
        "2024-01-01T06:00:00Z",
        "2024-01-01T18:00:00Z",
        "2024-01-03T06:00:00Z",
        "2024-01-03T18:00:00Z",
    ]


def test_hour_frequency_with_minutes_runs_in_every_interval_th_hour() -> None:
    assert first(Frequency.HOUR, Schedule(minutes=(0, 30)), start="2024-01-01T10:10:00Z", interval=3, n=4) == [
        "2024-01-01T10:30:00Z",
        "2024-01-01T13:00:00Z",
        "2024-01-01T13:30:00Z",
        "2024-01-01T16:00:00Z",
    ]


def test_minute_frequency_with_hours_only_runs_every_interval_minutes_in_those_hours() -> None:
    # Decision: for frequency Minute an omitted `minutes` means every minute, not the start's minute.
    found = first(Frequency.MINUTE, Schedule(hours=(9,)), start="2024-01-01T08:00:00Z", interval=20, n=4)
    assert found == ["2024-01-01T09:00:00Z", "2024-01-01T09:20:00Z", "2024-01-01T09:40:00Z", "2024-01-02T09:00:00Z"]


# --- seconds, empty schedules, offsets -----------------------------------------------------------


def test_schedules_run_at_whole_minutes_even_when_the_start_has_seconds() -> None:
    assert first(Frequency.DAY, Schedule(hours=(5, 6)), start="2024-01-01T05:10:30Z", n=2) == [
        "2024-01-01T06:10:00Z",  # 05:10:00 is before the start
        "2024-01-02T05:10:00Z",
    ]


def test_recurrence_without_schedule_keeps_the_starts_seconds() -> None:
    assert first(Frequency.MINUTE, start="2024-01-01T05:10:30.250000+00:00", interval=7, n=2) == [
        "2024-01-01T05:10:30.250000Z",
        "2024-01-01T05:17:30.250000Z",
    ]


def test_an_empty_schedule_is_the_same_as_no_schedule() -> None:
    timing = Timing(at("2024-01-01T05:10:30Z"), Recurrence(Frequency.HOUR, 5, schedule=Schedule()))
    found, _ = first_occurrences(timing, at("2024-01-01T00:00:00Z"), 2)
    assert [iso(t) for t in found] == ["2024-01-01T05:10:30Z", "2024-01-01T10:10:30Z"]


def test_schedule_hours_are_read_in_the_start_times_offset() -> None:
    schedule = Schedule(minutes=(0,), hours=(5, 17))
    assert first(Frequency.DAY, schedule, start="2024-01-01T09:30:00-08:00", n=3) == [
        "2024-01-02T01:00:00Z",  # 17:00 at -08:00
        "2024-01-02T13:00:00Z",
        "2024-01-03T01:00:00Z",
    ]


def test_week_days_are_those_of_the_start_times_offset() -> None:
    # Monday 02:00 at +05:30 is Sunday 20:30 UTC.
    schedule = Schedule(minutes=(0,), hours=(2,), week_days=(MON,))
    assert first(Frequency.WEEK, schedule, start="2024-01-01T00:00:00+05:30", n=2) == [
        "2023-12-31T20:30:00Z",
        "2024-01-07T20:30:00Z",
    ]


def test_hour_periods_follow_the_local_clock_of_a_half_hour_offset() -> None:
    found = first(Frequency.HOUR, Schedule(minutes=(45,)), start="2024-01-01T10:00:00+05:30", interval=2, n=3)
    assert found == ["2024-01-01T05:15:00Z", "2024-01-01T07:15:00Z", "2024-01-01T09:15:00Z"]


def test_month_end_is_the_month_end_in_the_start_times_offset() -> None:
    schedule = Schedule(minutes=(0,), hours=(23,), month_days=(-1,))
    assert first(Frequency.MONTH, schedule, start="2024-01-01T00:00:00-08:00", n=2) == [
        "2024-02-01T07:00:00Z",
        "2024-03-01T07:00:00Z",
    ]


def test_naive_datetimes_count_as_utc() -> None:
    timing = Timing(datetime(2024, 1, 1, 5), Recurrence(Frequency.DAY))
    found, _ = first_occurrences(timing, datetime(2024, 1, 1), 1)
    assert found == [at("2024-01-01T05:00:00Z")]


# --- count and endTime ---------------------------------------------------------------------------


def test_count_with_past_start_counts_only_runs_from_origin_on() -> None:
    timing = Timing(at("2015-04-07T14:00:00Z"), Recurrence(Frequency.DAY, 2, count=3))
    found, complete = first_occurrences(timing, at("2015-04-08T13:00:00Z"), 10)
    assert [iso(t) for t in found] == ["2015-04-09T14:00:00Z", "2015-04-11T14:00:00Z", "2015-04-13T14:00:00Z"]
    assert complete


def test_end_time_is_inclusive() -> None:
    found = first(Frequency.HOUR, end="2024-01-01T03:00:00Z", n=10)
    assert found == ["2024-01-01T00:00:00Z", "2024-01-01T01:00:00Z", "2024-01-01T02:00:00Z", "2024-01-01T03:00:00Z"]


def test_end_time_in_another_offset_is_compared_as_an_instant() -> None:
    found = first(Frequency.HOUR, end="2024-01-01T04:59:59+02:00", n=10)
    assert found == ["2024-01-01T00:00:00Z", "2024-01-01T01:00:00Z", "2024-01-01T02:00:00Z"]


def test_count_and_end_time_whichever_ends_first_wins() -> None:
    assert len(first(Frequency.HOUR, count=10, end="2024-01-01T02:00:00Z", n=20)) == 3
    assert len(first(Frequency.HOUR, count=2, end="2024-02-01T00:00:00Z", n=20)) == 2


def test_count_applies_to_schedule_occurrences() -> None:
    found = first(Frequency.DAY, Schedule(minutes=(0, 30)), start="2024-01-01T10:05:00Z", count=3, n=10)
    assert found == ["2024-01-01T10:30:00Z", "2024-01-01T11:00:00Z", "2024-01-01T11:30:00Z"]


# --- first_occurrences' complete flag ------------------------------------------------------------


def test_complete_flag_of_first_occurrences() -> None:
    def flag(count: int | None, limit: int) -> tuple[int, bool]:
        timing = Timing(at("2024-01-01T00:00:00Z"), Recurrence(Frequency.DAY, count=count))
        found, complete = first_occurrences(timing, at("2024-01-01T00:00:00Z"), limit)
        return len(found), complete

    assert flag(3, 3) == (3, True)
    assert flag(3, 5) == (3, True)
    assert flag(4, 3) == (3, False)
    assert flag(None, 3) == (3, False)
    assert flag(None, 0) == (0, False)
    assert flag(1, 0) == (0, False)


def test_complete_flag_when_end_time_ends_the_series() -> None:
    timing = Timing(at("2024-01-01T00:00:00Z"), Recurrence(Frequency.DAY, end_time=at("2024-01-03T00:00:00Z")))
    found, complete = first_occurrences(timing, at("2024-01-01T00:00:00Z"), 3)
    assert len(found) == 3 and complete


# --- sparse and empty series terminate -----------------------------------------------------------


def test_month_day_31_every_18_months_terminates_and_runs() -> None:
    schedule = Schedule(minutes=(0,), hours=(0,), month_days=(31,))
    found = first(Frequency.MONTH, schedule, start="2024-01-01T00:00:00Z", interval=18, n=4)
    assert found == ["2024-01-31T00:00:00Z", "2025-07-31T00:00:00Z", "2027-01-31T00:00:00Z", "2028-07-31T00:00:00Z"]


def test_month_day_31_every_18_months_from_february_runs_in_the_augusts() -> None:
    # Feb, Aug, Feb, Aug …: only August has a 31st.
    found = first(Frequency.MONTH, Schedule(month_days=(31,)), start="2024-02-01T00:00:00Z", interval=18, n=2)
    assert found == ["2025-08-31T00:00:00Z", "2028-08-31T00:00:00Z"]


def test_a_schedule_that_can_never_match_is_an_empty_complete_series() -> None:
    never = [
        # February never has a 30th.
        (Frequency.MONTH, 12, Schedule(month_days=(30,)), "2024-02-01T00:00:00Z"),
        # Every other minute from an even minute never lands on an odd one.
        (Frequency.MINUTE, 2, Schedule(minutes=(15,)), "2024-01-01T00:00:00Z"),
        # Every 48 hours from 00:xx never lands on 05:xx.
        (Frequency.HOUR, 48, Schedule(hours=(5,)), "2024-01-01T00:00:00Z"),
    ]
    for frequency, interval, schedule, start in never:
        timing = Timing(at(start), Recurrence(frequency, interval, schedule=schedule))
        assert first_occurrences(timing, at(start), 10) == ([], True)
        assert smallest_gap(timing, at(start)) is None
        assert next_occurrence_after(timing, at(start), at(start)) is None


def test_large_minute_and_hour_intervals_find_their_sparse_matches() -> None:
    # Every 997 minutes hits 05:15 once every 997 days.
    found = first(Frequency.MINUTE, Schedule(minutes=(15,), hours=(5,)), interval=997, n=3)
    first_run = at(found[0])
    assert [at(t) - first_run for t in found] == [timedelta(0), timedelta(days=997), timedelta(days=1994)]
    assert (first_run - at("2024-01-01T00:00:00Z")) % timedelta(minutes=997) == timedelta(0)
    # Every 1000 hours from 05:00 visits 05, 21, 13, 05 … o'clock.
    found = first(Frequency.HOUR, Schedule(hours=(5,)), start="2024-01-01T05:00:00Z", interval=1000, n=2)
    assert [at(t) - at(found[0]) for t in found] == [timedelta(0), timedelta(hours=3000)]


def test_series_stop_at_the_end_of_the_representable_calendar() -> None:
    timing = Timing(at("9999-12-20T00:00:00Z"), Recurrence(Frequency.DAY))
    found, complete = first_occurrences(timing, at("9999-12-20T00:00:00Z"), 100)
    assert complete and found[-1] == at("9999-12-30T00:00:00Z")


# --- smallest_gap and next_occurrence_after ------------------------------------------------------


def test_smallest_gap_of_every_quarter_hour_is_15_minutes() -> None:
    timing = Timing(at("2024-01-01T00:00:00Z"), Recurrence(Frequency.DAY, schedule=Schedule(minutes=(0, 15, 30, 45))))
    assert smallest_gap(timing, at("2024-01-01T00:00:00Z")) == timedelta(minutes=15)


def test_smallest_gap_sees_the_tightest_pair_of_an_uneven_schedule() -> None:
    schedule = Schedule(minutes=(0,), hours=(9,), week_days=(MON,), month_days=())
    timing = Timing(at("2024-01-01T00:00:00Z"), Recurrence(Frequency.WEEK, schedule=schedule))
    assert smallest_gap(timing, at("2024-01-01T00:00:00Z")) == timedelta(days=7)
    timing = Timing(at("2024-01-01T00:00:00Z"), Recurrence(Frequency.DAY, schedule=Schedule(minutes=(0, 5))))
    assert smallest_gap(timing, at("2024-01-01T00:00:00Z")) == timedelta(minutes=5)


def test_smallest_gap_is_none_for_fewer_than_two_occurrences() -> None:
    assert smallest_gap(Timing(at("2024-01-01T00:00:00Z"), None), at("2024-01-01T00:00:00Z")) is None
    timing = Timing(at("2024-01-01T00:00:00Z"), Recurrence(Frequency.MINUTE, count=1))
    assert smallest_gap(timing, at("2024-01-01T00:00:00Z")) is None


def test_next_occurrence_after_is_strictly_after() -> None:
    timing = Timing(at("2024-01-01T00:00:00Z"), Recurrence(Frequency.HOUR))
    origin = at("2024-01-01T00:00:00Z")
    assert next_occurrence_after(timing, origin, at("2024-01-01T05:00:00Z")) == at("2024-01-01T06:00:00Z")
    assert next_occurrence_after(timing, origin, at("2024-01-01T05:00:01Z")) == at("2024-01-01T06:00:00Z")
    assert next_occurrence_after(timing, origin, at("2023-01-01T00:00:00Z")) == origin


def test_next_occurrence_after_honours_count_from_origin() -> None:
    timing = Timing(at("2015-04-07T14:00:00Z"), Recurrence(Frequency.DAY, 2, count=3))
    origin = at("2015-04-08T13:00:00Z")
    assert next_occurrence_after(timing, origin, at("2015-04-11T14:00:00Z")) == at("2015-04-13T14:00:00Z")
    assert next_occurrence_after(timing, origin, at("2015-04-13T14:00:00Z")) is None


def test_next_occurrence_after_honours_end_time_and_one_time_runs() -> None:
    timing = Timing(at("2024-01-01T00:00:00Z"), Recurrence(Frequency.HOUR, end_time=at("2024-01-01T02:00:00Z")))
    origin = at("2024-01-01T00:00:00Z")
    assert next_occurrence_after(timing, origin, at("2024-01-01T01:00:00Z")) == at("2024-01-01T02:00:00Z")
    assert next_occurrence_after(timing, origin, at("2024-01-01T02:00:00Z")) is None
    once = Timing(at("2024-01-02T00:00:00Z"), None)
    assert next_occurrence_after(once, origin, origin) == at("2024-01-02T00:00:00Z")
    assert next_occurrence_after(once, origin, at("2024-01-02T00:00:00Z")) is None


def test_next_occurrence_after_counts_many_past_runs_quickly() -> None:
    # A leap year of minutely runs (527,040) between origin and `after`, counted arithmetically.
    origin = at("2024-01-01T00:00:00Z")
    timing = Timing(origin, Recurrence(Frequency.MINUTE, count=527_041))
    assert next_occurrence_after(timing, origin, at("2024-12-31T23:59:00Z")) == at("2025-01-01T00:00:00Z")
    assert next_occurrence_after(timing, origin, at("2025-01-01T00:00:00Z")) is None


# --- properties against a brute-force walk of the calendar ---------------------------------------


def _brute_force(timing: Timing, origin: datetime, until: datetime) -> list[datetime]:
    """Every occurrence up to `until` (inclusive), by testing each local minute against the rules."""
    reference = timing.start_time or origin
    zone = timezone(reference.utcoffset() or timedelta(0))
    origin_local = origin.astimezone(zone).replace(tzinfo=None)
    start_local = timing.start_time.astimezone(zone).replace(tzinfo=None) if timing.start_time else None
    anchor = start_local or origin_local
    lower = max(anchor, origin_local)
    until_local = until.astimezone(zone).replace(tzinfo=None)
    recurrence = timing.recurrence
    if recurrence is None:
        return [lower.replace(tzinfo=zone).astimezone(UTC)] if lower <= until_local else []

    frequency, interval = recurrence.frequency, recurrence.interval
    schedule = recurrence.schedule if recurrence.schedule != Schedule() else None
    s = schedule or Schedule()
    tail = timedelta(0) if schedule else timedelta(seconds=anchor.second, microseconds=anchor.microsecond)

    def units_from_anchor(t: datetime) -> int:
        if frequency is Frequency.MINUTE:
            return (t - anchor.replace(second=0, microsecond=0)) // timedelta(minutes=1)
        if frequency is Frequency.HOUR:
            return (t.replace(minute=0) - anchor.replace(minute=0, second=0, microsecond=0)) // timedelta(hours=1)
        if frequency is Frequency.DAY:
            return (t.date() - anchor.date()).days
        if frequency is Frequency.WEEK:
            monday = t.date() - timedelta(days=t.weekday())
            return (monday - (anchor.date() - timedelta(days=anchor.weekday()))).days // 7
        return (t.year - anchor.year) * 12 + t.month - anchor.month

    def day_matches(t: datetime) -> bool:
        if frequency is Frequency.WEEK:
            return t.weekday() in (s.week_days or (anchor.weekday(),))
        if frequency is Frequency.MONTH:
            length = calendar.monthrange(t.year, t.month)[1]
            if not s.month_days and not s.monthly_occurrences:
                return t.day == anchor.day
            if any(t.day == (d if d > 0 else length + 1 + d) for d in s.month_days):
                return True
            same_weekday = [d for d in range(1, length + 1) if t.replace(day=d).weekday() == t.weekday()]
            for item in s.monthly_occurrences:
                if item.day != t.weekday():
                    continue
                if item.occurrence is None:
                    return True
                if len(same_weekday) >= abs(item.occurrence):
                    nth = same_weekday[item.occurrence - 1 if item.occurrence > 0 else item.occurrence]
                    if nth == t.day:
                        return True
            return False
        return True

    def minute_matches(t: datetime) -> bool:
        if s.minutes:
            return t.minute in s.minutes
        return frequency is Frequency.MINUTE or t.minute == anchor.minute

    def hour_matches(t: datetime) -> bool:
        if s.hours:
            return t.hour in s.hours
        return bool(s.minutes) or frequency in (Frequency.MINUTE, Frequency.HOUR) or t.hour == anchor.hour

    found: list[datetime] = []
    day = datetime.combine(lower.date(), datetime.min.time())
    while day <= until_local:
        if day_matches(day) and (
            frequency in (Frequency.MINUTE, Frequency.HOUR) or units_from_anchor(day) % interval == 0
        ):
            for minute in range(1440):
                t = day + timedelta(minutes=minute)
                if (
                    hour_matches(t)
                    and minute_matches(t)
                    and units_from_anchor(t) % interval == 0
                    and lower <= t + tail <= until_local
                ):
                    found.append(t + tail)
        day += timedelta(days=1)
    if recurrence.count is not None:
        found = found[: recurrence.count]
    if recurrence.end_time is not None:
        end_local = recurrence.end_time.astimezone(zone).replace(tzinfo=None)
        found = [t for t in found if t <= end_local]
    return [t.replace(tzinfo=zone).astimezone(UTC) for t in found]


_OFFSETS = [
    timedelta(0),
    timedelta(hours=-8),
    timedelta(hours=5, minutes=30),
    timedelta(hours=14),
    timedelta(hours=-12),
    timedelta(minutes=45),
    timedelta(hours=-3, minutes=-30),
]

# How far the brute force walks for each frequency, in days, given the interval: a few periods.
_WINDOW_DAYS: dict[Frequency, Callable[[int], int]] = {
    Frequency.MINUTE: lambda interval: 2,
    Frequency.HOUR: lambda interval: 4,
    Frequency.DAY: lambda interval: 2 * interval + 1,
    Frequency.WEEK: lambda interval: 7 * interval + 7,
    Frequency.MONTH: lambda interval: 31 * (2 * interval + 1),
}


@st.composite
def _timings(draw: st.DrawFn) -> tuple[Timing, datetime, datetime]:
    """A timing, an origin, and the end of the window the brute force walks."""
    frequency = draw(st.sampled_from(Frequency))
    interval = draw(
        {
            Frequency.MINUTE: st.integers(1, 10) | st.integers(1, 90) | st.sampled_from([997, 1000]),
            Frequency.HOUR: st.integers(1, 6) | st.integers(1, 30) | st.sampled_from([48, 997, 1000]),
            Frequency.DAY: st.integers(1, 6),
            Frequency.WEEK: st.integers(1, 3),
            Frequency.MONTH: st.integers(1, 18),
        }[frequency]
    )
    zone = timezone(draw(st.sampled_from(_OFFSETS)))
    start = draw(st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2040, 1, 1)))
    if draw(st.booleans()):
        start = start.replace(second=0, microsecond=0)
    start = start.replace(tzinfo=zone)
    origin = start + draw(st.timedeltas(min_value=timedelta(days=-3), max_value=timedelta(days=3)))
    if frequency is Frequency.MONTH and draw(st.booleans()):
        origin += timedelta(days=draw(st.integers(0, 400)))  # past starts that skip whole months
    origin = origin.astimezone(UTC)
    has_start = draw(st.integers(0, 4)) > 0

    schedule = None
    if draw(st.integers(0, 3)) > 0:
        week_days: list[int] = []
        month_days: list[int] = []
        monthly: list[MonthlyOccurrence] = []
        if frequency is Frequency.WEEK:
            week_days = draw(st.lists(st.integers(0, 6), max_size=3))
        if frequency is Frequency.MONTH:
            month_days = draw(st.lists(st.integers(1, 31) | st.integers(-31, -1), max_size=3))
            occurrence = st.none() | st.integers(1, 5) | st.integers(-5, -1)
            monthly = draw(st.lists(st.builds(MonthlyOccurrence, st.integers(0, 6), occurrence), max_size=2))
        schedule = Schedule(
            minutes=tuple(draw(st.lists(st.integers(0, 59), max_size=4, unique=True))),
            hours=tuple(draw(st.lists(st.integers(0, 23), max_size=4, unique=True))),
            week_days=tuple(week_days),
            month_days=tuple(month_days),
            monthly_occurrences=tuple(monthly),
        )
    lower = max(start, origin) if has_start else origin
    window = timedelta(days=_WINDOW_DAYS[frequency](interval))
    count = draw(st.none() | st.integers(1, 12) | st.integers(1, 200))
    end = None
    if draw(st.integers(0, 2)) == 0:
        end = lower + draw(st.timedeltas(min_value=timedelta(0), max_value=window))
    timing = Timing(start if has_start else None, Recurrence(frequency, interval, count, end, schedule))
    return timing, origin, lower + window


_PROPERTY_SETTINGS = settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_PROPERTY_SETTINGS
@given(_timings())
def test_occurrences_match_a_minute_by_minute_walk_of_the_calendar(case: tuple[Timing, datetime, datetime]) -> None:
    timing, origin, until = case
    expected = _brute_force(timing, origin, until)
    actual = list(takewhile(lambda t: t <= until, occurrences(timing, origin)))
    assert actual == expected
    assert all(t.tzinfo is UTC for t in actual)


@_PROPERTY_SETTINGS
@given(_timings(), st.integers(0, 30))
def test_first_occurrences_and_smallest_gap_agree_with_the_walk(
    case: tuple[Timing, datetime, datetime], limit: int
) -> None:
    timing, origin, until = case
    expected = _brute_force(timing, origin, until)
    found, complete = first_occurrences(timing, origin, limit)
    if found and found[-1] <= until:
        assert found == expected[:limit]
        gaps = [b - a for a, b in zip(expected, expected[1:limit], strict=False)]
        assert smallest_gap(timing, origin, limit) == (min(gaps) if gaps else None)
    if complete:
        assert [t for t in found if t <= until] == expected
    count = timing.recurrence.count if timing.recurrence else 1
    if count is not None and count <= limit:
        assert complete


@_PROPERTY_SETTINGS
@given(_timings(), st.floats(0, 1))
def test_next_occurrence_after_agrees_with_the_walk(case: tuple[Timing, datetime, datetime], where: float) -> None:
    timing, origin, until = case
    expected = _brute_force(timing, origin, until)
    # From each occurrence to the next one (this is how the dispatcher steps through a series) …
    for previous, following in zip(expected[:40], expected[1:41], strict=False):
        assert next_occurrence_after(timing, origin, previous) == following
    count = timing.recurrence.count if timing.recurrence else 1
    if expected and len(expected) == count:
        assert next_occurrence_after(timing, origin, expected[-1]) is None
    # … and from any instant, before the origin or between occurrences.
    after = origin - timedelta(hours=1) + (until - origin + timedelta(hours=1)) * where
    later = [t for t in expected if t > after]
    actual = next_occurrence_after(timing, origin, after)
    if later:
        assert actual == later[0]
    else:
        assert actual is None or actual > until
