"""Bounded polling, and names no other test uses."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(check: Callable[[], T], timeout: float, what: str | Callable[[], str]) -> T:
    """Poll ``check`` until it returns something truthy and return that; AssertionError after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() >= deadline:
            described = what() if callable(what) else what
            raise AssertionError(f"timed out after {timeout:.1f} s waiting for {described}")
        time.sleep(0.1)


def unique(prefix: str) -> str:
    """A name no other test uses."""
    return f"{prefix}{uuid.uuid4().hex[:10]}"
