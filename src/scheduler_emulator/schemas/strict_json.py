"""The one reader of client JSON (docs/reference/arm-api.md#request-bodies): strict RFC 8259 and values every store can
hold.

Every surface reads request bodies through ``loads`` (content problems → ``InvalidContent``, answered 400
``InvalidRequestContent``) and then ``check_values`` (values no store can hold or no later read can
render → ``FieldError`` naming the field path, answered 400 ``BadRequest``). Nothing else parses client
JSON, so no stored value can make a later GET or list fail.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from scheduler_emulator.domain.errors import FieldError

MAX_DEPTH = 32
# The widest integer a store column or a later computation takes: a signed 64-bit integer. Fields with
# narrower ranges say so in their models; this catches the rest (e.g. an unknown member that is echoed).
MIN_INTEGER, MAX_INTEGER = -(2**63), 2**63 - 1
# C0 controls other than tab, LF and CR, and DEL: never meaningful in this API's values, and NUL is
# refused by PostgreSQL (text and jsonb). Tab/LF/CR stay allowed in free text (message bodies).
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")


class InvalidContent(ValueError):
    """A body that is not strict JSON (or nests too deep); the message says what and where."""


def _no_constant(name: str) -> Any:
    raise InvalidContent(f"'{name}' is not valid JSON (RFC 8259 has no NaN or Infinity)")


def _finite_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):  # 1e400: a valid JSON number no double can hold
        raise InvalidContent(f"the number {text[:40]} is out of range")
    return value


def loads(raw: bytes) -> Any:
    """``raw`` parsed as strict JSON: UTF-8, no NaN/Infinity, no lone surrogates, depth ≤ MAX_DEPTH."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidContent("the body is not UTF-8 text") from None
    depth = _nesting(text)
    if depth > MAX_DEPTH:
        raise InvalidContent(f"the JSON nests {depth} levels deep; at most {MAX_DEPTH} are allowed")
    try:
        value = json.loads(text, parse_constant=_no_constant, parse_float=_finite_float)
    except json.JSONDecodeError as exc:
        raise InvalidContent(f"{exc.msg} at line {exc.lineno}, column {exc.colno}") from None
    except InvalidContent:
        raise
    except (ValueError, RecursionError) as exc:  # e.g. an integer longer than Python's digit limit
        raise InvalidContent(str(exc).splitlines()[0][:200]) from None
    _no_surrogates(value)
    return value


def _nesting(text: str) -> int:
    """The deepest bracket nesting outside strings, counted before parsing (the parser recurses)."""
    # Strings are removed first so that brackets inside them do not count.
    stripped = re.sub(r'"(?:[^"\\]|\\.)*"', '""', text)
    depth = deepest = 0
    for char in stripped:
        if char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def _no_surrogates(value: Any) -> None:
    # A lone "\ud800" parses to a str that cannot be encoded as UTF-8: storing it breaks every later read.
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            if _SURROGATE.search(node):
                raise InvalidContent("a string holds a lone UTF-16 surrogate (e.g. \\ud800)")
        elif isinstance(node, dict):
            stack.extend(node.keys())
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)


def check_values(value: Any, path: str = "") -> None:
    """FieldError for the first value no store can hold: a control character (NUL included) in a string
    or member name, or an integer outside 64 bits. Tab, LF and CR are allowed in strings."""
    stack: list[tuple[str, Any]] = [(path, value)]
    while stack:
        where, node = stack.pop()
        if isinstance(node, str):
            if _CONTROL.search(node):
                raise FieldError(where or "body", "contains a control character")
        elif isinstance(node, bool) or node is None or isinstance(node, float):
            continue
        elif isinstance(node, int):
            if not MIN_INTEGER <= node <= MAX_INTEGER:
                raise FieldError(where or "body", "is outside the range of a 64-bit integer")
        elif isinstance(node, dict):
            for key, item in node.items():
                child = f"{where}.{key}" if where else key
                if _CONTROL.search(key) or "\t" in key or "\n" in key or "\r" in key:
                    raise FieldError(where or "body", f"has a member name with a control character ({key!r})")
                stack.append((child, item))
        elif isinstance(node, list):
            stack.extend((f"{where}[{index}]", item) for index, item in enumerate(node))


def check_line(value: str, path: str) -> None:
    """FieldError when a single-line value (a name, location, URI, header, tag) holds any control
    character, tab, LF and CR included."""
    if _CONTROL.search(value) or any(c in value for c in "\t\n\r"):
        raise FieldError(path, "contains a control character (line breaks and tabs included)")
