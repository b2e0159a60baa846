"""The fenced blocks of the README and of the pages under docs/, as a reader sees them: each with its page, line,
info string and text, and the directive in the HTML comment just before it, if any (invisible when rendered):

- ``<!-- illustrative: why -->``: shown, not run (it needs Docker, or is the test suite itself);
- ``<!-- serves: PORT -->``: a long-running command (the emulator, a target) the reader leaves running in a
  terminal of its own; the examples after it on the page expect it to answer on PORT.

A block's own first comment lines say what a reader needs for it, and the runner reads them the same way:
``# pip install X==V`` / ``// npm install X@V`` (the packages it needs), ``save as FILE, then run: COMMAND``
(how to run it; by default ``python3 example.py`` / ``node example.js``)."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from support.environment import REPO

RUNNABLE = ("sh", "python", "js")  # what the runner runs; any other info string must be data or illustrative
DATA = ("json", "text", "yaml")  # shown for reading (a body, an answer, a CI job: tests/test_compose.py), never run

_FENCE = re.compile(r"^```(\S*)\s*$")
_DIRECTIVE = re.compile(r"^<!--\s*(illustrative|serves):\s*(.+?)\s*-->$")
_SAVE_AND_RUN = re.compile(r"^(?:#|//) save as (\S+), then run: (.+)$", re.MULTILINE)
_INSTALL = re.compile(r"^(?:#|//) (pip|npm) install (.+)$", re.MULTILINE)


@dataclass(frozen=True)
class Block:
    """One fenced block of a page."""

    page: Path  # relative to the repository
    line: int  # of the opening fence, 1-based
    language: str
    text: str
    illustrative: str | None = None  # the reason, when marked so
    serves: int | None = None  # the port a long-running block answers on

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"

    @property
    def kind(self) -> str:
        """``illustrative``, ``data``, ``run``, or ``unknown`` (a block nobody can run: the test fails on it)."""
        if self.illustrative is not None:
            return "illustrative"
        if self.language in DATA:
            return "data"
        return "run" if self.language in RUNNABLE else "unknown"

    def installs(self, tool: str) -> list[str]:
        """The package specs the block's ``# pip install`` (or ``// npm install``) comment names."""
        return [spec for found, specs in _INSTALL.findall(self.text) if found == tool for spec in specs.split()]

    def file_and_command(self) -> tuple[str, str]:
        """Where a program block is saved and the command that runs it, as its first comments say."""
        found = _SAVE_AND_RUN.search(self.text)
        if found:
            return found.group(1), found.group(2)
        name = "example.py" if self.language == "python" else "example.js"
        return name, f"{'python3' if self.language == 'python' else 'node'} {name}"


def pages() -> list[Path]:
    """The README and every page under docs/ (not docs/reference/, whose examples are answers, not commands)."""
    return [Path("README.md"), *sorted(p.relative_to(REPO) for p in (REPO / "docs").glob("*.md"))]


def blocks(page: Path) -> list[Block]:
    """The fenced blocks of ``page`` in order; ValueError on a fence left open."""
    lines = (REPO / page).read_text().splitlines()
    found: list[Block] = []
    index = 0
    while index < len(lines):
        fence = _FENCE.match(lines[index])
        if not fence:
            index += 1
            continue
        start = index
        index += 1
        while index < len(lines) and lines[index].rstrip() != "```":
            index += 1
        if index == len(lines):
            raise ValueError(f"{page}:{start + 1}: a fenced block is never closed")
        before = next((line.strip() for line in reversed(lines[:start]) if line.strip()), "")
        directive = _DIRECTIVE.match(before)
        name, value = directive.groups() if directive else ("", "")
        found.append(
            Block(
                page=page,
                line=start + 1,
                language=fence.group(1),
                text="\n".join(lines[start + 1 : index]) + "\n",
                illustrative=value if name == "illustrative" else None,
                serves=int(value) if name == "serves" else None,
            )
        )
        index += 1
    return found


def summary() -> str:
    """How many blocks the pages hold, run, illustrative (each with its reason) and data."""
    found = [block for page in pages() for block in blocks(page)]
    counts = Counter(block.kind for block in found)
    lines = [
        f"{len(found)} fenced blocks on {len(pages())} pages: {counts['run']} run, "
        f"{counts['illustrative']} illustrative, {counts['data']} data"
    ]
    lines += [f"  illustrative: {b.where}: {b.illustrative}" for b in found if b.illustrative is not None]
    return "\n".join(lines)
