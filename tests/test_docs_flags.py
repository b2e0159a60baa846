"""docs/flags.md's table names every flag the command line takes, and no other: a flag added, renamed or removed
without its row fails here."""

from __future__ import annotations

import re
from pathlib import Path

from scheduler_emulator.config import build_parser

FLAGS_PAGE = Path(__file__).resolve().parents[1] / "docs" / "flags.md"


def test_the_flags_table_names_exactly_the_command_lines_flags() -> None:
    parser = build_parser()
    accepted = {option for action in parser._actions for option in action.option_strings if option.startswith("--")}
    accepted -= {"--help"}
    rows = [line for line in FLAGS_PAGE.read_text().splitlines() if line.startswith("| `--")]
    documented = {flag for row in rows for flag in re.findall(r"--[a-z][a-z-]*", row.split("|")[1])}
    assert sorted(accepted - documented) == [], "flags with no row in docs/flags.md"
    assert sorted(documented - accepted) == [], "rows of docs/flags.md for flags the command line does not take"
