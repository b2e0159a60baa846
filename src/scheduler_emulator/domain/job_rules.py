"""Rules a job definition must meet that depend on its collection's plan and on the current time,
and the effective retry policy the dispatcher applies."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from scheduler_emulator.domain import recurrence as rec
from scheduler_emulator.domain.durations import describe, parse_duration
from scheduler_emulator.domain.errors import Conflict, FieldError
from scheduler_emulator.domain.plans import Limits

# "18 months" of the documentation, as days: the Day interval limit is 548 too.
HORIZON = timedelta(days=548)
DEFAULT_RETRY_COUNT = 4
DEFAULT_RETRY_INTERVAL = timedelta(seconds=30)
MAX_RETRY_INTERVAL = HORIZON


@dataclass(frozen=True)
class RetrySpec:
    """A retry policy as written in the definition (None = omitted), with its ARM path."""

    path: str
    retry_type: str | None
    retry_count: int | None
    retry_interval: str | None


@dataclass(frozen=True)
class RetryPlan:
    """How many retries after the first attempt, and the wait between attempts."""

    retries: int
    interval: timedelta


def effective_retry(spec: RetrySpec | None, limits: Limits) -> RetryPlan:
    """The policy the dispatcher applies: default Fixed 4 × 30 s (1 hour on Free); None → no retries."""
    default_interval = max(DEFAULT_RETRY_INTERVAL, limits.min_retry_interval)
    if spec is None:
        return RetryPlan(DEFAULT_RETRY_COUNT, default_interval)
    if spec.retry_type == "None":
        return RetryPlan(0, default_interval)
    retries = DEFAULT_RETRY_COUNT if spec.retry_count is None else spec.retry_count
    interval = parse_duration(spec.retry_interval) if spec.retry_interval else default_interval
    return RetryPlan(retries, interval)


def check_retry(spec: RetrySpec, limits: Limits) -> None:
    """FieldError when an explicit interval is under the plan's floor or over 18 months."""
    if spec.retry_type == "None" or spec.retry_interval is None:
        return
    interval = parse_duration(spec.retry_interval)
    path = f"{spec.path}.retryInterval"
    if interval < limits.min_retry_interval:
        plan = f" on the {limits.sku} plan" if limits.sku == "Free" else ""
        raise FieldError(path, f"'{spec.retry_interval}' is shorter than {describe(limits.min_retry_interval)}{plan}")
    if interval > MAX_RETRY_INTERVAL:
        raise FieldError(path, f"'{spec.retry_interval}' is longer than 18 months")


def check_job(
    timing: rec.Timing,
    origin: datetime,
    retries: list[RetrySpec],
    authentication_paths: list[str],
    limits: Limits,
) -> None:
    """Raise FieldError (400) or Conflict (409) when the job breaks a time rule, a plan limit or a quota.

    ``origin`` is now: the instant the definition is being written."""
    if timing.start_time is not None and timing.start_time > origin + HORIZON:
        raise FieldError("properties.startTime", "is more than 18 months in the future")
    recurrence = timing.recurrence
    if recurrence is not None and recurrence.end_time is not None and recurrence.end_time < origin:
        raise FieldError("properties.recurrence.endTime", "is in the past")
    for spec in retries:
        check_retry(spec, limits)
    if authentication_paths and not limits.allows_authentication:
        raise Conflict(
            f"The {limits.sku} plan does not allow authentication on jobs ({authentication_paths[0]}); "
            "use a Standard or Premium job collection."
        )
    if recurrence is not None:
        if (
            limits.max_job_occurrence is not None
            and recurrence.count is not None
            and recurrence.count > limits.max_job_occurrence
        ):
            raise Conflict(
                f"The recurrence count {recurrence.count} exceeds the job collection's quota of "
                f"{limits.max_job_occurrence} occurrences per job (properties.recurrence.count)."
            )
        gap = rec.smallest_gap(timing, origin)
        if gap is not None and gap < limits.min_recurrence:
            raise Conflict(
                f"The recurrence runs as often as every {describe(gap)}, more often than the job collection "
                f"allows (at most once every {describe(limits.min_recurrence)}) (properties.recurrence)."
            )


def check_job_count(existing: int, limits: Limits) -> None:
    """Conflict when one more job would exceed the collection's job limit."""
    if existing >= limits.max_jobs:
        raise Conflict(
            f"The job collection already holds {existing} jobs, the most its {limits.sku} plan and quota allow; "
            "delete a job, or raise the quota or the plan."
        )
