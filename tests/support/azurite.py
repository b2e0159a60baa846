"""Azurite's queue service (the Azure Storage emulator, from npm: ``package.json`` pins it and
``make test`` installs it with ``npm ci``) run on a free loopback port for the tests, plus what the
tests need around it: the well-known ``devstoreaccount1`` account, queues, SAS tokens and reading
messages back, all with the official ``azure-storage-queue`` SDK.

:func:`start_azurite` is meant for a session fixture. When Node.js or the npm install is missing it
fails the test in CI (``CI=true``) with what to do, and skips it locally."""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from azure.core.credentials import AzureNamedKeyCredential
from azure.storage.queue import (
    AccountSasPermissions,
    QueueSasPermissions,
    QueueServiceClient,
    ResourceTypes,
    generate_account_sas,
    generate_queue_sas,
)

from support.environment import REPO, missing
from support.server import stop_process

AZURITE_QUEUE = REPO / "node_modules" / ".bin" / "azurite-queue"

# The storage emulators' documented development account (public, the same in every installation).
ACCOUNT = "devstoreaccount1"
ACCOUNT_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="

START_TIMEOUT = 30.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def closed_port() -> int:
    """A loopback port with nothing listening (connections to it are refused)."""
    return free_port()


@dataclass
class Azurite:
    """A running ``azurite-queue`` process serving ``devstoreaccount1`` at :attr:`endpoint`."""

    port: int
    process: subprocess.Popen[str]
    workspace: Path
    output: list[str] = field(default_factory=list)

    @property
    def endpoint(self) -> str:
        """The account's queue service URL (path style, as Azurite serves it)."""
        return f"http://127.0.0.1:{self.port}/{ACCOUNT}"

    @property
    def log(self) -> str:
        return "\n".join(self.output)

    def stop(self) -> None:
        stop_process(self.process, 10)
        shutil.rmtree(self.workspace, ignore_errors=True)

    # -- the SDK, with the account key -----------------------------------------------------------------

    def service(self) -> QueueServiceClient:
        return QueueServiceClient(self.endpoint, credential=AzureNamedKeyCredential(ACCOUNT, ACCOUNT_KEY))

    def create_queue(self, name: str) -> str:
        with self.service() as service:
            service.create_queue(name)
        return name

    def messages(self, queue: str, limit: int = 32) -> list[str]:
        """Take up to ``limit`` messages off ``queue`` (received and deleted), oldest first."""
        with self.service() as service:
            client = service.get_queue_client(queue)
            taken = []
            for message in client.receive_messages(messages_per_page=32, max_messages=limit):
                taken.append(message.content)
                client.delete_message(message)
            return taken

    def wait_messages(self, queue: str, count: int, timeout: float) -> list[str]:
        """Take messages off ``queue`` until ``count`` have arrived; AssertionError after ``timeout`` s."""
        deadline = time.monotonic() + timeout
        taken: list[str] = []
        while True:
            taken += self.messages(queue)
            if len(taken) >= count:
                return taken
            if time.monotonic() >= deadline:
                raise AssertionError(
                    f"expected {count} message(s) on queue '{queue}' within {timeout:.1f} s, got {len(taken)}: {taken}"
                )
            time.sleep(0.1)

    # -- SAS tokens (without a leading '?', as the SDK returns them) --------------------------------------

    @staticmethod
    def queue_sas(
        queue: str,
        *,
        add: bool = True,
        read: bool = False,
        expires_in: timedelta = timedelta(hours=1),
        start: datetime | None = None,
    ) -> str:
        """A service SAS for one queue."""
        now = datetime.now(UTC)
        return generate_queue_sas(
            ACCOUNT,
            queue,
            ACCOUNT_KEY,
            permission=QueueSasPermissions(add=add, read=read),
            expiry=now + expires_in,
            start=start if start is not None else now - timedelta(minutes=5),
        )

    @staticmethod
    def account_sas(*, add: bool = True, expires_in: timedelta = timedelta(hours=1)) -> str:
        """An account SAS for the queue service, valid for every queue."""
        now = datetime.now(UTC)
        return generate_account_sas(
            ACCOUNT,
            ACCOUNT_KEY,
            resource_types=ResourceTypes(service=True, container=True, object=True),
            permission=AccountSasPermissions(add=add, read=True),
            expiry=now + expires_in,
            start=now - timedelta(minutes=5),
        )


def start_azurite(attempts: int = 3) -> Azurite:
    """Start ``azurite-queue`` on a free loopback port, in memory, and wait until it listens."""
    if shutil.which("node") is None:
        missing(
            "Node.js (node) is needed to run Azurite for the StorageQueue tests and is not on PATH: "
            "install Node.js 20 or later with npm, then run `make test` (it runs `npm ci`)"
        )
    if not AZURITE_QUEUE.exists():
        missing(
            f"Azurite is needed for the StorageQueue tests and {AZURITE_QUEUE} does not exist: "
            f"run `npm ci --no-audit --no-fund` in {REPO} (`make test` does it)"
        )
    problems = []
    for _ in range(attempts):
        try:
            return _start_once(free_port())
        except RuntimeError as exc:  # e.g. the port was taken meanwhile: try another
            problems.append(str(exc))
    raise RuntimeError("Azurite did not start:\n" + "\n---\n".join(problems))


def _start_once(port: int) -> Azurite:
    workspace = Path(tempfile.mkdtemp(prefix="azurite-"))
    process = subprocess.Popen(
        [
            str(AZURITE_QUEUE),
            "--queueHost",
            "127.0.0.1",
            "--queuePort",
            str(port),
            "--inMemoryPersistence",
            "--skipApiVersionCheck",
            "--disableTelemetry",
            "--loose",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        cwd=workspace,
    )
    azurite = Azurite(port, process, workspace)
    listening, exited = threading.Event(), threading.Event()

    def pump() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            azurite.output.append(line.rstrip("\n"))
            if "successfully listens on" in line:
                listening.set()
        exited.set()

    threading.Thread(target=pump, daemon=True).start()
    deadline = time.monotonic() + START_TIMEOUT
    while not listening.wait(0.1) and not exited.is_set() and time.monotonic() < deadline:
        pass
    if not listening.is_set() or process.poll() is not None:
        azurite.stop()
        raise RuntimeError(f"azurite-queue on port {port} did not start:\n{azurite.log}")
    return azurite
