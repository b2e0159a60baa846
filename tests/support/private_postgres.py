"""A PostgreSQL server of a test's own, for tests that stop and start the server.

Restarting the shared server at 127.0.0.1:5432 would break every other test using it at that moment
(and any other suite on the machine), so a test that needs to take the database away starts its own
cluster with Debian's server binaries (``initdb`` + ``pg_ctl``) in a temporary directory, on a free
loopback port, and stops and removes it afterwards. As root, the server runs as the ``postgres`` user
(PostgreSQL refuses to run as root).
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest

from support.environment import missing


def _server_binaries() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), key=lambda p: int(Path(p).parts[4]))
    return Path(found[-1]).parent if found else None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class PrivatePostgres:
    """``with PrivatePostgres() as server:`` — a new cluster; ``server.url``; ``stop()``/``start()``."""

    def __init__(self) -> None:
        binaries = _server_binaries()
        if binaries is None:
            message = "PostgreSQL's server binaries (/usr/lib/postgresql/*/bin, Debian's postgresql) are needed"
            missing(message)
        self._bin = binaries
        self.port = _free_port()
        self._home = Path(tempfile.mkdtemp(prefix="sched-pg-"))
        self._data = self._home / "data"
        self._as: list[str] = []
        if os.geteuid() == 0:
            try:
                account = pwd.getpwnam("postgres")
            except KeyError:
                pytest.fail("running as root, a private PostgreSQL needs the 'postgres' system user")
            os.chown(self._home, account.pw_uid, account.pw_gid)
            self._as = ["runuser", "-u", "postgres", "--"]

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *command: str) -> None:
        result = subprocess.run(
            [*self._as, *command], capture_output=True, text=True, timeout=120, check=False, cwd=self._home
        )
        if result.returncode != 0:
            raise AssertionError(f"{' '.join(command)} failed ({result.returncode}): {result.stderr or result.stdout}")

    def start(self) -> None:
        options = f"-p {self.port} -k {self._home} -c listen_addresses=127.0.0.1 -c fsync=off"
        log = str(self._home / "server.log")
        self._run(str(self._bin / "pg_ctl"), "-D", str(self._data), "-o", options, "-l", log, "-w", "-t", "60", "start")

    def stop(self) -> None:
        self._run(str(self._bin / "pg_ctl"), "-D", str(self._data), "-m", "fast", "-w", "-t", "60", "stop")

    def __enter__(self) -> PrivatePostgres:
        self._run(str(self._bin / "initdb"), "-D", str(self._data), "-A", "trust", "-U", "postgres", "--no-sync")
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(AssertionError):
            self.stop()
        shutil.rmtree(self._home, ignore_errors=True)
