"""CPU hogs beside a test: busy processes that keep every core saturated while a load runs, as a loaded machine
does. Each ends by itself after ``seconds`` and is killed when the block exits, whichever comes first."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def busy_cores(seconds: float, count: int | None = None) -> Iterator[None]:
    """Run ``count`` (default: one per core) busy loops for at most ``seconds`` while the block runs."""
    code = f"import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end:\n    pass\n"
    hogs = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(count or os.cpu_count() or 2)]
    try:
        yield
    finally:
        for hog in hogs:
            hog.kill()
        for hog in hogs:
            hog.wait(10)
