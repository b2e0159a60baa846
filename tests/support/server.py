"""The one way tests start the emulator: ``emulator_command`` builds its command line, ``ServerProcess``
runs it as a separate process through ``CommandEmulator`` (the package's own kit, ``scheduler_emulator.testing
.Emulator``, given the whole command and the suite's knobs), and ``EmulatorPool`` starts any number and stops every
one it started."""

from __future__ import annotations

import ssl
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx

from scheduler_emulator.testing import START_TIMEOUT, Emulator, EmulatorError
from support import forkserver
from support.forkserver import ForkedProcess


def stop_process(process: subprocess.Popen[Any], grace: float) -> None:
    """Terminate ``process`` and wait for it; kill it when it has not ended after ``grace`` seconds."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)


class CommandEmulator(Emulator):
    """The kit's ``Emulator`` run with ``command`` as its whole argument list, used as given (no temporary data
    directory, port, clock or log level is added), under ``launcher`` if given (e.g. ``["unshare", "-rn"]``),
    forked from the fork server (support/forkserver.py) when ``SCHEDULER_EMULATOR_FORK_SERVER=1`` and no launcher
    is given. ``process`` (the last one started) and its exit status (``wait_exit``) stay readable after ``stop``."""

    def __init__(
        self,
        command: Sequence[str],
        *,
        env: dict[str, str] | None = None,
        launcher: Sequence[str] = (),
        start_timeout: float = START_TIMEOUT,
    ) -> None:
        super().__init__(env=env, start_timeout=start_timeout)
        self.command = list(command)
        self.launcher = list(launcher)

    def _arguments(self) -> list[str]:
        return list(self.command)

    def _launch(self, arguments: Sequence[str], environment: dict[str, str]) -> subprocess.Popen[str] | ForkedProcess:
        if not self.launcher and forkserver.requested():
            server = forkserver.shared()
            if server.takes(environment):
                return server.start(arguments, environment)
        return subprocess.Popen(
            [*self.launcher, sys.executable, "-m", "scheduler_emulator", *arguments],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=environment,
        )

    def _healthy(self, process: Any, deadline: float) -> bool:
        # A launcher may run it where this process cannot reach it (another network namespace): listening is all
        # that can be known from here.
        return process.poll() is None if self.launcher else super()._healthy(process, deadline)

    @property
    def process(self) -> subprocess.Popen[str] | ForkedProcess | None:
        """The last process started (None before ``start``), also once it has stopped."""
        return self._process  # type: ignore[return-value]

    def wait_exit(self, timeout: float = 30) -> int:
        """The exit status of the last process started, once it has ended."""
        if self._process is None:
            raise EmulatorError("the emulator was never started")
        return self._process.wait(timeout)


@dataclass
class ServerProcess:
    """``scheduler-emulator`` started with the arguments ``args`` as a separate process (a kit ``Emulator``);
    its output is collected for assertions, and its process and URL stay readable once it has stopped."""

    args: list[str]
    env: dict[str, str] = field(default_factory=dict)
    launcher: list[str] = field(default_factory=list)  # a command to run it under, e.g. ``unshare -rn``
    emulator: CommandEmulator | None = None
    url: str = ""

    def start(self, timeout: float = 30) -> ServerProcess:
        """Start the process and return once it listens; RuntimeError (with its whole log) when it does not."""
        self.emulator = CommandEmulator(self.args, env=self.env, launcher=self.launcher, start_timeout=timeout)
        try:
            self.url = self.emulator.start().url
        except EmulatorError as exc:
            raise RuntimeError(f"{str(exc).splitlines()[0]}\n{self.log}") from None
        return self

    @property
    def process(self) -> subprocess.Popen[str] | ForkedProcess | None:
        return self.emulator.process if self.emulator else None

    @property
    def output(self) -> list[str]:
        return self.emulator.output if self.emulator else []

    @property
    def cert_path(self) -> Path | None:
        """The self-signed certificate's file, when it serves HTTPS."""
        return Path(self.emulator.cert_path) if self.emulator and self.emulator.cert_path else None

    def wait_exit(self, timeout: float = 30) -> int:
        """The exit status, once the process has ended."""
        assert self.emulator is not None
        return self.emulator.wait_exit(timeout)

    def stop(self) -> None:
        """Terminate the process (kill it if it will not end); harmless when it is not running."""
        if self.emulator:
            self.emulator.stop()

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
