"""How the dispatcher reads a stored job definition: as the wire model its actions fire from
(``schemas.job.JobProperties``). The store is given this reader and knows no wire model itself."""

from __future__ import annotations

from typing import Any

from scheduler_emulator.schemas.job import JobDefinitionIn, JobProperties
from scheduler_emulator.store import dispatch_records

Claim = dispatch_records.Claim[JobProperties]
"""A claim of the dispatcher's store, as the dispatcher sees it: its ``properties`` are the job's parsed
definition."""


def read_definition(definition: dict[str, Any]) -> JobProperties:
    """A stored definition (its ``properties`` JSON) validated by today's rules; ValueError (pydantic's
    ValidationError) when they refuse it."""
    return JobDefinitionIn.model_validate({"properties": definition}).properties
