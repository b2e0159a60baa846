"""``scheduler-emulator``: parse the flags, then run the service (serving.py)."""

from __future__ import annotations

import gc
import sys
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """No cyclic garbage collection inside the block. Importing the service allocates hundreds of thousands of
    objects that all live as long as the process, and the collector's passes over them while they pile up cost
    a start ~0.2 s of CPU (~15 % of it) and find next to nothing; the service collects once, then freezes what
    it built (app.tune_garbage_collector)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


def main(argv: list[str] | None = None) -> None:
    with collector_paused():
        from scheduler_emulator.config import ConfigError, settings_from_args
        from scheduler_emulator.logs import say
        from scheduler_emulator.serving import serve

    try:
        settings = settings_from_args(argv)
    except ConfigError as exc:
        say(f"scheduler-emulator: error: {exc}", sys.stderr)
        raise SystemExit(2) from None
    serve(settings)
