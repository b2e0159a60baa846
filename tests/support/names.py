"""Unique ARM names for one test."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from support.waiting import unique


@dataclass
class Names:
    """Unique subscription, resource group and collection names for one test."""

    subscription: str = field(default_factory=lambda: str(uuid.uuid4()))
    resource_group: str = field(default_factory=lambda: unique("rg-"))
    collection: str = field(default_factory=lambda: unique("jc-"))

    @property
    def rg_path(self) -> str:
        return f"/subscriptions/{self.subscription}/resourceGroups/{self.resource_group}/providers/Microsoft.Scheduler"

    @property
    def collection_path(self) -> str:
        return f"{self.rg_path}/jobCollections/{self.collection}"

    def job_path(self, job: str) -> str:
        return f"{self.collection_path}/jobs/{job}"
