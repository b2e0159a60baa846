"""A load of small HTTP/1.1 requests over kept-alive raw-socket connections, in the shapes that stress a server's
connection handling: one request at a time, several pipelined in one write, a head and its body in separate
writes, and pauses near the server's keep-alive timeout between requests. It counts every request sent and every
answer; a request the server closed the connection on without answering is listed.

A connection the server closed while it was idle (its keep-alive timeout) is not a lost request: like any HTTP
client, the worker sees the end of the connection before reusing it and opens a new one (RFC 9112 §9.3.1)."""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from dataclasses import dataclass, field


@dataclass
class LoadResult:
    sent: int = 0
    answered: int = 0
    statuses: Counter[int] = field(default_factory=Counter)
    unanswered: list[str] = field(default_factory=list)  # what was sent, and what happened
    idle_closes: int = 0  # connections the server closed while idle, seen before reuse
    connections: int = 0
    idles: int = 0
    pipelined: int = 0
    split: int = 0


@dataclass(frozen=True)
class LoadShape:
    requests: int = 20_000
    connections: int = 48
    keep_alive: float = 1.5  # the server's --keep-alive-timeout
    idle_share: float = 0.004  # of the rounds: pause this close to the timeout before the next request
    idle_near: tuple[float, float] = (0.6, 0.85)  # pauses as shares of the keep-alive timeout
    pipeline_share: float = 0.2
    split_share: float = 0.1
    seed: int = 29


def _requests(path: str, host: str, count: int, rng: random.Random) -> list[tuple[bytes, bytes]]:
    """(head, body) pairs: health checks, and PUTs whose small body is read and refused (400, no store work)."""
    made = []
    for _ in range(count):
        if rng.random() < 0.5:
            made.append((f"GET /_emulator/health HTTP/1.1\r\nHost: {host}\r\n\r\n".encode(), b""))
        else:
            body = b'{"notProperties": %d}' % rng.randrange(10**6)
            head = (
                f"PUT {path}?api-version=2016-03-01 HTTP/1.1\r\nHost: {host}\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
            )
            made.append((head.encode(), body))
    return made


async def _read_answer(reader: asyncio.StreamReader) -> int:
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    if length:
        await reader.readexactly(length)
    return status


async def _worker(
    host: str, port: int, path: str, quota: int, shape: LoadShape, rng: random.Random, result: LoadResult
) -> None:
    reader: asyncio.StreamReader | None = None
    writer: asyncio.StreamWriter | None = None
    left = quota
    for _ in range(quota * 2 + 10):  # bounded: every round sends at least one request, or reconnects once
        if left <= 0:
            break
        if reader is not None and reader.at_eof():  # closed by the server while idle: open another
            result.idle_closes += 1
            assert writer is not None
            writer.close()
            reader = writer = None
        if reader is None or writer is None:
            reader, writer = await asyncio.open_connection(host, port)
            result.connections += 1
        draw = rng.random()
        if draw < shape.pipeline_share:
            batch = _requests(path, host, min(left, rng.randint(2, 8)), rng)
            writer.write(b"".join(head + body for head, body in batch))
            result.pipelined += len(batch)
        elif draw < shape.pipeline_share + shape.split_share:
            batch = _requests(path, host, 1, rng)
            head, body = batch[0]
            writer.write(head)
            await writer.drain()
            await asyncio.sleep(rng.random() * 0.002)
            writer.write(body)
            result.split += 1
        else:
            batch = _requests(path, host, 1, rng)
            writer.write(batch[0][0] + batch[0][1])
        await writer.drain()
        result.sent += len(batch)
        left -= len(batch)
        for index, (head, _) in enumerate(batch):
            try:
                status = await asyncio.wait_for(_read_answer(reader), 60)
            except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError) as exc:
                what = head.split(b"\r\n", 1)[0].decode()
                result.unanswered.extend(
                    f"{what} (request {i + 1} of {len(batch)} written together): {type(exc).__name__}"
                    for i in range(index, len(batch))
                )
                writer.close()
                reader = writer = None
                break
            result.answered += 1
            result.statuses[status] += 1
        if reader is not None and rng.random() < shape.idle_share:
            low, high = shape.idle_near
            result.idles += 1
            await asyncio.sleep(shape.keep_alive * rng.uniform(low, high))
    if writer is not None:
        writer.close()


async def run_load(host: str, port: int, path: str, shape: LoadShape) -> LoadResult:
    """Send ``shape.requests`` requests over ``shape.connections`` concurrent kept-alive connections."""
    result = LoadResult()
    rng = random.Random(shape.seed)
    share, extra = divmod(shape.requests, shape.connections)
    await asyncio.gather(
        *(
            _worker(host, port, path, share + (1 if i < extra else 0), shape, random.Random(rng.random()), result)
            for i in range(shape.connections)
        )
    )
    return result
