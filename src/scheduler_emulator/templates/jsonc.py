"""The deployment body as the Azure CLI sends it (docs/reference/front-door.md#the-body-the-azure-cli-sends): JSON in
which the template file is embedded as written, so ``//`` and ``/* */`` comments may appear and the ``template`` key
itself is unquoted.

``to_strict_json`` removes the comments and quotes bare member names; everything else is left to the strict
reader (schemas.strict_json), so nothing else loosens."""

from __future__ import annotations

import re

_BARE_NAME = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")


class UnclosedComment(ValueError):
    """A ``/*`` comment that never ends."""


def to_strict_json(text: str) -> str:
    """``text`` without comments and with bare member names (``template:``) quoted."""
    out: list[str] = []
    i, length = 0, len(text)
    while i < length:
        char = text[i]
        if char == '"':
            end = i + 1
            while end < length and text[end] != '"':
                end += 2 if text[end] == "\\" else 1
            out.append(text[i : end + 1])
            i = end + 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = length if end < 0 else end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:
                raise UnclosedComment("a /* comment is not closed")
            out.append(" ")
            i = end + 2
        elif char.isalpha() or char in "_$":
            match = _BARE_NAME.match(text, i)
            assert match is not None
            word = match.group(0)
            after = match.end()
            while after < length and text[after] in " \t\r\n":
                after += 1
            is_name = after < length and text[after] == ":" and word not in ("true", "false", "null")
            out.append(f'"{word}"' if is_name else word)
            i = match.end()
        else:
            out.append(char)
            i += 1
    return "".join(out)
