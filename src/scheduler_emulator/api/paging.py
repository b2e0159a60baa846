"""``$top``, ``$skip``, ``$filter`` and absolute ``nextLink``s, shared by every list operation."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from fastapi import Request

from scheduler_emulator.api import errors

MAX_TOP = 100
_INTEGER = re.compile(r"^\s*[+-]?[0-9]{1,20}\s*$")
MAX_SKIP = 2**31 - 1  # beyond any store's row count; bigger values overflow SQL OFFSET
# Quoted or bare: the .NET SDK sent "state eq Disabled" and the service answered it (recorded;
# docs/reference/arm-api.md#lists-and-paging).
_FILTER = re.compile(r"^\s*(?P<field>\w+)\s+eq\s+(?:'(?P<quoted>[^']*)'|(?P<bare>[A-Za-z]+))\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class Page:
    skip: int
    top: int


def page_of(request: Request) -> Page:
    """The requested page: ``$top`` 1..100 (default 100) items from ``$skip`` (default 0)."""
    params = request.query_params
    return Page(
        skip=_integer(params.get("$skip"), "$skip", 0, MAX_SKIP, 0),
        top=_integer(params.get("$top"), "$top", 1, MAX_TOP, MAX_TOP),
    )


def _integer(raw: str | None, name: str, low: int, high: int | None, default: int) -> int:
    if raw is None or raw == "":
        return default
    if not _INTEGER.match(raw):
        raise errors.invalid_field(name, f"'{raw[:40]}' is not an integer")
    value = int(raw)
    if value < low or (high is not None and value > high):
        bounds = f"{low}..{high}" if high is not None else f"at least {low}"
        raise errors.invalid_field(name, f"{value} is outside {bounds}")
    return value


def equality_filter(request: Request, field: str, values: tuple[str, ...]) -> str | None:
    """The canonical value of a ``$filter=<field> eq '<value>'`` (or bare ``<value>``) query, or None without one."""
    raw = request.query_params.get("$filter")
    if raw is None or raw.strip() == "":
        return None
    match = _FILTER.match(raw)
    if not match or match["field"].lower() != field.lower():
        raise errors.invalid_field("$filter", f"'{raw}' is not supported; use {field} eq '<{'|'.join(values)}>'")
    sent = match["quoted"] if match["quoted"] is not None else match["bare"]
    for value in values:
        if value.lower() == sent.lower():
            return value
    raise errors.invalid_field("$filter", f"'{sent}' is not one of: {', '.join(values)}")


def list_body(request: Request, items: list[Any], page: Page, has_more: bool) -> dict[str, Any]:
    """``{"value": [...], "nextLink"?: "<absolute URL of the next page>"}``."""
    body: dict[str, Any] = {"value": items}
    if has_more:
        url = request.url.include_query_params(**{"$skip": str(page.skip + page.top), "$top": str(page.top)})
        body["nextLink"] = str(url)
    return body
