"""The suite's two ways to start an emulator (``support.server.CommandEmulator``) give the same process: a fresh
``python -m scheduler_emulator`` and one forked from the pre-imported fork server (``SCHEDULER_EMULATOR_FORK_SERVER=1``,
support/forkserver.py, which the rest of the suite uses). Each scenario runs both ways and compares what a test can
observe: its output, its environment and working directory, its exit status, its place in the process tree. And the
rule the fork server rests on, enforced: importing the service reads nothing of the environment that a fork would
not honour."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import httpx
import pytest
from support import forkserver
from support.forkserver import ForkedProcess
from support.import_time import EnvironmentRead, environment_read_at_import
from support.server import CommandEmulator

from scheduler_emulator.testing import EmulatorError

WAYS = ["fresh", "forked"]


@pytest.fixture(params=WAYS)
def way(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(forkserver.ENABLE, "1" if request.param == "forked" else "0")
    return str(request.param)


def _parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def test_a_start_takes_its_environment_and_working_directory_and_ends_with_the_same_status(
    way: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    emulator = CommandEmulator(
        command=["--port", "0", "--data-dir", "here", "--log-level", "info"],
        env={"SCHEDULER_AUTH_TOKEN": f"token-{way}"},
    )
    with emulator:
        process = emulator.process
        assert isinstance(process, ForkedProcess if way == "forked" else subprocess.Popen)
        assert _parent(process.pid) == os.getpid(), "the emulator should be this process's child"
        assert process.poll() is None
        refused = httpx.get(emulator.url + "/_emulator/clock", timeout=30)
        assert refused.status_code == 401, "SCHEDULER_AUTH_TOKEN from the start's environment should apply"
        headers = {"Authorization": f"Bearer token-{way}"}
        assert httpx.get(emulator.url + "/_emulator/clock", headers=headers, timeout=30).status_code == 200
        assert (tmp_path / "here" / "scheduler.db").exists(), "a relative --data-dir is the caller's directory's"
        process.send_signal(signal.SIGTERM)
        assert emulator.wait_exit(30) == process.returncode
    assert process.returncode is not None
    fresh_status = _status_of_a_terminated_fresh_emulator(tmp_path, monkeypatch)
    assert process.returncode == fresh_status
    assert any("Listening on http://127.0.0.1:" in line for line in emulator.output), emulator.log
    assert any("GET /_emulator/clock" in line and "401" in line for line in emulator.output), emulator.log


def _status_of_a_terminated_fresh_emulator(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setenv(forkserver.ENABLE, "0")
    with CommandEmulator(
        command=["--port", "0", "--data-dir", str(tmp_path / "fresh"), "--log-level", "warning"]
    ) as fresh:
        assert isinstance(fresh.process, subprocess.Popen)
        fresh.process.terminate()
        return fresh.wait_exit(30)


def test_a_refused_start_reports_the_same_error_and_status(way: str, tmp_path: Path) -> None:
    emulator = CommandEmulator(command=["--port", "0", "--data-dir", str(tmp_path), "--no-such-flag"], start_timeout=30)
    with pytest.raises(EmulatorError, match="exited before listening") as refused:
        emulator.start()
    assert "unrecognized arguments: --no-such-flag" in str(refused.value)
    assert emulator.wait_exit(10) == 2


def test_a_killed_emulator_reads_as_killed(way: str, tmp_path: Path) -> None:
    with CommandEmulator(command=["--port", "0", "--data-dir", str(tmp_path), "--log-level", "warning"]) as emulator:
        assert emulator.process is not None
        emulator.process.kill()
        assert emulator.wait_exit(30) == -signal.SIGKILL
        assert emulator.process.poll() == -signal.SIGKILL


def test_an_interpreter_variable_of_its_own_starts_it_fresh(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(forkserver.ENABLE, "1")
    with CommandEmulator(
        command=["--port", "0", "--data-dir", str(tmp_path), "--log-level", "warning"],
        env={"PYTHONHASHSEED": "123"},  # read by the interpreter as it starts: a fork would not honour it
    ) as emulator:
        assert isinstance(emulator.process, subprocess.Popen)
        assert Path(f"/proc/{emulator.process.pid}/environ").read_bytes().count(b"PYTHONHASHSEED=123") == 1


def test_a_fork_server_that_died_is_replaced(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(forkserver.ENABLE, "1")
    server = forkserver.shared()
    server.process.kill()
    server.process.wait(10)
    with CommandEmulator(command=["--port", "0", "--data-dir", str(tmp_path), "--log-level", "warning"]) as emulator:
        assert isinstance(emulator.process, ForkedProcess)
        assert httpx.get(emulator.url + "/_emulator/clock", timeout=30).status_code == 200
    assert forkserver.shared() is not server


def test_an_emulator_started_with_a_whole_command_line_keeps_its_output_and_exit_status(
    way: str, tmp_path: Path
) -> None:
    """``command`` is used as given (here: info logs, a data directory of the caller's, which stays); after
    ``stop`` the process's exit status and every line it printed stay readable. A command the service refuses
    ends before it listens: EmulatorError with its message, and the exit status of a usage error (2)."""
    data = tmp_path / "given"
    emulator = CommandEmulator(["--port", "0", "--data-dir", str(data), "--log-level", "info"]).start()
    try:
        assert emulator.call("GET", "/_emulator/health") is not None
        assert any("Listening on" in line for line in emulator.output)
    finally:
        emulator.stop()
    assert emulator.url == ""
    assert emulator.wait_exit(5) in (0, -15), emulator.log
    assert (data / "scheduler.db").exists(), "the caller's data directory is the one used, and it is kept"
    refused = CommandEmulator(["--port", "0", "--data-dir", str(tmp_path / "refused"), "--clock", "sideways"])
    with pytest.raises(EmulatorError, match="exited before listening") as raised:
        refused.start()
    assert "sideways" in str(raised.value)
    assert refused.wait_exit(5) == 2


# --- the rule the fork server rests on ----------------------------------------------------------------


def _not_honoured_by_a_fork(reads: list[EnvironmentRead]) -> list[str]:
    """The reads a forked emulator would get wrong: any the package's own code makes as it is imported, and any
    a library makes then (called by the package's import-time code) that ``ForkServer.takes`` does not compare."""
    return [
        f"{read.module} ({read.at}) {read.what}" + ("" if read.by_package else ", through a library it calls")
        for read in reads
        if read.by_package or read.name is None or read.name not in forkserver.READ_AT_IMPORT
    ]


def test_importing_the_service_reads_nothing_of_the_environment_a_fork_would_not_honour() -> None:
    """The fork server imports the service once, under the test process's environment, and forks it for starts
    with other environments: a module that read a variable at import (a setting, a default, a settings object
    built at module level) would keep the server's value in every fork. Every module is imported with the
    environment recorded; a read names its module and line."""
    reads = environment_read_at_import("scheduler_emulator")
    assert _not_honoured_by_a_fork(reads) == []
    assert {read.name for read in reads} <= forkserver.READ_AT_IMPORT  # the list names no variable left unread


def test_the_import_probe_sees_each_way_of_reading_the_environment(tmp_path: Path) -> None:
    """The probe itself, on a package of its own: a read at module level, one through a function called at module
    level and one through a library (a settings object) are seen; a read inside a function nobody calls at import
    is not."""
    package = tmp_path / "probed"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "direct.py").write_text('import os\nLEVEL = os.environ.get("PROBED_LEVEL", "info")\n')
    (package / "helper.py").write_text(
        'from os import getenv\n\n\ndef level():\n    return getenv("PROBED_HELPER")\n\n\nLEVEL = level()\n'
    )
    (package / "library.py").write_text(
        "from pydantic_settings import BaseSettings\n\n\n"
        "class Settings(BaseSettings):\n    probed_port: int = 1\n\n\nSETTINGS = Settings()\n"
    )
    (package / "lazy.py").write_text('import os\n\n\ndef level():\n    return os.environ["PROBED_LAZY"]\n')
    reads = environment_read_at_import("probed", search_path=[str(tmp_path)])
    found = _not_honoured_by_a_fork(reads)
    assert "probed.direct (direct.py:2) reads PROBED_LEVEL" in found
    assert "probed.helper (helper.py:5) reads PROBED_HELPER" in found
    assert any(line.startswith("probed.library (library.py:8)") and "through a library" in line for line in found)
    assert not any("lazy" in line for line in found)
