"""What an inert resource of another provider answers (``--arm-foreign-resources inert``,
docs/reference/front-door.md#other-providers-resources): its properties as the template sent them over a few values
Azure computes for well-known types (a web app's host names, a storage account's endpoints…), so templates that read
those with ``reference()`` deploy unchanged, and generated keys for ``listKeys()``."""

from __future__ import annotations

import base64
import hashlib
from typing import Any


def computed_properties(resource_type: str, name: str, site_hosts: dict[str, str]) -> dict[str, Any]:
    """The properties Azure would add to a resource of ``resource_type`` named ``name`` (its last segment).
    ``site_hosts``: operator-given host names for web apps (``--arm-site-host``), lower-case site name →
    host[:port], so a job calling the app reaches a local stand-in."""
    kind = resource_type.lower()
    short = name.split("/")[-1]
    computed: dict[str, Any] = {"provisioningState": "Succeeded"}
    if kind == "microsoft.web/sites":
        host = site_hosts.get(short.lower(), f"{short}.azurewebsites.net")
        computed.update(
            defaultHostName=host,
            hostNames=[host],
            enabledHostNames=[host],
            state="Running",
        )
    elif kind == "microsoft.storage/storageaccounts":
        computed["primaryEndpoints"] = {
            service: f"https://{short}.{service}.core.windows.net/" for service in ("blob", "queue", "table", "file")
        }
    elif kind == "microsoft.servicebus/namespaces":
        computed["serviceBusEndpoint"] = f"https://{short}.servicebus.windows.net:443/"
    return computed


def generated_keys(resource_id: str) -> dict[str, Any]:
    """listKeys()'s answer for an inert resource: two keys derived from its id (stable across calls; not a
    secret of anything, since nothing real stands behind an inert resource)."""
    primary, secondary = (
        base64.b64encode(hashlib.sha256(f"inert:{resource_id.lower()}:{n}".encode()).digest()).decode("ascii")
        for n in (1, 2)
    )
    short = resource_id.rstrip("/").split("/")[-1]
    return {
        "keys": [
            {"keyName": "key1", "value": primary, "permissions": "FULL"},
            {"keyName": "key2", "value": secondary, "permissions": "FULL"},
        ],
        "primaryKey": primary,
        "secondaryKey": secondary,
        "keyName": short,
        "primaryConnectionString": f"Endpoint=sb://{short}.local/;SharedAccessKeyName={short};SharedAccessKey={primary}",
        "secondaryConnectionString": (
            f"Endpoint=sb://{short}.local/;SharedAccessKeyName={short};SharedAccessKey={secondary}"
        ),
    }
