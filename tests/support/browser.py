"""Debian's Chromium driven by Playwright for the dashboard tests (no browser download)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from support.environment import missing


def chromium_path() -> str:
    for candidate in (os.environ.get("CHROMIUM"), shutil.which("chromium"), "/usr/bin/chromium"):
        if candidate and Path(candidate).exists():
            return candidate
    missing("The dashboard tests need Debian's chromium (apt-get install chromium; make test installs it as root).")
    raise AssertionError("unreachable")


@contextmanager
def launched_chromium() -> Iterator[Any]:
    """One headless Chromium, closed on exit."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:  # pragma: no cover - the test extras install it
        missing("The dashboard tests need the Python package playwright (in the test extras).")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium_path(), args=["--no-sandbox"], headless=True)
        try:
            yield browser
        finally:
            browser.close()
