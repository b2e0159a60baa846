"""Where the suite runs: the repository root, whether it runs in CI, and ``missing`` (a component a test
needs is not there: fail in CI, skip locally)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
REPO = Path(__file__).resolve().parents[2]


def missing(message: str) -> None:
    """Fail in CI, skip locally."""
    if IN_CI:
        pytest.fail(message, pytrace=False)
    pytest.skip(message)
