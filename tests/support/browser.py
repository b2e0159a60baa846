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


PHONE = {"width": 390, "height": 844}

# What is cut off on the page as shown: the page scrolling sideways, a table past the viewport's right edge or
# hidden in a sideways scroll of its box (a phone shows no scroll bar: the rest is simply not seen), a cell's
# content past its cell. Hidden cells (display: none) are not looked at.
_CUT_OFF = """() => {
  const width = document.documentElement.clientWidth;
  const found = [];
  const page = document.documentElement.scrollWidth;
  if (page > width) found.push(`the page is ${page} px wide in a ${width} px viewport`);
  document.querySelectorAll('table').forEach((table, index) => {
    const name = (table.closest('[id]') || {}).id || `table ${index + 1}`;
    const right = table.getBoundingClientRect().right;
    if (right > width + 0.5) found.push(`${name}: the table ends at ${Math.round(right)} px`);
    for (let box = table.parentElement; box; box = box.parentElement) {
      if (getComputedStyle(box).overflowX !== 'visible' && box.scrollWidth > box.clientWidth + 1) {
        found.push(`${name}: ${box.scrollWidth - box.clientWidth} px of it hidden in a sideways scroll`);
      }
    }
    for (const cell of table.querySelectorAll('tbody td')) {
      if (!cell.getClientRects().length) continue;
      if (cell.scrollWidth > cell.clientWidth + 1 || cell.getBoundingClientRect().right > width + 0.5) {
        found.push(`${name}: the cell ${JSON.stringify(cell.textContent.slice(0, 40))} overflows`);
      }
    }
  });
  return found;
}"""


def assert_nothing_cut_off(page: Any) -> None:
    """At the page's viewport as it is: the page does not scroll sideways, and every table (each cell of it)
    is within the viewport and shown whole, not partly hidden in a sideways scroll of its box."""
    found = page.evaluate(_CUT_OFF)
    assert not found, f"cut off at {page.viewport_size['width']} px: " + "; ".join(found)
