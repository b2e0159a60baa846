"""Runs a page's examples as a reader would, in a private network namespace with only a loopback interface, so
that the pages' own addresses (the emulator on 127.0.0.1:7480, a target on :8080) are used as written while
other tests listen on this machine's loopback.

A page runs in a folder of its own that stands for the reader's clone after ``make run``: ``.venv`` there is
this suite's environment (so ``.venv/bin/scheduler-emulator`` is the console script ``make run`` installs), the
emulator's ``./data`` is the folder's own, ``HOME`` and ``TMPDIR`` are inside it, and ``PATH`` is this machine's
without any virtual environment of the repository on it (a reader's shell has none). ``REQUESTS_CA_BUNDLE``
names certifi's bundle, as on the many machines that set it, so an example that only works without it fails
here. The Azure CLI's environment is on ``PATH`` (last) where a page calls ``az``; ``node_modules`` is the
repository's."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import certifi

from support.doc_blocks import Block
from support.environment import REPO

STEP_TIMEOUT = 300  # seconds one block may take (the Azure CLI's block makes eleven calls of ~3 s each)
SERVE_TIMEOUT = 60  # seconds a long-running block has to answer on its port
STOP_TIMEOUT = 20  # seconds a long-running block has to end after Ctrl-C, before it is killed
# Another bundle than the emulator's certificate, as REQUESTS_CA_BUNDLE names on many machines.
OTHER_CA_BUNDLE = certifi.where()
UNRELATED_PYTEST_PLUGINS = ("xdist", "schemathesis", "hypothesispytest", "anyio", "cacheprovider")

# `make run` is the Makefile's run target, `$(VENV)/bin/scheduler-emulator $(ARGS)` (checked by the test): the
# runner runs that recipe rather than make, whose dependency step would install into this suite's .venv.
MAKE_RUN = re.compile(r'^make run(?: ARGS="([^"]*)")?[ \t]*$', re.MULTILINE)

# Answers once the port does, over HTTP or HTTPS (the emulator's health, or any server's answer to that path);
# a 503 is an emulator whose store is not ready yet.
_PROBE = r"""
import http.client, ssl, sys, time
port, deadline = int(sys.argv[1]), time.monotonic() + float(sys.argv[2])
while time.monotonic() < deadline:
    for tls in (False, True):
        try:
            unverified = ssl._create_unverified_context()
            if tls:
                conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=5, context=unverified)
            else:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("GET", "/_emulator/health")
            if conn.getresponse().status != 503:
                sys.exit(0)
        except (OSError, http.client.HTTPException):
            pass
    time.sleep(0.1)
sys.exit(1)
"""


class Namespace:
    """A network namespace with only loopback, held open by a sleeping process; commands enter it."""

    def __init__(self) -> None:
        root = os.geteuid() == 0
        unshare = ["unshare", "--net"] if root else ["unshare", "--user", "--map-root-user", "--net"]
        self.holder = subprocess.Popen(
            [*unshare, "sh", "-c", "ip link set lo up && echo up && exec sleep 3600"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.holder.stdout is not None
        if self.holder.stdout.readline().strip() != "up":
            self.holder.wait(10)
            raise RuntimeError(f"could not make a network namespace: {self.holder.stderr.read()}")  # type: ignore[union-attr]
        pid = str(self.holder.pid)
        self.enter = (
            ["nsenter", f"--net=/proc/{pid}/ns/net", "--"]
            if root
            else ["nsenter", "--preserve-credentials", "--user", "--net", "--target", pid, "--"]
        )

    def close(self) -> None:
        self.holder.kill()
        self.holder.wait(10)


@dataclass
class Outcome:
    block: Block
    returncode: int
    output: str  # stdout and stderr together, as a terminal shows them
    seconds: float  # how long it took (for a long-running block: until it answered)


@dataclass
class PageRun:
    """The examples of one page, run in order in one folder and one namespace."""

    folder: Path
    namespace: Namespace
    az_bin: Path | None = None
    python_bins: dict[str, Path] = field(default_factory=dict)  # a block's where → the bin of the python it needs
    serving: dict[int, tuple[subprocess.Popen[bytes], Path]] = field(default_factory=dict)
    outcomes: list[Outcome] = field(default_factory=list)

    def __post_init__(self) -> None:
        for name in ("home", "tmp"):
            (self.folder / name).mkdir()
        (self.folder / ".venv").symlink_to(Path(sys.prefix))
        (self.folder / "node_modules").symlink_to(REPO / "node_modules")

    def environment(self, python_bin: Path | None) -> dict[str, str]:
        """What a reader's terminal has: this machine's PATH without the repository's environments."""
        ours = (str(REPO), str(Path(sys.prefix).resolve()), sys.prefix)
        path = [p for p in os.environ.get("PATH", "").split(os.pathsep) if p and not p.startswith(ours)]
        if python_bin is not None:
            path.insert(0, str(python_bin))  # the environment the block's `pip install` line names
        if self.az_bin is not None:
            path.append(str(self.az_bin))
        return {
            "PATH": os.pathsep.join(path),
            "HOME": str(self.folder / "home"),
            "TMPDIR": str(self.folder / "tmp"),
            "LANG": "C.UTF-8",
            "REQUESTS_CA_BUNDLE": OTHER_CA_BUNDLE,
            # The Azure CLI's prompts and telemetry off, as support/azure_cli.py has them (nothing could leave
            # the namespace anyway).
            "AZURE_CORE_COLLECT_TELEMETRY": "false",
            "AZURE_CORE_NO_COLOR": "true",
            "AZURE_CORE_SURVEY_MESSAGE": "false",
            # This suite's own pytest plugins, which a reader's project need not have: loading them cost a pytest
            # run ~2 s of CPU (schemathesis, hypothesis). The kit's plugin loads as a reader's run loads it.
            "PYTEST_ADDOPTS": " ".join(f"-p no:{name}" for name in UNRELATED_PYTEST_PLUGINS),
        }

    def script(self, block: Block) -> str:
        """The shell commands the block stands for."""
        if block.language == "sh":
            return MAKE_RUN.sub(lambda m: f".venv/bin/scheduler-emulator {m.group(1) or ''}".rstrip(), block.text)
        name, command = block.file_and_command()
        (self.folder / name).write_text(block.text)
        return command

    def run(self, block: Block) -> Outcome:
        """Run one block (a long-running one in the background, once it answers on its port)."""
        env = self.environment(self.python_bins.get(block.where))
        script = self.script(block)
        began = time.monotonic()
        if block.serves is not None:
            return self._serve(block, script, env, began)
        done = subprocess.run(
            [*self.namespace.enter, "bash", "-e", "-c", script],
            cwd=self.folder,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=STEP_TIMEOUT,
        )
        outcome = Outcome(block, done.returncode, done.stdout, time.monotonic() - began)
        self.outcomes.append(outcome)
        return outcome

    def _serve(self, block: Block, script: str, env: dict[str, str], began: float) -> Outcome:
        assert block.serves is not None
        self.stop(block.serves)  # the page says to stop the one before (Ctrl-C) and start this one
        log = self.folder / f"serves-{block.line}.log"
        with open(log, "wb") as out:
            process = subprocess.Popen(
                [*self.namespace.enter, "bash", "-e", "-c", script],
                cwd=self.folder,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.serving[block.serves] = (process, log)
        probe = subprocess.Popen([*self.namespace.enter, sys.executable, "-c", _PROBE, str(block.serves), "60"])
        deadline = time.monotonic() + SERVE_TIMEOUT + 10
        while probe.poll() is None and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        if probe.poll() is None:
            probe.kill()
        probe.wait(10)
        answered = probe.returncode == 0 and process.poll() is None
        outcome = Outcome(block, 0 if answered else 1, log.read_text(errors="replace"), time.monotonic() - began)
        self.outcomes.append(outcome)
        return outcome

    def stop(self, port: int) -> None:
        """Ctrl-C to what serves ``port``, then kill it if it has not ended."""
        if port not in self.serving:
            return
        process, _ = self.serving.pop(port)
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGINT)
            try:
                process.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(10)

    def close(self) -> None:
        for port in list(self.serving):
            self.stop(port)

    def log_tail(self) -> str:
        """The last lines of every long-running block's output, for a failure message."""
        return "\n".join(
            f"--- serves {port}:\n" + "\n".join(log.read_text(errors="replace").splitlines()[-30:])
            for port, (_, log) in self.serving.items()
        )
