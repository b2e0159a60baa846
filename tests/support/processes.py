"""What /proc says about the emulator's processes: their children, whether one has ended, whether the kernel is
ending it."""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path


def children_of(pid: int) -> list[int]:
    return [
        int(child)
        for task in os.listdir(f"/proc/{pid}/task")
        for child in Path(f"/proc/{pid}/task/{task}/children").read_text().split()
    ]


def family_of(pid: int) -> list[int]:
    """The process and every process under it (the emulator's dispatcher child, say)."""
    return [pid, *(member for child in children_of(pid) for member in family_of(child))]


def crash(pid: int) -> list[int]:
    """kill -9 of the process and of every process under it, the youngest first, as a machine's crash or an
    out-of-memory kill of a container would end them (the emulator's dispatcher child, left alone, would stop by
    itself once its parent is gone, handing its occurrences back). The pids killed."""
    family = family_of(pid)
    for member in reversed(family):
        with contextlib.suppress(ProcessLookupError):
            os.kill(member, signal.SIGKILL)
    return family


def process_ended(pid: int) -> bool:
    """Gone, or a zombie waiting for whoever adopted it."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state in ("Z", "X")


PF_EXITING = 0x4  # a task's flag (/proc/PID/stat, field 9) from the moment it starts to exit


def ended_or_killed(pid: int) -> bool:
    """Gone, or being killed by SIGKILL: pending for one of its threads, or taken by one that is now exiting
    with it (its exit code, /proc/PID/stat field 52, names the signal; a process ending by itself shows its own
    status there). Either way it cannot run another instruction of its own."""
    bit = 1 << (signal.SIGKILL - 1)
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return True
    for task in tasks:
        try:
            status = Path(f"/proc/{pid}/task/{task}/status").read_text()
            fields = Path(f"/proc/{pid}/task/{task}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # that thread has ended
        pending = (int(line.split()[1], 16) for line in status.splitlines() if line.startswith(("SigPnd:", "ShdPnd:")))
        exiting = int(fields[6]) & PF_EXITING or fields[0] in ("Z", "X")
        if any(mask & bit for mask in pending) or (exiting and int(fields[49]) & 0x7F == signal.SIGKILL):
            return True
    return not os.path.exists(f"/proc/{pid}")


def socket_owner(local_port: int, candidates: list[int]) -> int | None:
    """Which of ``candidates`` holds the TCP socket bound to 127.0.0.1:``local_port`` (/proc/net/tcp gives its
    inode, /proc/PID/fd the process holding that inode)."""
    inodes = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if int(fields[1].split(":")[1], 16) == local_port:
            inodes.add(fields[9])
    for pid in candidates:
        for descriptor in os.listdir(f"/proc/{pid}/fd"):
            try:
                link = os.readlink(f"/proc/{pid}/fd/{descriptor}")
            except OSError:
                continue
            if link.startswith("socket:[") and link[8:-1] in inodes:
                return pid
    return None
