"""Wire model of a job collection (``JobCollectionDefinition``)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from pydantic import Field, model_validator

from scheduler_emulator.domain import plans
from scheduler_emulator.schemas.common import CaseInsensitive, Integer, WireModel
from scheduler_emulator.schemas.job import FREQUENCIES, MAX_INTERVAL
from scheduler_emulator.schemas.strict_json import check_line


class Sku(WireModel):
    name: CaseInsensitive(*plans.SKUS) | None = None  # type: ignore[valid-type]


class MaxRecurrence(WireModel):
    frequency: CaseInsensitive(*FREQUENCIES)  # type: ignore[valid-type]
    interval: Integer = Field(1, ge=1, le=max(MAX_INTERVAL.values()))


class Quota(WireModel):
    max_job_count: Integer | None = Field(None, ge=1, le=2**31 - 1)
    max_job_occurrence: Integer | None = Field(None, ge=1, le=2**31 - 1)
    max_recurrence: MaxRecurrence | None = None

    def domain(self) -> plans.Quota:
        return plans.Quota(
            max_job_count=self.max_job_count,
            max_job_occurrence=self.max_job_occurrence,
            max_recurrence=(self.max_recurrence.frequency, self.max_recurrence.interval)
            if self.max_recurrence
            else None,
        )


class JobCollectionProperties(WireModel):
    sku: Sku | None = None
    # Suspended: a PUT with it was answered 201 and echoed (recorded); such a collection fires nothing.
    state: CaseInsensitive("Enabled", "Disabled", "Suspended") | None = None  # type: ignore[valid-type]
    quota: Quota | None = None

    def canonical(self) -> dict[str, Any]:
        """The properties as they are stored and answered from (as schemas.job.JobProperties.canonical)."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)

    @property
    def sku_name(self) -> str:
        return (self.sku.name if self.sku else None) or plans.DEFAULT_SKU


class JobCollectionIn(WireModel):
    location: str = Field(min_length=1, max_length=100)
    tags: dict[str, str] | None = None
    properties: JobCollectionProperties | None = None

    @model_validator(mode="after")
    def _single_lines(self) -> JobCollectionIn:
        check_line(self.location, "location")
        for key, value in (self.tags or {}).items():
            check_line(key, "tags")
            check_line(value, f"tags.{key}")
        return self


def stored_limits(sku: str, properties: dict[str, Any], retry_floor: timedelta | None = None) -> plans.Limits:
    """The limits of a collection's plan and quota (raw properties as stored or sent)."""
    quota = properties.get("quota")
    parsed = Quota.model_validate(quota).domain() if isinstance(quota, dict) else plans.Quota()
    return plans.collection_limits(sku, parsed, retry_floor)
