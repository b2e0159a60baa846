"""Which paths the classic surface claims (docs/reference/classic-api.md#addressing): imported by the pipeline, so
it imports nothing."""

from __future__ import annotations

# First segments that belong to other surfaces: never a classic subscription id.
_RESERVED = {"subscriptions", "_emulator", "metrics", "favicon.ico"}
_TOP = {"services", "resourceproviders", "entitleresource", "operations", "cloudservices", "certificates"}


def is_classic_path(path: str) -> bool:
    """Whether the classic surface claims this path (its first segment a subscription id, its second one of the
    classic top-level names)."""
    segments = path.strip("/").split("/")
    return len(segments) >= 2 and segments[0].lower() not in _RESERVED and segments[1].lower() in _TOP
