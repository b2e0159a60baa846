"""Fast starts for the suite: one process that has imported the service once forks a ready emulator per start.

A start through ``python -m scheduler_emulator`` spends ~1.2 s of CPU importing (FastAPI, pydantic, SQLAlchemy,
aiohttp, ~120 modules of our own), which is most of a start and, in a suite that starts an emulator per test
module, a large share of the suite's CPU. With ``SCHEDULER_EMULATOR_FORK_SERVER=1`` (tests/conftest.py sets it) the
suite's starter (``support.server.CommandEmulator``) instead asks a *fork server*: a process started once per test
process (``python -c`` calling ``serve``) that imports the service, freezes those objects out of the garbage
collector's sight and waits. For each start it forks twice; the grandchild takes the start's output pipe as its
standard output and error, its environment, working directory and arguments, and runs the same ``main`` that
``python -m scheduler_emulator`` runs; the middle process exits at once. The test process has made itself a *child
subreaper* (Linux ``prctl``), so the orphaned grandchild becomes its own child: ``wait``, ``poll``, exit statuses
and signals work as for a process it started. tests/testing/test_forkserver.py compares the two ways.

A start under a ``launcher``, or one whose environment sets the ``PYTHON*`` variables the interpreter reads as it
starts differently from the server's (``ForkServer.takes``), goes the usual way. Linux only. It rests on one rule:
nothing of the service reads its environment at import (the server imported it once, under the test process's
environment); tests/testing/test_forkserver.py enforces it. The public kit (``scheduler_emulator.testing``) starts
every emulator afresh, as users run it."""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import gc
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

ENABLE = "SCHEDULER_EMULATOR_FORK_SERVER"
_PR_SET_CHILD_SUBREAPER = 36
_MESSAGE = 1 << 20  # a request's bytes at most (its arguments and environment)
_PATIENCE = 60.0  # seconds: the longest wait for the server to be ready (its imports) or to answer a start
# The server imports this module from the suite's tests/ directory, appended to its path (after the package's own,
# so that nothing of tests/ can stand in for a module the service imports).
_SERVE = "import sys; sys.path.append(sys.argv[2]); from support.forkserver import serve; serve(int(sys.argv[1]))"
_TESTS = str(Path(__file__).resolve().parents[1])
# What importing the service reads of the environment besides the interpreter's own PYTHON* variables: pydantic reads
# this one as each model class is built (pydantic/plugin/_loader.py); the service's own modules read nothing.
# tests/testing/test_forkserver.py keeps this list to what an import reads.
READ_AT_IMPORT = frozenset({"PYDANTIC_DISABLE_PLUGINS"})


# -- the test process's side -------------------------------------------------------------------------


class ForkedProcess:
    """An emulator forked by the fork server, a child of this process (it is its subreaper): the parts of
    ``subprocess.Popen`` a test uses — ``pid``, ``args``, ``stdout``, ``returncode``, ``poll``, ``wait``,
    ``send_signal``, ``terminate``, ``kill``."""

    def __init__(self, pid: int, args: list[str], stdout: Any) -> None:
        self.pid = pid
        self.args = args
        self.stdout = stdout
        self.returncode: int | None = None
        self._lock = threading.Lock()

    def poll(self) -> int | None:
        return self._reap(os.WNOHANG)

    def wait(self, timeout: float | None = None) -> int:
        if self.poll() is not None:
            assert self.returncode is not None
            return self.returncode
        if timeout is None:
            code = self._reap(0)
            assert code is not None
            return code
        deadline = time.monotonic() + timeout
        descriptor = os.pidfd_open(self.pid)
        try:
            for _ in range(1_000_000):  # bounded: each round waits for the exit or the deadline
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                select.select([descriptor], [], [], left)
                if (code := self.poll()) is not None:
                    return code
        finally:
            os.close(descriptor)
        if (code := self.poll()) is not None:
            return code
        raise subprocess.TimeoutExpired(self.args, timeout)

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:  # a reaped pid may belong to another process by now
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def _reap(self, flags: int) -> int | None:
        with self._lock:
            if self.returncode is None:
                try:
                    pid, status = os.waitpid(self.pid, flags)
                except ChildProcessError:  # reaped elsewhere: its status is lost
                    pid, status = self.pid, 255 << 8
                if pid == self.pid:
                    self.returncode = os.waitstatus_to_exitcode(status)
            return self.returncode


class ForkServer:
    """The fork server of this process (``shared()``): started on first use, ended with this process."""

    def __init__(self) -> None:
        _become_subreaper()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.environment = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.process = subprocess.Popen(
            [sys.executable, "-c", _SERVE, str(theirs.fileno()), _TESTS],
            pass_fds=[theirs.fileno()],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            env=self.environment,
        )
        theirs.close()
        self.socket = ours
        self.socket.settimeout(_PATIENCE)  # every wait on the server is bounded (socket.timeout is an OSError)
        self.lock = threading.Lock()
        try:
            ready = self.socket.recv(_MESSAGE)
        except OSError:
            ready = b""
        if json.loads(ready or b"{}").get("ready") is not True:
            self.process.kill()
            self.close()
            raise OSError("the emulator's fork server did not start")

    def takes(self, environment: Mapping[str, str]) -> bool:
        """Whether a process with this environment can be forked from here: the variables read as the interpreter
        starts and as the service is imported (``READ_AT_IMPORT``) are the server's own."""
        return _read_at_start(environment) == _read_at_start(self.environment)

    def start(self, arguments: Sequence[str], environment: Mapping[str, str]) -> ForkedProcess:
        """Fork an emulator run with ``arguments`` (as after ``python -m scheduler_emulator``); its standard
        output and error are ``stdout`` of the result, as text."""
        request = json.dumps({"argv": list(arguments), "env": dict(environment), "cwd": os.getcwd()}).encode()
        reading, writing = os.pipe()
        try:
            with self.lock:
                socket.send_fds(self.socket, [request], [writing])
                answer = json.loads(self.socket.recv(_MESSAGE) or b"{}")
        except BaseException:
            os.close(reading)
            self.process.kill()  # its answers would no longer match the requests: the next start gets a new one
            raise
        finally:
            os.close(writing)
        if not answer.get("pid"):
            os.close(reading)
            raise OSError(f"the emulator's fork server did not fork: {answer.get('error', 'it has ended')}")
        stdout = open(reading, encoding="utf-8", errors="replace")  # noqa: SIM115 - the process owns it
        return ForkedProcess(answer["pid"], [sys.executable, "-m", "scheduler_emulator", *arguments], stdout)

    def close(self) -> None:
        self.socket.close()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(5)


_shared: ForkServer | None = None
_shared_lock = threading.Lock()


def requested(environment: Mapping[str, str] | None = None) -> bool:
    """Whether starts should go through the fork server (``SCHEDULER_EMULATOR_FORK_SERVER=1``, on Linux)."""
    value = (os.environ if environment is None else environment).get(ENABLE, "")
    return value.strip().lower() in {"1", "true", "yes", "on"} and sys.platform.startswith("linux")


def shared() -> ForkServer:
    """This process's fork server, started on first use."""
    global _shared
    with _shared_lock:
        if _shared is None or _shared.process.poll() is not None:
            _shared = ForkServer()
            atexit.register(_shared.close)
        return _shared


def _read_at_start(environment: Mapping[str, str]) -> dict[str, str]:
    return {key: value for key, value in environment.items() if key.startswith("PYTHON") or key in READ_AT_IMPORT}


def _become_subreaper() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER) failed")


# -- the fork server's side --------------------------------------------------------------------------


def serve(descriptor: int) -> None:
    """Import the service, then fork one emulator per request until the test process goes away."""
    # What a start imports, imported once here: serving.py imports the API's modules in serving._server only
    # (after its dispatcher child is spawned), so they are named too.
    import uvicorn  # noqa: F401

    import scheduler_emulator.api.access
    import scheduler_emulator.api.root
    import scheduler_emulator.app
    import scheduler_emulator.cli
    import scheduler_emulator.connections
    import scheduler_emulator.serving  # noqa: F401

    gc.collect()
    gc.freeze()
    channel = socket.socket(fileno=descriptor)
    channel.send(json.dumps({"ready": True}).encode())
    for _ in range(10_000_000):  # bounded: one round per start asked for
        try:
            message, descriptors, _flags, _address = socket.recv_fds(channel, _MESSAGE, 1)
        except OSError:
            break
        if not message:  # the test process closed its end: it is ending
            break
        try:
            request = json.loads(message)
            pid = _fork(request, descriptors[0], channel)
            answer: dict[str, Any] = {"pid": pid}
        except Exception as exc:  # noqa: BLE001 - told to the test process, which raises it
            answer = {"error": f"{type(exc).__name__}: {exc}"}
        finally:
            for each in descriptors:
                os.close(each)
        channel.send(json.dumps(answer).encode())


def _fork(request: dict[str, Any], output: int, channel: socket.socket) -> int:
    """Fork twice and return the grandchild's pid once the middle process has ended (so that the grandchild is
    the test process's child by then)."""
    reading, writing = os.pipe()
    middle = os.fork()
    if middle == 0:
        try:
            os.close(reading)
            emulator = os.fork()
            if emulator == 0:
                os.close(writing)
                _run(request, output, channel)  # never returns
            os.write(writing, str(emulator).encode())
        finally:
            os._exit(0)
    os.close(writing)
    with os.fdopen(reading, "rb") as pipe:
        told = pipe.read()
    os.waitpid(middle, 0)
    if not told:
        raise OSError("the fork server's second fork failed")
    return int(told)


def _run(request: dict[str, Any], output: int, channel: socket.socket) -> None:
    """In the forked emulator: become the process ``python -m scheduler_emulator ARGS`` would be, run it, exit
    as it would."""
    code = 1
    try:
        os.close(channel.detach())
        os.dup2(output, 1)
        os.dup2(output, 2)
        os.close(output)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        time.tzset()
        import scheduler_emulator
        from scheduler_emulator.cli import main

        package = os.path.dirname(scheduler_emulator.__file__ or "")
        sys.argv = [os.path.join(package, "__main__.py"), *request["argv"]]  # as under ``-m``

        main(request["argv"])
        code = 0
    except SystemExit as exc:
        code = _exit_code(exc.code)
    except KeyboardInterrupt:
        traceback.print_exc()
        _flush()
        signal.signal(signal.SIGINT, signal.SIG_DFL)  # as Python ends on an uncaught KeyboardInterrupt
        os.kill(os.getpid(), signal.SIGINT)
    except BaseException:  # noqa: BLE001 - reported as an uncaught exception would be
        sys.excepthook(*sys.exc_info())
        code = 1
    finally:
        _finish(code)


def _exit_code(value: object) -> int:
    if value is None:
        return 0
    if isinstance(value, int):
        return value & 0xFF
    print(value, file=sys.stderr)
    return 1


def _finish(code: int) -> None:
    """End as the interpreter ends: wait for non-daemon threads, run the exit handlers, flush, exit."""
    try:
        shutdown = getattr(threading, "_shutdown", None)
        if shutdown is not None:
            shutdown()
        atexit._run_exitfuncs()
    finally:
        _flush()
        os._exit(code)


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
