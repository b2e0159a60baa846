"""The classic surface's wire: XML read with defusedxml (no DTDs, entities or external references),
case-insensitively; XML written with exact element names; errors in the shape each route's clients parse;
``x-ms-version`` and ``api-version`` rules (docs/reference/classic-api.md#versions)."""

from __future__ import annotations

import base64
import binascii
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from typing import Any
from xml.sax.saxutils import escape

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import fromstring
from fastapi import Request
from fastapi.responses import JSONResponse, Response

from scheduler_emulator.api import errors

NS = "http://schemas.microsoft.com/windowsazure"
XI = "http://www.w3.org/2001/XMLSchema-instance"
XML_TYPE = "application/xml; charset=utf-8"
API_VERSION = "2014-04-01"
# The api-version of the Scheduler's preview (late 2013 to early 2014), still in blog-era samples: a February
# 2014 PowerShell walk-through read a collection, listed, read and patched jobs through
# management.core.windows.net with it (x-ms-version 2013-08-01) and got answers of the 2014-04-01 shapes. It is
# answered here as 2014-04-01, the only wire this surface has. No other preview version is on the public record.
PREVIEW_API_VERSIONS = ("2013-10-31_Preview",)
ACCEPTED_API_VERSIONS = frozenset(version.lower() for version in (API_VERSION, *PREVIEW_API_VERSIONS))
OLDEST_VERSION = "2013-03-01"  # what the npm clients send on every request
MAX_DEPTH = 8  # the deepest classic request body (Resource/IntrinsicSettings/Quota/MaxRecurrence/...) has 4
_DATE = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$")
_FILTER = re.compile(r"^\s*(\w+)\s+eq\s+'?([A-Za-z]+)'?\s*$", re.IGNORECASE)


class ClassicError(Exception):
    """An error response in the classic shape: XML ``<Error><Code><Message>`` or JSON ``{"error": ...}``."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message

    def response(self, xml: bool) -> Response:
        if xml:
            body = document("Error", element("Code", self.code) + element("Message", self.message))
            return Response(body, status_code=self.status, media_type=XML_TYPE)
        return JSONResponse({"error": {"code": self.code, "message": self.message}}, status_code=self.status)


# ARM codes → the RDFE names the classic clients know (docs/reference/classic-api.md#errors).
_CODES = {409: "ConflictError", 404: "ResourceNotFound", 412: "PreconditionFailed"}


def from_arm(error: errors.ArmError) -> ClassicError:
    """The same failure in classic terms: same status and message, RDFE's code."""
    code = _CODES.get(error.status) or ("BadRequest" if error.status == 400 else error.code)
    return ClassicError(error.status, code, error.message)


def bad_request(message: str) -> ClassicError:
    return ClassicError(400, "BadRequest", message)


def not_found(message: str) -> ClassicError:
    return ClassicError(404, "ResourceNotFound", message)


def check_versions(request: Request) -> None:
    """``x-ms-version`` required, any ``YYYY-MM-DD`` from 2013-03-01 on; ``api-version`` optional, 2014-04-01 or
    the preview's 2013-10-31_Preview (any case), which is answered as 2014-04-01."""
    version = request.headers.get("x-ms-version", "").strip()
    if not _DATE.match(version) or version < OLDEST_VERSION:
        shown = version[:40].encode("unicode_escape").decode("ascii")
        raise ClassicError(
            400,
            "MissingOrIncorrectVersionHeader",
            f"The x-ms-version header is missing or invalid ('{shown}'); send a date from {OLDEST_VERSION} on.",
        )
    api_version = request.query_params.get("api-version")
    if api_version is not None and api_version.lower() not in ACCEPTED_API_VERSIONS:
        raise bad_request(
            f"The api-version '{api_version[:40]}' is invalid; the classic API is {API_VERSION} "
            f"(or the preview's {', '.join(PREVIEW_API_VERSIONS)})."
        )


def equality_filter(request: Request, fields: Iterable[str], values: Iterable[str]) -> str | None:
    """``$filter=field eq Value`` (quoted or not, any case) → the canonical value; None without a filter."""
    raw = request.query_params.get("$filter")
    if raw is None:
        return None
    match = _FILTER.match(raw)
    canonical = {value.lower(): value for value in values}
    if match is None or match.group(1).lower() not in fields or match.group(2).lower() not in canonical:
        raise bad_request(
            f"The $filter '{raw[:80]}' is not supported; use '{next(iter(fields))} eq X' with X one of "
            f"{', '.join(canonical.values())}."
        )
    return canonical[match.group(2).lower()]


# --- reading XML ---------------------------------------------------------------------------------------


class Node:
    """An XML element read case-insensitively and namespace-agnostically."""

    def __init__(self, element: ET.Element) -> None:
        self.element = element

    @property
    def name(self) -> str:
        return _local(self.element.tag)

    def child(self, name: str) -> Node | None:
        for item in self.element:
            if _local(item.tag).lower() == name.lower():
                return Node(item)
        return None

    def text(self, name: str, path: str, limit: int) -> str | None:
        """The text of child ``name`` (None when absent); 400 naming ``path`` when longer than ``limit``."""
        found = self.child(name)
        if found is None:
            return None
        value = (found.element.text or "").strip()
        if len(value) > limit:
            raise bad_request(f"The value of '{path}' is {len(value)} characters long; at most {limit} are allowed.")
        return value

    def integer(self, name: str, path: str) -> int | None:
        value = self.text(name, path, 20)
        if value is None or value == "":
            return None
        if not re.fullmatch(r"[0-9]{1,10}", value):
            raise bad_request(f"The value of '{path}' is invalid: '{value}' is not a whole number.")
        return int(value)


def parse_xml(raw: bytes, root: str) -> Node:
    """The body as XML whose root element is ``root`` (any case); 400 InvalidXmlRequest otherwise. DTDs,
    entity declarations and external references are refused, so a body cannot expand or reach files."""
    if not raw.strip():
        raise ClassicError(400, "InvalidXmlRequest", f"The request body is empty; a <{root}> XML document is expected.")
    try:
        element = fromstring(raw, forbid_dtd=True, forbid_entities=True, forbid_external=True)
    except DefusedXmlException as exc:
        raise ClassicError(400, "InvalidXmlRequest", f"The XML is refused: {type(exc).__name__}.") from None
    except (ET.ParseError, ValueError) as exc:
        raise ClassicError(400, "InvalidXmlRequest", f"The request body is not well-formed XML: {exc}") from None
    if _depth(element) > MAX_DEPTH:
        raise ClassicError(400, "InvalidXmlRequest", f"The XML is nested deeper than {MAX_DEPTH} levels.")
    if _local(element.tag).lower() != root.lower():
        raise ClassicError(
            400, "InvalidXmlRequest", f"The root element is <{_local(element.tag)[:40]}>; <{root}> is expected."
        )
    return Node(element)


def _depth(element: ET.Element) -> int:
    deepest, level = 0, [(element, 1)]
    while level:  # bounded: the parsed tree is finite and each element is visited once
        node, depth = level.pop()
        deepest = max(deepest, depth)
        if depth > MAX_DEPTH:
            return depth
        level.extend((child, depth + 1) for child in node)
    return deepest


def _local(tag: Any) -> str:
    return str(tag).rsplit("}", 1)[-1]


def decode_label(value: str, path: str, limit: int) -> str:
    """A base64 label as sent; 400 when it is not base64 or decodes to more than ``limit`` characters."""
    try:
        decoded = base64.b64decode(value, validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        raise bad_request(f"The value of '{path}' is invalid: it must be base64-encoded UTF-8 text.") from None
    if len(decoded) > limit:
        raise bad_request(f"The value of '{path}' is {len(decoded)} characters long; at most {limit} are allowed.")
    return value


# --- writing XML ---------------------------------------------------------------------------------------


def element(name: str, value: object = None) -> str:
    """``<name>value</name>`` with the value escaped (``<name/>`` for None), or nested XML when ``value``
    is an ``Xml`` fragment."""
    if value is None:
        return f"<{name}/>"
    inner = value.text if isinstance(value, Xml) else escape(str(value))
    return f"<{name}>{inner}</{name}>"


class Xml:
    """A fragment of XML already built by ``element`` (not to be escaped again)."""

    def __init__(self, *parts: str) -> None:
        self.text = "".join(parts)


def document(root: str, inner: str) -> str:
    return f'<{root} xmlns="{NS}" xmlns:i="{XI}">{inner}</{root}>'


def xml_response(root: str, inner: str, status: int = 200) -> Response:
    return Response(document(root, inner), status_code=status, media_type=XML_TYPE)
