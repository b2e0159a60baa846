"""Every request over kept-alive connections is answered: tens of thousands of small requests, pipelined, with
heads and bodies in separate writes and clients pausing near the keep-alive timeout, while the server is kept busy
by the load itself (issue 29: a bulk client saw connections closed without an answer). And a client that really
goes away mid-body is logged at info, not as an unhandled error.

``SCHEDULER_FAULTS_LONG=1`` (``make faults``) runs the load ten times larger."""

from __future__ import annotations

import asyncio
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
import pytest
from support.databases import PostgresDatabase, require_postgres
from support.keep_alive_load import LoadShape, run_load
from support.names import Names
from support.server import EmulatorPool, ServerProcess
from support.waiting import wait_until

LONG = os.environ.get("SCHEDULER_FAULTS_LONG", "") not in ("", "0")
KEEP_ALIVE = 1.5


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with EmulatorPool() as pool:
        yield pool.start(
            tmp_path_factory.mktemp("data"),
            "--no-dispatcher",
            "--keep-alive-timeout",
            str(KEEP_ALIVE),
            in_memory=True,
            log_level="info",
        )


def test_every_request_over_kept_alive_connections_is_answered(server: ServerProcess) -> None:
    split = urlsplit(server.url)
    assert split.hostname and split.port
    shape = LoadShape(requests=200_000 if LONG else 20_000, keep_alive=KEEP_ALIVE)
    began = time.monotonic()
    result = asyncio.run(run_load(split.hostname, split.port, Names().job_path("load"), shape))
    took = time.monotonic() - began
    print(
        f"\n{result.sent} requests in {took:.1f} s over {result.connections} connections ({result.pipelined} "
        f"pipelined, {result.split} split, {result.idles} pauses near the keep-alive timeout, {result.idle_closes} "
        f"idle connections closed by the server): {result.answered} answered"
    )
    assert not result.unanswered, f"{len(result.unanswered)} unanswered, e.g. {result.unanswered[:5]}"
    assert result.sent == shape.requests and result.answered == shape.requests
    assert set(result.statuses) == {200, 400}, result.statuses  # health, and the refused bodies (read, then 400)
    assert result.idles > 0 and result.pipelined > 0 and result.split > 0
    assert "unhandled error" not in server.log and "Exception in ASGI application" not in server.log


def test_a_client_gone_mid_body_is_logged_at_info(server: ServerProcess) -> None:
    split = urlsplit(server.url)
    assert split.hostname and split.port
    path = Names().job_path("gone") + "?api-version=2016-03-01"
    with socket.create_connection((split.hostname, split.port)) as client:
        client.sendall(
            f"PUT {path} HTTP/1.1\r\nHost: {split.hostname}\r\nContent-Type: application/json\r\n"
            'Content-Length: 1000\r\n\r\n{"properties": '.encode()
        )
        time.sleep(0.2)  # the server is reading the body
    line = wait_until(
        lambda: next((entry for entry in server.output if "client disconnected before sending" in entry), None),
        15,
        "the disconnect to be logged",
    )
    assert '"level": "info"' in line and path.split("?")[0] in line
    assert "unhandled error" not in server.log


def test_a_pipelined_body_waiting_its_turn_is_not_cut_off(emulators: EmulatorPool, tmp_path: Path) -> None:
    """uvicorn stops reading while a pipelined request waits for the answer before it: the body deadline must not
    run then. The first request is held (its collection's write lock, taken here) for longer than the body
    timeout, while the second's body has only partly arrived; both are answered once the lock goes."""
    require_postgres()
    database = PostgresDatabase().create()
    try:
        server = emulators.start(
            tmp_path, "--no-dispatcher", "--body-timeout", "1", database_url=database.url, log_level="warning"
        )
        split = urlsplit(server.url)
        assert split.hostname and split.port
        names = Names()
        body = b'{"location": "westus"}'

        def put(path: str) -> bytes:
            return (
                f"PUT {path}?api-version=2016-03-01 HTTP/1.1\r\nHost: {split.hostname}\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
            ).encode()

        second = Names(subscription=names.subscription)
        with psycopg.connect(database.url) as holder, socket.create_connection((split.hostname, split.port)) as client:
            holder.execute(
                "SELECT pg_advisory_xact_lock(hashtext(%s))", (f"subscription:{names.subscription.lower()}",)
            )
            client.sendall(put(names.collection_path) + body + put(second.collection_path) + body[:5])
            time.sleep(2.5)  # over twice the body timeout: the first waits for the lock, the second for its turn
            holder.commit()
            client.sendall(body[5:])
            client.settimeout(30)
            answers = _read_answers(client, 2)
        assert [status for status, _ in answers] == [201, 201], answers
    finally:
        emulators.stop_all()
        database.drop()


def _read_answers(client: socket.socket, count: int) -> list[tuple[int, bytes]]:
    """``count`` responses read from ``client`` (each with a Content-Length), or fewer if it is closed."""
    buffer, answers = b"", []
    while len(answers) < count:
        head_end = buffer.find(b"\r\n\r\n")
        if head_end >= 0:
            head = buffer[:head_end]
            length = next(
                (
                    int(line.split(b":", 1)[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                ),
                0,
            )
            if len(buffer) >= head_end + 4 + length:
                answers.append((int(head.split(b" ", 2)[1]), buffer[head_end + 4 : head_end + 4 + length]))
                buffer = buffer[head_end + 4 + length :]
                continue
        chunk = client.recv(65536)
        if not chunk:
            break
        buffer += chunk
    return answers
