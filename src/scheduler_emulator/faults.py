"""Named pause points for fault tests: a process started with ``SCHEDULER_TEST_PAUSE_AT=NAME[,NAME...]`` stops
itself (SIGSTOP) the first time it reaches each named point, after printing ``test pause at NAME (pid N)``, so
that a test can freeze it at an exact moment — inside a claim's transaction, just after a claim — instead of
racing a ``kill -STOP`` against it; the test resumes it with SIGCONT. Unset (always, outside tests), a point
costs two truth tests. The points:

- ``claim-locked``: a dispatcher's claim transaction has selected and locked its due jobs, not committed yet;
- ``claimed``: a dispatcher's claim is committed and none of its occurrences has fired yet;
- ``dispatcher-process-start``: the dispatcher role's child process (dispatcher/role.py) has started, before it
  builds its dispatcher (each child started again reaches it too: it has the same environment).
"""

from __future__ import annotations

import os
import signal
import threading

from scheduler_emulator.logs import say

_ARMED: set[str] | None = None  # read from the environment at the first point reached, not at import (the test
_lock = threading.Lock()  # kit's fork server imports this module once for processes of other environments)


def pause_point(name: str) -> None:
    """Stop this process here, once, when a test armed ``name``; otherwise do nothing."""
    global _ARMED
    if _ARMED is None:
        _ARMED = {part.strip() for part in os.environ.get("SCHEDULER_TEST_PAUSE_AT", "").split(",") if part.strip()}
    if not _ARMED:
        return
    with _lock:
        if name not in _ARMED:
            return
        _ARMED.discard(name)
    say(f"test pause at {name} (pid {os.getpid()})")
    stop = getattr(signal, "SIGSTOP", None)
    if stop is not None:
        os.kill(os.getpid(), stop)
