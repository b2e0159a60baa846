"""Processes started together on one empty PostgreSQL database (compose, Kubernetes) all come up: the schema
migration at start is serialised across processes, so none crashes on another's ``CREATE TABLE``.

Each round has several processes each do what a server does at start (migrate, then check the secret key) on a
fresh database at the same instant, released together from a barrier file once every one has said it is ready, so
the race is run on purpose rather than left to start-up jitter (the processes are started once and serve every
round: importing is their slow part, and the race is between processes on the database, not between imports);
then three real servers are started together on a fresh database."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import psycopg
import pytest
from support.databases import TEST_SECRET_KEY, PostgresDatabase, require_postgres
from support.server import EmulatorPool, ServerProcess

LONG = os.environ.get("SCHEDULER_FAULTS_LONG", "") not in ("", "0")  # make faults
PROCESSES = 4
ROUNDS = 20 if LONG else 4

# What the server does at start (serving.check_store, then the app's lifespan), for each round: say it is ready
# (a file), wait for that round's barrier file, which holds the database URL, then migrate. Bounded waits.
START = """
import os, sys, time
from pathlib import Path
from scheduler_emulator.store.database import Database
from scheduler_emulator.store.secrets import SecretBox
folder, me, rounds = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
for round_ in range(rounds):
    (folder / f"ready-{round_}-{me}").touch()
    barrier = folder / f"go-{round_}"
    for _ in range(60000):
        if barrier.exists() and barrier.read_text().endswith("\\n"):
            break
        time.sleep(0.001)
    database = Database(barrier.read_text().strip(), SecretBox(os.environ["SCHEDULER_SECRET_KEY"].encode()))
    database.migrate()
    database.prepare_secrets()
    database.dispose()
    print(f"round {round_} done", flush=True)
    (folder / f"done-{round_}-{me}").touch()
"""


def _head_revision() -> str:
    from alembic.script import ScriptDirectory

    from scheduler_emulator.store.database import migrations_dir

    head = ScriptDirectory(str(migrations_dir())).get_current_head()
    assert head is not None
    return head


@pytest.fixture(autouse=True)
def _postgres() -> None:
    require_postgres()


def test_processes_migrating_an_empty_database_at_the_same_instant_all_succeed(tmp_path: Path) -> None:
    env = {**os.environ, "SCHEDULER_SECRET_KEY": TEST_SECRET_KEY}
    head = _head_revision()
    starters = [
        subprocess.Popen(
            [sys.executable, "-c", START, str(tmp_path), str(me), str(ROUNDS)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for me in range(PROCESSES)
    ]

    def crashed(round_: int) -> str:
        outputs = []
        for starter in starters:
            if starter.poll() is None:
                starter.kill()
            outputs.append(starter.communicate()[0])
        return f"round {round_}: a process crashed or hung:\n" + "\n---\n".join(o[-3000:] for o in outputs)

    def wait_for_all(round_: int, what: str) -> None:
        for _ in range(6000):  # bounded: 60 s
            if all((tmp_path / f"{what}-{round_}-{me}").exists() for me in range(PROCESSES)):
                return
            if any(starter.poll() is not None for starter in starters):
                break
            time.sleep(0.01)
        pytest.fail(crashed(round_))

    try:
        for round_ in range(ROUNDS):
            database = PostgresDatabase().create()
            try:
                wait_for_all(round_, "ready")  # every process has imported what it needs and waits at the barrier
                (tmp_path / "go.tmp").write_text(database.url + "\n")
                os.replace(tmp_path / "go.tmp", tmp_path / f"go-{round_}")  # appears whole
                wait_for_all(round_, "done")
                with psycopg.connect(database.url) as connection:
                    assert connection.execute("SELECT version_num FROM alembic_version").fetchall() == [(head,)]
            finally:
                database.drop()
        outcomes = [(starter.wait(60), starter.stdout.read() if starter.stdout else "") for starter in starters]
        failed = [output for status, output in outcomes if status != 0]
        assert not failed, f"{len(failed)} of {PROCESSES} processes failed at the end:\n{failed[0][-3000:]}"
    finally:
        for starter in starters:
            if starter.poll() is None:
                starter.kill()
                starter.wait(10)


def test_servers_started_together_on_an_empty_database_all_serve(emulators: EmulatorPool, tmp_path: Path) -> None:
    database = PostgresDatabase().create()
    try:
        env = {"SCHEDULER_SECRET_KEY": TEST_SECRET_KEY}
        servers = [
            emulators.prepare(tmp_path / f"d{i}", database_url=database.url, log_level="warning", env=env)
            for i in range(3)
        ]
        starting = [threading.Thread(target=_start, args=(server,), daemon=True) for server in servers]
        for thread in starting:  # together: each begins its start-up while the others are in theirs
            thread.start()
        for server, thread in zip(servers, starting, strict=True):
            thread.join(90)
            assert server.url, f"a server did not come up:\n{server.log}"
            with server.client() as client:
                assert client.get("/_emulator/health").status_code == 200
    finally:
        emulators.stop_all()
        database.drop()


def _start(server: ServerProcess) -> None:
    with contextlib.suppress(RuntimeError):  # reported by the test, with the server's log
        server.start(timeout=60)
