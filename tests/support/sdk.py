"""The official Python SDK (azure-mgmt-scheduler) pointed at a started emulator."""

from __future__ import annotations

from typing import Any

from azure.mgmt.scheduler import SchedulerManagementClient

from support.server import ServerProcess


def scheduler_sdk(server: ServerProcess, credential: Any, subscription_id: str) -> SchedulerManagementClient:
    """A client of ``server`` (trusting its self-signed certificate) with retries off, so that an error
    is seen as the emulator sent it."""
    return SchedulerManagementClient(
        credential=credential,
        subscription_id=subscription_id,
        base_url=server.url,
        connection_verify=str(server.cert_path),
        retry_total=0,
    )


def resource_sdk(server: ServerProcess, credential: Any, subscription_id: str) -> Any:
    """azure-mgmt-resource's ResourceManagementClient of ``server`` (retries off; pollers honour the server's
    Retry-After)."""
    from azure.mgmt.resource import ResourceManagementClient

    return ResourceManagementClient(
        credential=credential,
        subscription_id=subscription_id,
        base_url=server.url,
        connection_verify=str(server.cert_path),
        retry_total=0,
    )
