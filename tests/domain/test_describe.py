"""Schedules in plain words (the dashboard's Schedule column and calculator)."""

from __future__ import annotations

import pytest

from scheduler_emulator.domain.describe import describe_schedule


@pytest.mark.parametrize(
    ("definition", "words"),
    [
        ({"recurrence": {"frequency": "Minute", "interval": 15}}, "every 15 minutes"),
        ({"recurrence": {"frequency": "hour", "interval": 1}}, "every hour"),
        (
            {
                "startTime": "2030-01-04T09:00:00-08:00",
                "recurrence": {
                    "frequency": "Month",
                    "interval": 1,
                    "schedule": {"monthlyOccurrences": [{"day": "Friday", "occurrence": -1}]},
                },
            },
            "on the last Friday of each month at 09:00 (UTC\u221208:00)",
        ),
        (
            {
                "startTime": "2030-01-01T00:00:00Z",
                "recurrence": {
                    "frequency": "Week",
                    "interval": 2,
                    "schedule": {"weekDays": ["monday", "friday"], "hours": [9, 17], "minutes": [30]},
                },
            },
            "every 2 weeks on Monday and Friday at 09:30 and 17:30",
        ),
        (
            {"startTime": "2030-01-01T06:00:00+05:30", "recurrence": {"frequency": "Day", "interval": 1, "count": 3}},
            "every day at 06:00 (UTC+05:30), 3 times",
        ),
        (
            {"recurrence": {"frequency": "Month", "interval": 3, "schedule": {"monthDays": [1, -1]}}},
            "on day 1 and last of every 3 months",
        ),
        ({"startTime": "2030-01-01T09:00:00Z"}, "once, at 09:00 on 2030-01-01"),
        ({}, "once, as soon as created"),
        (
            {"recurrence": {"frequency": "Hour", "interval": 1, "endTime": "2030-02-01T00:00:00Z"}},
            "every hour, until 2030-02-01 00:00",
        ),
        (
            {"recurrence": {"frequency": "Hour", "interval": 1, "schedule": {"minutes": [0, 30]}}},
            "every hour at minute 0 and 30 of the hour",
        ),
    ],
)
def test_schedules_in_plain_words(definition: dict, words: str) -> None:
    assert describe_schedule(definition) == words


def test_odd_stored_values_do_not_break_it() -> None:
    assert describe_schedule({"recurrence": {"frequency": None, "interval": "x", "schedule": "y"}}) == "every time"
    assert describe_schedule({"startTime": "not a time", "recurrence": "nope"}) == "once, as soon as created"
