"""The garbage collector's settings for a long-lived process of the service (the server, its action process)."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


def tune_garbage_collector() -> None:
    """The garbage collector, tuned once the service is built (and in the action process once it has forked;
    also used by bench/store_cost.py)."""
    # Everything built so far (modules, the app, SQLAlchemy and pydantic machinery: hundreds of thousands of
    # objects) lives as long as the process: frozen out of the collector, a full collection no longer walks
    # it. Those passes stalled the event loop for 70-100 ms every few seconds under load (p99 lateness at
    # 1,000 fires/s: 69 ms before, 8 ms after; bench/README.md#the-garbage-collector).
    gc.collect()
    gc.freeze()
    # Young objects are collected every 100,000 allocations instead of 700: a fire allocates thousands, and
    # the default made collection a steady share of each fire's CPU (3,000/s on SQLite: 2,721 → 3,000
    # fires/s, p99 1,039 → 10 ms, CPU per fire 0.38 → 0.35 ms). What survives between collections is mostly
    # occurrences claimed ahead, which each collection walks: at 3,000 fires/s on PostgreSQL, young
    # collections took 0.20 s of a run's 7.3 s of CPU with 20,000, and 0.02 s with 100,000
    # (bench/README.md#the-garbage-collector).
    gc.set_threshold(100_000, 50, 100)


@contextmanager
def collector_paused() -> Iterator[None]:
    """No cyclic garbage collection inside the block, and what it built frozen out of the collector's sight at
    its end. Importing the service allocates ~200,000 objects that all live as long as the process: the
    collector's passes over them while they pile up cost a start ~0.2 s of CPU (~15 % of it), and the full
    collection the service runs once started (tune_garbage_collector above, which then freezes everything too)
    walked them all again for ~0.06 s; both found next to nothing (~2,000 objects of garbage, now kept)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if collecting:
            gc.enable()
