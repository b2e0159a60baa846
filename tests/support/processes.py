"""What /proc says about the emulator's processes: their children, whether one has ended, whether the kernel is
ending it."""

from __future__ import annotations

import os
import signal
from pathlib import Path


def children_of(pid: int) -> list[int]:
    return [
        int(child)
        for task in os.listdir(f"/proc/{pid}/task")
        for child in Path(f"/proc/{pid}/task/{task}/children").read_text().split()
    ]


def process_ended(pid: int) -> bool:
    """Gone, or a zombie waiting for whoever adopted it."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state in ("Z", "X")


def ended_or_killed(pid: int) -> bool:
    """Ended, or SIGKILL is pending for it: it cannot run another instruction of its own."""
    if process_ended(pid):
        return True
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return True
    bit = 1 << (signal.SIGKILL - 1)
    pending = (int(line.split()[1], 16) for line in status.splitlines() if line.startswith(("SigPnd:", "ShdPnd:")))
    return any(mask & bit for mask in pending)
