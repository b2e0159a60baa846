"""The states the dispatcher reads and writes, as enums. Each member's name is its value, so a database driver
that adapts an Enum by name (psycopg does) and one that adapts it as the str it is store the same text."""

from __future__ import annotations

from enum import StrEnum


class JobState(StrEnum):
    """A job's state (docs/reference/arm-api.md#jobs): only an Enabled job in an Enabled collection runs on schedule."""

    Enabled = "Enabled"
    Disabled = "Disabled"
    Faulted = "Faulted"
    Completed = "Completed"


FINAL_STATES = (JobState.Completed, JobState.Faulted)


class ActionName(StrEnum):
    """Which action of a job an attempt ran, as history names it."""

    MainAction = "MainAction"
    ErrorAction = "ErrorAction"


class AttemptStatus(StrEnum):
    """A history entry's status."""

    Completed = "Completed"
    Failed = "Failed"
    Postponed = "Postponed"


class OccurrenceOutcome(StrEnum):
    """How an occurrence ended (its record's ``outcome``)."""

    Completed = "Completed"
    Faulted = "Faulted"
