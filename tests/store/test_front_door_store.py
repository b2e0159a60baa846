"""The front door's service-level reads the dashboard uses (service.resource_groups.every_group,
service.deployments.recent/operations), on both stores after the real migrations: explicit and implicit groups
of every subscription, and a group's deletion taking everything in it."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from cryptography.fernet import Fernet
from support.databases import fresh_database

from scheduler_emulator.service import collections, deployments, resource_groups
from scheduler_emulator.service.deployments import DeploymentRef, Policy
from scheduler_emulator.service.refs import CollectionRef
from scheduler_emulator.store.database import Database
from scheduler_emulator.store.secrets import SecretBox

NOW = datetime(2026, 1, 1, tzinfo=UTC)
TEMPLATE = {
    "resources": [
        {"type": "Microsoft.Scheduler/jobCollections", "name": "jc2", "location": "westus", "apiVersion": "2016-03-01"}
    ]
}


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Database]:
    with fresh_database(request.param, tmp_path_factory) as url:
        database = Database(url, SecretBox(Fernet.generate_key()))
        database.migrate()
        try:
            yield database
        finally:
            database.dispose()


def test_groups_deployments_and_a_group_deletion(database: Database) -> None:
    ref = DeploymentRef(subscription_id="sub-a", resource_group="Explicit", name="dep")
    with database.session() as session:
        resource_groups.put(session, "sub-a", "Explicit", {"location": "West Europe", "tags": {"k": "v"}}, moment=NOW)
        collections.put(
            session,
            CollectionRef(subscription_id="sub-b", resource_group="Implicit", name="jc1"),
            {"location": "eastus"},
            moment=NOW,
            floor=timedelta(seconds=15),
        )
        planned, mode = deployments.preflight(
            session,
            ref,
            {"properties": {"mode": "Incremental", "template": TEMPLATE}},
            policy=Policy(foreign="refuse", site_hosts={}),
            moment=NOW,
        )
        deployments.begin(session, ref, planned, mode=mode, correlation_id="c1", moment=NOW)
    with database.session() as session:
        groups = {(g.subscription_id, g.name): g for g in resource_groups.every_group(session)}
        assert groups[("sub-a", "Explicit")].location == "westeurope" and groups[("sub-a", "Explicit")].explicit
        assert groups[("sub-b", "Implicit")].location == "eastus" and not groups[("sub-b", "Implicit")].explicit
        recent = deployments.recent(session)
        assert [(d.name, d.state, d.mode) for d in recent] == [("dep", "Accepted", "Incremental")]
        assert deployments.operations(session, ref) == []
        resource_groups.delete(session, "sub-b", "implicit")  # names match in any case
        resource_groups.delete(session, "sub-a", "explicit")
    with database.session() as session:
        assert resource_groups.every_group(session) == []
        assert deployments.recent(session) == []
