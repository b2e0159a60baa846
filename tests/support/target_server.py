"""The suite's recording HTTP target on loopback: the package's own ``scheduler_emulator.testing.HttpTarget``
(which records every request and answers as ``respond`` programs it per path), with the suite's defaults and
reading. A path containing ``fail`` gets ``500`` with a body naming the path unless programmed; ``url(path)``
is the absolute URI of a path; requests read back as ``Received`` (path without its query string, arrival
times, lateness). Every wait here is bounded by a deadline."""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass
from datetime import datetime

from scheduler_emulator.testing import HttpTarget, RecordedRequest
from support.times import parse


@dataclass(frozen=True)
class Received:
    """One request as the target saw it."""

    wall: datetime  # UTC arrival time (after the headers and body were read)
    monotonic: float  # time.monotonic() at arrival
    method: str
    path: str  # without the query string
    query: str
    headers: dict[str, str]  # names lower-cased
    body: bytes
    client_port: int  # the sender's end of the connection

    @classmethod
    def of(cls, request: RecordedRequest) -> Received:
        assert request.arrived is not None
        query = request.path.partition("?")[2]
        return cls(
            request.arrived,
            request.monotonic,
            request.method,
            request.route,
            query,
            request.headers,
            request.body,
            request.client_port,
        )

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")

    @property
    def expected_time(self) -> datetime:
        """``x-ms-scheduler-expected-execution-time`` as an aware datetime."""
        value = self.header("x-ms-scheduler-expected-execution-time")
        assert value, f"no x-ms-scheduler-expected-execution-time header on {self.method} {self.path}"
        return parse(value)

    @property
    def lateness(self) -> float:
        """Seconds between the expected execution time and the arrival here."""
        return (self.wall - self.expected_time).total_seconds()


class _FailingPaths(HttpTarget):
    """The kit's target whose unprogrammed paths containing ``fail`` answer 500."""

    def default_answer(self, request: RecordedRequest, index: int) -> tuple[int, bytes, dict[str, str]]:
        if "fail" in request.route:
            return 500, f"target failure at {request.route}".encode(), {}
        return 200, b"ok", {}


class TargetServer:
    """Start with :meth:`start`, stop with :meth:`stop`; ``url(path)`` is the absolute URI of a path."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.kit = _FailingPaths(host=host)
        self._read: list[Received] = []  # the kit's requests read so far, in order
        self._read_lock = threading.Lock()

    def start(self) -> TargetServer:
        self.kit.start()
        return self

    def stop(self) -> None:
        self.kit.stop()

    @property
    def base_url(self) -> str:
        assert self.kit.url, "target not started"
        return self.kit.url

    def url(self, path: str) -> str:
        return self.base_url + (path if path.startswith("/") else "/" + path)

    def respond(
        self,
        path: str,
        status: int = 200,
        body: bytes | str = b"ok",
        delay: float = 0.0,
        fail_first: int = 0,
        fail_status: int = 500,
        fail_body: bytes | str = b"failing on purpose",
        headers: dict[str, str] | None = None,
    ) -> None:
        """How to answer ``path`` from now on."""
        self.kit.respond(
            path,
            status,
            body,
            delay=delay,
            headers=headers,
            fail_first=fail_first,
            fail_status=fail_status,
            fail_body=fail_body,
        )

    def redirect(self, path: str, to: str, status: int = 302) -> None:
        """Answer ``path`` with a redirect to the path ``to``."""
        self.respond(path, status, b"moved", headers={"Location": self.url(to)})

    @property
    def received(self) -> list[Received]:
        """Every request so far, oldest first."""
        recorded = self.kit.requests_to()
        with self._read_lock:
            self._read.extend(Received.of(request) for request in recorded[len(self._read) :])
            return list(self._read)

    def requests(self, path: str | None = None) -> list[Received]:
        """Requests received so far (for ``path`` only, when given), oldest first."""
        return [r for r in self.received if path is None or r.path == path]

    def wait_for(self, count: int, timeout: float, path: str | None = None) -> list[Received]:
        """Wait until at least ``count`` requests (for ``path``) have arrived; AssertionError after
        ``timeout`` seconds."""
        self.kit.wait_for(count, timeout, path)
        return self.requests(path)


def fired_paths(target: TargetServer, prefix: str) -> Counter[str]:
    """How often each path under ``/fire/<prefix>`` was requested."""
    return Counter(r.path for r in target.requests() if r.path.startswith(f"/fire/{prefix}"))
