"""The kit's two ways to start an emulator give the same process: a fresh ``python -m scheduler_emulator`` and one
forked from the pre-imported fork server (``SCHEDULER_EMULATOR_FORK_SERVER=1``, testing/forkserver.py, which the
rest of the suite uses). Each scenario runs both ways and compares what a test can observe: its output, its
environment and working directory, its exit status, its place in the process tree."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import httpx
import pytest

from scheduler_emulator.testing import Emulator, EmulatorError, forkserver
from scheduler_emulator.testing.forkserver import ForkedProcess

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
    emulator = Emulator(
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
    with Emulator(command=["--port", "0", "--data-dir", str(tmp_path / "fresh"), "--log-level", "warning"]) as fresh:
        assert isinstance(fresh.process, subprocess.Popen)
        fresh.process.terminate()
        return fresh.wait_exit(30)


def test_a_refused_start_reports_the_same_error_and_status(way: str, tmp_path: Path) -> None:
    emulator = Emulator(command=["--port", "0", "--data-dir", str(tmp_path), "--no-such-flag"], start_timeout=30)
    with pytest.raises(EmulatorError, match="exited before listening") as refused:
        emulator.start()
    assert "unrecognized arguments: --no-such-flag" in str(refused.value)
    assert emulator.wait_exit(10) == 2


def test_a_killed_emulator_reads_as_killed(way: str, tmp_path: Path) -> None:
    with Emulator(command=["--port", "0", "--data-dir", str(tmp_path), "--log-level", "warning"]) as emulator:
        assert emulator.process is not None
        emulator.process.kill()
        assert emulator.wait_exit(30) == -signal.SIGKILL
        assert emulator.process.poll() == -signal.SIGKILL


def test_an_interpreter_variable_of_its_own_starts_it_fresh(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(forkserver.ENABLE, "1")
    with Emulator(
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
    with Emulator(command=["--port", "0", "--data-dir", str(tmp_path), "--log-level", "warning"]) as emulator:
        assert isinstance(emulator.process, ForkedProcess)
        assert httpx.get(emulator.url + "/_emulator/clock", timeout=30).status_code == 200
    assert forkserver.shared() is not server
