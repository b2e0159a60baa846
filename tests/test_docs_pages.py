"""The README and the pages under docs/ as documents: docs/flags.md's table names every flag the command line takes,
and no other (a flag added, renamed or removed without its row fails here); every relative link names a file, and
a heading of it when it names one. The pages' examples are run by tests/e2e/test_docs_examples.py."""

from __future__ import annotations

import re
from pathlib import Path

from scheduler_emulator.config import build_parser

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_the_flags_table_names_exactly_the_command_lines_flags() -> None:
    parser = build_parser()
    accepted = {option for action in parser._actions for option in action.option_strings if option.startswith("--")}
    accepted -= {"--help"}
    rows = [line for line in (REPO / "docs" / "flags.md").read_text().splitlines() if line.startswith("| `--")]
    documented = {flag for row in rows for flag in re.findall(r"--[a-z][a-z-]*", row.split("|")[1])}
    assert sorted(accepted - documented) == [], "flags with no row in docs/flags.md"
    assert sorted(documented - accepted) == [], "rows of docs/flags.md for flags the command line does not take"


def anchors(page: Path) -> set[str]:
    """The anchors GitHub gives the page's headings."""
    headings = [line.lstrip("#").strip() for line in page.read_text().splitlines() if line.startswith("#")]
    return {re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-") for heading in headings}


def test_every_relative_link_names_a_file_and_heading() -> None:
    broken = []
    for page in PAGES:
        for target in LINK.findall(page.read_text()):
            if re.match(r"[a-z]+:", target):
                continue  # http(s), mailto: not checked here
            path, _, anchor = target.partition("#")
            linked = (page.parent / path).resolve() if path else page
            if not linked.exists():
                broken.append(f"{page.relative_to(REPO)}: {target} (no such file)")
            elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
                broken.append(f"{page.relative_to(REPO)}: {target} (no such heading)")
    assert broken == []
