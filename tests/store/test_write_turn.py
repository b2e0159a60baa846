"""One writer at a time on a SQLite file among processes (store.database.WriteTurn): the service's process and its
dispatcher child (dispatcher/child.py) each have a Database over the same file. Seen from outside: two processes
that each read a counter and write it back, hundreds of times at once, lose no increment and meet no "database is
locked"; a process that holds its turn (frozen, say) makes another's write fail with "database is locked" after
the patience, not hang; a holder that is killed leaves the file writable at once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.exc import OperationalError
from support.databases import fresh_database

from scheduler_emulator.store.database import Database, WriteTurn
from scheduler_emulator.store.models import EmulatorSettingRow

ROUNDS = 300
BOUND = 120.0  # seconds: only a process that is stuck takes this long

INCREMENT = textwrap.dedent(
    """
    import sys
    from sqlalchemy import select, update
    from scheduler_emulator.store.database import Database
    from scheduler_emulator.store.models import EmulatorSettingRow as Row

    db = Database(sys.argv[1])
    sys.stdin.readline()  # both processes begin together
    for _ in range(int(sys.argv[2])):
        with db.session() as session:  # read, then write what was read plus one
            value = int(session.scalar(select(Row.value).where(Row.name == "counter")))
            session.execute(update(Row).where(Row.name == "counter").values(value=str(value + 1)))
    db.dispose()
    """
)

HOLD = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from scheduler_emulator.store.database import WriteTurn

    with WriteTurn(Path(sys.argv[1])):
        print("held", flush=True)
        sys.stdin.readline()
    """
)


@pytest.fixture
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with fresh_database("sqlite", tmp_path_factory) as url:
        db = Database(url)
        db.migrate()
        with db.session() as session:
            session.add(EmulatorSettingRow(name="counter", value="0"))
        db.dispose()
        yield url


def python(code: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", code, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_two_processes_writing_one_file_take_turns_and_lose_nothing(url: str) -> None:
    workers = [python(INCREMENT, url, str(ROUNDS)) for _ in range(2)]
    try:
        for worker in workers:  # after both have started (imports done): they run at the same time
            assert worker.stdin is not None
            worker.stdin.write("go\n")
            worker.stdin.flush()
        for worker in workers:
            _, err = worker.communicate(timeout=BOUND)
            assert worker.returncode == 0, err
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
    db = Database(url)
    try:
        with db.read_session() as session:
            counter = session.scalar(select(EmulatorSettingRow.value).where(EmulatorSettingRow.name == "counter"))
    finally:
        db.dispose()
    assert counter == str(2 * ROUNDS)


def test_a_turn_held_elsewhere_fails_a_write_after_the_patience_and_a_killed_holder_frees_it(url: str) -> None:
    file = Path(url.removeprefix("sqlite:///"))
    lock = file.with_name(file.name + ".lock")
    holder = python(HOLD, str(lock))
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline() == "held\n", holder.stderr.read() if holder.stderr else ""
        turn = WriteTurn(lock, patience=0.3)
        with pytest.raises(OperationalError, match="database is locked"), turn:
            pass
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(BOUND)
        with turn, turn:  # the kernel released the killed holder's lock; re-entrant in one thread
            pass
        turn.close()
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(BOUND)
    assert oct(lock.stat().st_mode & 0o777) == "0o600"
