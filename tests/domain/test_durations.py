"""Durations read and written back (domain/durations.py): every form the emulator writes reads back as
the same length, including the day-×30 TimeSpan of azure-mgmt-scheduler 1.1.3/2.0.0, and the forms
match what those clients' own libraries write (isodate for ISO-8601, their patch.py for TimeSpan)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduler_emulator.domain.durations import format_iso, format_timespan, is_timespan_with_days, parse_duration

# Up to 18 months (the longest retry interval), whole microseconds.
lengths = st.timedeltas(min_value=timedelta(0), max_value=timedelta(days=548))


@given(lengths)
def test_iso_and_timespan_read_back_as_the_same_length(length: timedelta) -> None:
    assert parse_duration(format_iso(length)) == length
    assert parse_duration(format_timespan(length)) == length


@given(lengths.map(lambda d: timedelta(days=d.days, seconds=d.seconds)))
def test_the_day_x30_timespan_reads_back_with_its_factor(length: timedelta) -> None:
    text = format_timespan(length, day_factor=30, fractions=False)
    assert parse_duration(text, timespan_day_factor=30) == length


@pytest.mark.parametrize(
    ("length", "iso", "timespan", "sdk_timespan"),
    [
        # isodate.duration_isoformat and the 1.1.3/2.0.0 patch.py (from_iso8601_to_timespan) write these.
        (timedelta(seconds=30), "PT30S", "00:00:30", "00:00:30"),
        (timedelta(minutes=20), "PT20M", "00:20:00", "00:20:00"),
        (timedelta(hours=1), "PT1H", "01:00:00", "01:00:00"),
        (timedelta(days=1), "P1D", "1.00:00:00", "30.00:00:00"),
        (timedelta(days=2), "P2D", "2.00:00:00", "60.00:00:00"),
        (timedelta(days=1, hours=2, minutes=3, seconds=4), "P1DT2H3M4S", "1.02:03:04", "30.02:03:04"),
        (timedelta(seconds=0.5), "PT0.5S", "00:00:00.5", "00:00:00"),
        (timedelta(0), "P0D", "00:00:00", "00:00:00"),
    ],
)
def test_written_forms(length: timedelta, iso: str, timespan: str, sdk_timespan: str) -> None:
    assert format_iso(length) == iso
    assert format_timespan(length) == timespan
    assert format_timespan(length, day_factor=30, fractions=False) == sdk_timespan


def test_a_days_part_not_a_multiple_of_30_is_that_many_thirtieths() -> None:
    # Decision (api/client_dialects.py): 45 TimeSpan days from the x30 generation are 1.5 days.
    assert parse_duration("45.00:00:00", timespan_day_factor=30) == timedelta(days=1, hours=12)
    assert parse_duration("1.00:00:00", timespan_day_factor=30) == timedelta(minutes=48)


@pytest.mark.parametrize(("text", "has_days"), [("1.02:03:04", True), ("00:00:30", False), ("P1D", False)])
def test_only_a_timespan_with_days_depends_on_the_reader(text: str, has_days: bool) -> None:
    assert is_timespan_with_days(text) is has_days
