"""The Http action's timeout bounds the whole attempt: a body that does not come and a chain of slow redirects
both fail as "timed out" once the action timeout has passed since the attempt began, not per request. Against
a raw TCP server on loopback that answers as slowly as each test needs."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

from scheduler_emulator.config import Settings
from scheduler_emulator.dispatcher.actions import FireContext, Outcome
from scheduler_emulator.dispatcher.actions.http import HttpAction
from scheduler_emulator.dispatcher.actions.session import SharedSession
from scheduler_emulator.schemas.job import HttpRequest

TIMEOUT = 1.0
Answer = Callable[[str, asyncio.StreamWriter], Awaitable[None]]


async def _attempt(answer: Answer, path: str = "/", timeout: float = TIMEOUT) -> tuple[Outcome, float, list[str]]:
    """One attempt of a GET job on ``path`` against a server that answers each request with ``answer``; the
    outcome, how long it took, and the paths the server was asked for."""
    asked: list[str] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                requested = head.split(b" ", 2)[1].decode()
                asked.append(requested)
                await answer(requested, writer)
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass  # the client went away, or the test is over
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    shared = SharedSession(Settings().outbound.policy, timeout)
    action = HttpAction(Settings().outbound, shared)
    context = FireContext(
        execution_tag="tag",
        client_request_id="request",
        expected_time=datetime.now(UTC),
        job_name="job",
        collection_name="collection",
        region="West US",
    )
    request = HttpRequest.model_validate({"uri": f"http://127.0.0.1:{port}{path}", "method": "GET"})
    loop = asyncio.get_running_loop()
    if timeout >= 5:  # start just after a whole second of the loop's clock (see test_a_long_timeout_is_exact)
        await asyncio.sleep((1.1 - loop.time() % 1) % 1)
    began = time.monotonic()
    try:
        outcome = await asyncio.wait_for(action.execute(request, context), timeout=timeout + 10)
    finally:
        took = time.monotonic() - began
        await shared.close()
        server.close()
    return outcome, took, asked


def test_a_body_that_does_not_come_times_out() -> None:
    async def no_body(path: str, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n")
        await writer.drain()
        await asyncio.sleep(TIMEOUT + 5)

    outcome, took, _ = asyncio.run(_attempt(no_body))
    assert not outcome.succeeded and "timed out" in outcome.message, outcome
    assert TIMEOUT - 0.05 <= took < TIMEOUT + 1.0, took


def test_a_long_timeout_is_exact() -> None:
    """aiohttp rounds a deadline of 5 s or more up to the next whole second of the loop's clock unless told not
    to: the attempt starts just after a whole second, so a rounded deadline would come ~0.9 s late."""

    async def no_body(path: str, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n")
        await writer.drain()
        await asyncio.sleep(15)

    outcome, took, _ = asyncio.run(_attempt(no_body, timeout=5.0))
    assert not outcome.succeeded and "timed out" in outcome.message, outcome
    assert 4.95 <= took < 5.5, took


def test_slow_redirects_share_one_timeout() -> None:
    """Each hop answers within the timeout, but the chain does not: the attempt stops when the timeout has
    passed since it began, on the third hop."""
    timeout = 2.0
    hop = 0.9  # the third hop would end at 2.7 s

    async def slow_redirects(path: str, writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(hop)
        step = int(path.strip("/") or 0)
        if step < 4:
            writer.write(f"HTTP/1.1 302 Found\r\nLocation: /{step + 1}\r\nContent-Length: 0\r\n\r\n".encode())
        else:
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        await writer.drain()

    outcome, took, asked = asyncio.run(_attempt(slow_redirects, "/0", timeout=timeout))
    assert not outcome.succeeded and "timed out" in outcome.message, outcome
    # Cut at the timeout, not when the third hop answers (2.7 s): 0.5 s of slack for the loop's timer on a
    # loaded machine (two CPU hogs on two cores).
    assert timeout - 0.05 <= took < timeout + 0.5, took
    assert asked == ["/0", "/1", "/2"], asked


def test_fast_redirects_within_the_timeout_succeed() -> None:
    async def quick_redirects(path: str, writer: asyncio.StreamWriter) -> None:
        step = int(path.strip("/") or 0)
        if step < 3:
            redirect = f"HTTP/1.1 307 Temporary Redirect\r\nLocation: /{step + 1}\r\nContent-Length: 0\r\n\r\n"
            writer.write(redirect.encode())
        else:
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        await writer.drain()

    outcome, took, asked = asyncio.run(_attempt(quick_redirects, "/0"))
    assert outcome.succeeded, outcome
    assert asked == ["/0", "/1", "/2", "/3"]
