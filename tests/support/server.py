"""The one way tests start the emulator: ``emulator_command`` builds its command line, ``ServerProcess``
runs it as a separate process, and ``EmulatorPool`` starts any number and stops every one it started."""

from __future__ import annotations

import os
import re
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx


def stop_process(process: subprocess.Popen[Any], grace: float) -> None:
    """Terminate ``process`` and wait for it; kill it when it has not ended after ``grace`` seconds."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)


@dataclass
class ServerProcess:
    """``scheduler-emulator`` started as a separate process; its output is collected for assertions."""

    args: list[str]
    env: dict[str, str] = field(default_factory=dict)
    process: subprocess.Popen[str] | None = None
    output: list[str] = field(default_factory=list)
    url: str = ""
    cert_path: Path | None = None
    launcher: list[str] = field(default_factory=list)  # a command to run it under, e.g. ``unshare -rn``

    def start(self, timeout: float = 30) -> ServerProcess:
        """Start the process and return once it listens; RuntimeError (with its log) when it does not."""
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **self.env}
        self.process = subprocess.Popen(
            [*self.launcher, sys.executable, "-m", "scheduler_emulator", *self.args],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
        )
        ready = threading.Event()

        def pump() -> None:
            assert self.process is not None and self.process.stdout is not None
            for line in self.process.stdout:
                self.output.append(line.rstrip("\n"))
                if match := re.search(r"Listening on (\S+)", line):
                    self.url = match.group(1)
                    ready.set()
                if match := re.search(r"HTTPS certificate .*: (\S+)$", line.strip()):
                    self.cert_path = Path(match.group(1))
            ready.set()

        threading.Thread(target=pump, daemon=True).start()
        deadline = time.monotonic() + timeout
        while not ready.wait(0.1):
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("server did not start in time:\n" + self.log)
        if not self.url:
            self.stop()
            raise RuntimeError("server exited before listening:\n" + self.log)
        return self

    def wait_exit(self, timeout: float = 30) -> int:
        """The exit status, once the process has ended."""
        assert self.process is not None
        return self.process.wait(timeout)

    def stop(self) -> None:
        """Terminate the process (kill it if it will not end); harmless when it is not running."""
        if self.process:
            stop_process(self.process, 15)

    @property
    def log(self) -> str:
        return "\n".join(self.output)

    def log_tail(self, lines: int = 30) -> str:
        """The latest log lines, without the access log."""
        return "\n".join([line for line in self.output if 'HTTP/1.1" ' not in line][-lines:])

    @property
    def verify(self) -> ssl.SSLContext | bool:
        """What httpx needs to trust this server (its self-signed certificate)."""
        return ssl.create_default_context(cafile=str(self.cert_path)) if self.cert_path else True

    def client(self, **kwargs: Any) -> httpx.Client:
        """An httpx client for this server (trusting its certificate)."""
        return httpx.Client(base_url=self.url, verify=self.verify, timeout=30, **kwargs)


def emulator_command(
    data_dir: Path | str,
    *extra_args: str,
    database_url: str | None = None,
    in_memory: bool = False,
    https: bool = False,
    port: int | None = 0,
    log_level: str | None = None,
    poll_interval: float | None = None,
    min_retry_interval: float | None = None,
    action_timeout: float | None = None,
) -> list[str]:
    """The emulator's arguments: a port (0: any free one; None: none given), the data directory, the store,
    then ``extra_args``."""
    args = [] if port is None else ["--port", str(port)]
    args += ["--data-dir", str(data_dir)]
    if https:
        args.append("--https")
    if in_memory:
        args.append("--in-memory")
    if database_url is not None:
        args += ["--database-url", database_url]
    if log_level is not None:
        args += ["--log-level", log_level]
    for flag, seconds in (
        ("--poll-interval", poll_interval),
        ("--min-retry-interval", min_retry_interval),
        ("--action-timeout", action_timeout),
    ):
        if seconds is not None:
            args += [flag, f"{seconds:g}"]
    return [*args, *extra_args]


class EmulatorPool:
    """Builds emulator processes from :func:`emulator_command`'s arguments, and stops every one it built
    (when used as a context manager, on leaving it; see the ``emulators`` fixture)."""

    def __init__(self) -> None:
        self.processes: list[ServerProcess] = []

    def prepare(
        self, data_dir: Path | str, *extra_args: str, env: Mapping[str, str] | None = None, **options: Any
    ) -> ServerProcess:
        """An emulator process not started yet (for tests of a start that must fail)."""
        process = ServerProcess(emulator_command(data_dir, *extra_args, **options), dict(env or {}))
        self.processes.append(process)
        return process

    def start(
        self, data_dir: Path | str, *extra_args: str, env: Mapping[str, str] | None = None, **options: Any
    ) -> ServerProcess:
        """A started emulator process (``options`` as :func:`emulator_command` takes them)."""
        return self.prepare(data_dir, *extra_args, env=env, **options).start()

    def stop_all(self) -> None:
        """Stop every process this pool built."""
        for process in self.processes:
            process.stop()

    def __enter__(self) -> EmulatorPool:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.stop_all()
