"""Plan (SKU) limits and collection quotas: how many jobs, how often, how many occurrences."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from scheduler_emulator.domain.durations import describe
from scheduler_emulator.domain.errors import FieldError

FREE = "Free"
SKUS = ("Free", "Standard", "P10Premium", "P20Premium")
DEFAULT_SKU = "Standard"
MAX_COLLECTIONS_PER_SUBSCRIPTION = 200_000
MAX_FREE_COLLECTIONS_PER_SUBSCRIPTION = 1

# The shortest possible length of one frequency unit: a month can be as short as 28 days, so a monthly
# limit must accept a February gap.
UNIT_MIN_LENGTH = {
    "Minute": timedelta(minutes=1),
    "Hour": timedelta(hours=1),
    "Day": timedelta(days=1),
    "Week": timedelta(days=7),
    "Month": timedelta(days=28),
}


@dataclass(frozen=True)
class Plan:
    max_jobs: int
    min_recurrence: timedelta  # the most frequent recurrence the plan allows
    min_retry_interval: timedelta
    allows_authentication: bool


PLANS = {
    "Free": Plan(5, timedelta(hours=1), timedelta(hours=1), allows_authentication=False),
    "Standard": Plan(50, timedelta(minutes=1), timedelta(seconds=15), allows_authentication=True),
    "P10Premium": Plan(50, timedelta(minutes=1), timedelta(seconds=15), allows_authentication=True),
    "P20Premium": Plan(1000, timedelta(minutes=1), timedelta(seconds=15), allows_authentication=True),
}


@dataclass(frozen=True)
class Quota:
    max_job_count: int | None = None
    max_job_occurrence: int | None = None
    max_recurrence: tuple[str, int] | None = None  # (frequency, interval)


@dataclass(frozen=True)
class Limits:
    """What a collection allows its jobs: its plan, tightened by its quota."""

    sku: str
    max_jobs: int
    min_recurrence: timedelta
    min_retry_interval: timedelta
    allows_authentication: bool
    max_job_occurrence: int | None


def recurrence_period(frequency: str, interval: int) -> timedelta:
    """The shortest time between two runs of ``interval`` units of ``frequency``."""
    return UNIT_MIN_LENGTH[frequency] * interval


def collection_limits(sku: str, quota: Quota, retry_floor: timedelta | None = None) -> Limits:
    """The effective limits; FieldError when the quota tries to loosen the plan.

    ``retry_floor`` is the operator's lower retry-interval floor for paid plans (never above 15 s)."""
    plan = PLANS[sku]
    max_jobs = plan.max_jobs
    if quota.max_job_count is not None:
        if quota.max_job_count > plan.max_jobs:
            raise FieldError(
                "properties.quota.maxJobCount",
                f"{quota.max_job_count} exceeds the {sku} plan's limit of {plan.max_jobs} jobs",
            )
        max_jobs = quota.max_job_count
    min_recurrence = plan.min_recurrence
    if quota.max_recurrence is not None:
        period = recurrence_period(*quota.max_recurrence)
        if period < plan.min_recurrence:
            raise FieldError(
                "properties.quota.maxRecurrence",
                f"every {quota.max_recurrence[1]} {quota.max_recurrence[0].lower()}(s) is more frequent than the "
                f"{sku} plan allows (at most once every {describe(plan.min_recurrence)})",
            )
        min_recurrence = period
    return Limits(
        sku=sku,
        max_jobs=max_jobs,
        min_recurrence=min_recurrence,
        min_retry_interval=min(plan.min_retry_interval, retry_floor)
        if retry_floor is not None and sku != FREE
        else plan.min_retry_interval,
        allows_authentication=plan.allows_authentication,
        max_job_occurrence=quota.max_job_occurrence,
    )
