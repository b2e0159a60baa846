"""Where the resources the operations act on live: the address every surface resolves a request to before it
calls service/ (the ARM routers, the classic API, template deployments, the dashboard)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class CollectionRef:
    """Where a job collection lives: subscription, resource group (a classic cloud service), name."""

    subscription_id: str
    resource_group: str
    name: str
