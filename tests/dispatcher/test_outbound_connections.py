"""The Http action reuses kept-alive connections and opens at most CONNECTIONS_PER_HOST to one target: a burst of
fires that come due together (or late, all at once) waits for the connections it has rather than opening one
per fire, every fire is still answered, and a second burst opens none. Against a raw TCP server on loopback
that counts the connections it accepts."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from scheduler_emulator.config import Settings
from scheduler_emulator.dispatcher.actions import FireContext
from scheduler_emulator.dispatcher.actions.http import HttpAction
from scheduler_emulator.dispatcher.actions.session import CONNECTIONS_PER_HOST, SharedSession
from scheduler_emulator.schemas.job import HttpRequest

BURST = 3 * CONNECTIONS_PER_HOST


def context(number: int) -> FireContext:
    """The fire context of the test's fire ``number``."""
    return FireContext(
        execution_tag=f"tag-{number}",
        client_request_id=f"request-{number}",
        expected_time=datetime.now(UTC),
        job_name=f"job-{number}",
        collection_name="collection",
        region="West US",
    )


async def _bursts() -> tuple[list[int], list[bool]]:
    """Two bursts of BURST fires at one server; the connections it had accepted after each, and whether each
    fire succeeded."""
    accepted = 0

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal accepted
        accepted += 1
        try:
            while True:
                await reader.readuntil(b"\r\n\r\n")
                await asyncio.sleep(0.005)  # long enough for the fires of a burst to overlap
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass  # the client went away, or the test is over
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0, backlog=BURST)
    port = server.sockets[0].getsockname()[1]
    shared = SharedSession(Settings().outbound.policy, 30.0)
    action = HttpAction(Settings().outbound, shared)
    request = HttpRequest.model_validate({"uri": f"http://127.0.0.1:{port}/", "method": "GET"})

    counts: list[int] = []
    succeeded: list[bool] = []
    try:
        for _ in range(2):
            fires = [action.execute(request, context(number)) for number in range(BURST)]
            outcomes = await asyncio.wait_for(asyncio.gather(*fires), timeout=60)
            succeeded += [outcome.succeeded for outcome in outcomes]
            counts.append(accepted)
    finally:
        await shared.close()
        server.close()
    return counts, succeeded


def test_a_burst_of_fires_to_one_target_shares_a_bounded_set_of_kept_alive_connections() -> None:
    counts, succeeded = asyncio.run(_bursts())
    assert succeeded == [True] * (2 * BURST)
    first, after_second = counts
    assert 1 <= first <= CONNECTIONS_PER_HOST, counts
    assert after_second == first, "the second burst reused the first one's connections"


async def _dropped_on_reuse(method: str) -> tuple[int, list[bool]]:
    """Two fires, one after the other, over one kept-alive connection; the server reads the second request whole,
    then closes the connection without answering. How many requests it received, and whether each fire succeeded."""
    received = 0

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal received
        try:
            for answered in range(2):
                await reader.readuntil(b"\r\n\r\n")
                received += 1
                if answered:
                    return  # the request arrived (the target acted on it), and the connection drops unanswered
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    shared = SharedSession(Settings().outbound.policy, 30.0)
    action = HttpAction(Settings().outbound, shared)
    request = HttpRequest.model_validate({"uri": f"http://127.0.0.1:{port}/", "method": method})
    succeeded: list[bool] = []
    try:
        for number in range(2):
            outcome = await asyncio.wait_for(action.execute(request, context(number)), timeout=60)
            succeeded.append(outcome.succeeded)
    finally:
        await shared.close()
        server.close()
    return received, succeeded


def test_a_request_whose_kept_alive_connection_drops_unanswered_is_not_sent_again() -> None:
    # aiohttp sends an idempotent request (GET, PUT, DELETE...) a second time by itself when a reused connection
    # drops; for a job that is a second fire its retry policy never asked for (seen as a duplicate under load).
    for method in ("GET", "PUT", "DELETE"):
        received, succeeded = asyncio.run(_dropped_on_reuse(method))
        assert succeeded == [True, False], method
        assert received == 2, f"{method}: the dropped request was sent {received - 1} times"
