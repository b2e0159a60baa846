"""Processes started together on one empty PostgreSQL database (compose, Kubernetes) all come up: the schema
migration at start is serialised across processes, so none crashes on another's ``CREATE TABLE``.

Each round starts several processes that each do what a server does at start (migrate, then check the secret
key) at the same instant, released together from a barrier file, so the race is run on purpose rather than
left to start-up jitter; then three real servers are started together on a fresh database."""

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

# What the server does at start (cli.check_secret_key, then the app's lifespan), once a barrier file exists.
START = """
import os, sys, time
from scheduler_emulator.store.database import Database
from scheduler_emulator.store.secrets import SecretBox
barrier = sys.argv[2]
for _ in range(3000):
    if os.path.exists(barrier):
        break
    time.sleep(0.002)
database = Database(sys.argv[1], SecretBox(os.environ["SCHEDULER_SECRET_KEY"].encode()))
database.migrate()
database.prepare_secrets()
database.dispose()
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
    for round_ in range(ROUNDS):
        database = PostgresDatabase().create()
        barrier = tmp_path / f"go-{round_}"
        try:
            starters = [
                subprocess.Popen(
                    [sys.executable, "-c", START, database.url, str(barrier)],
                    env=env,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    text=True,
                )
                for _ in range(PROCESSES)
            ]
            time.sleep(1.5)  # every process has imported what it needs and waits at the barrier
            barrier.touch()
            outcomes = [(starter.wait(60), starter.stdout.read() if starter.stdout else "") for starter in starters]
            failed = [output for status, output in outcomes if status != 0]
            assert not failed, f"round {round_}: {len(failed)} of {PROCESSES} processes crashed:\n{failed[0][-3000:]}"
            with psycopg.connect(database.url) as connection:
                assert connection.execute("SELECT version_num FROM alembic_version").fetchall() == [(head,)]
        finally:
            database.drop()


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
