"""Resource providers (docs/reference/front-door.md#providers): what Microsoft.Scheduler offers, and each subscription's
registration, remembered but gating nothing (**Decision**)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.orm import Session

from scheduler_emulator.domain.errors import NotFound
from scheduler_emulator.domain.regions import known_display_names
from scheduler_emulator.store import resources as store

SCHEDULER_API_VERSIONS = ("2016-03-01", "2016-01-01", "2014-08-01-preview")


@dataclass(frozen=True, kw_only=True)
class Provider:
    namespace: str
    resource_types: tuple[tuple[str, tuple[str, ...]], ...]  # (resource type, api-versions)
    default_state: str  # before any register/unregister


# The providers this emulator knows. Microsoft.Resources is always registered in Azure.
PROVIDERS = (
    Provider(
        namespace="Microsoft.Scheduler",
        resource_types=(
            ("jobCollections", SCHEDULER_API_VERSIONS),
            ("jobCollections/jobs", SCHEDULER_API_VERSIONS),
            ("operations", SCHEDULER_API_VERSIONS),
        ),
        default_state="NotRegistered",
    ),
    Provider(
        namespace="Microsoft.Resources",
        resource_types=(
            ("resourceGroups", ("2024-03-01", "2022-09-01", "2021-04-01", "2019-10-01")),
            ("deployments", ("2024-03-01", "2022-09-01", "2021-04-01", "2019-10-01")),
            ("deployments/operations", ("2024-03-01", "2022-09-01", "2021-04-01", "2019-10-01")),
        ),
        default_state="Registered",
    ),
)


@dataclass(frozen=True, kw_only=True)
class ProviderState:
    provider: Provider
    registration_state: str
    locations: tuple[str, ...]


# What an inert resource's provider lists as api-versions (any date-shaped one is answered on these paths).
INERT_API_VERSIONS = ("2022-09-01",)


def _known(session: Session, subscription: str, namespace: str) -> Provider:
    """The provider: one the emulator hosts, or the provider of inert resources kept in the subscription (so
    ``az resource show --ids`` finds an api-version for them)."""
    for provider in PROVIDERS:
        if provider.namespace.lower() == namespace.lower():
            return provider
    inert = [
        r
        for r in store.generic_in_group(session, subscription, None)
        if r.type.lower().startswith(namespace.lower() + "/")
    ]
    if not inert:
        raise NotFound("resource provider", namespace)
    types = dict.fromkeys(r.type.split("/", 1)[1] for r in inert)
    return Provider(
        namespace=inert[0].type.split("/", 1)[0],
        resource_types=tuple((t, INERT_API_VERSIONS) for t in types),
        default_state="Registered",
    )


def get(session: Session, subscription: str, namespace: str) -> ProviderState:
    provider = _known(session, subscription, namespace)
    row = store.registration(session, subscription, provider.namespace)
    state = row.state if row is not None else provider.default_state
    return ProviderState(provider=provider, registration_state=state, locations=known_display_names())


def list_all(session: Session, subscription: str) -> list[ProviderState]:
    return [get(session, subscription, provider.namespace) for provider in PROVIDERS]


def register(session: Session, subscription: str, namespace: str, *, registered: bool) -> ProviderState:
    """Register (or unregister) the provider in the subscription; remembered, never required."""
    provider = _known(session, subscription, namespace)
    store.set_registration(session, subscription, provider.namespace, "Registered" if registered else "Unregistered")
    return get(session, subscription, namespace)
