"""A small HTTP target on loopback for end-to-end firing tests: it records every request it receives
(arrival time, method, path, headers, body) and answers as it is told, per path.

Default answers: a path containing ``fail`` gets ``500`` with a body naming the path; anything else gets
``200 ok``. :meth:`TargetServer.respond` overrides that per path (status, body, delay, and "fail the first
N requests"). Every wait here is bounded by a deadline."""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

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


@dataclass
class Answer:
    """How the target answers one path."""

    status: int = 200
    body: bytes = b"ok"
    delay: float = 0.0  # seconds to wait before answering
    fail_first: int = 0  # answer the first N requests with ``fail_status`` / ``fail_body``
    fail_status: int = 500
    fail_body: bytes = b"failing on purpose"
    headers: dict[str, str] = field(default_factory=dict)  # extra response headers (e.g. Location)
    served: int = 0


@dataclass
class TargetServer:
    """Start with :meth:`start`, stop with :meth:`stop`; ``url(path)`` is the absolute URI of a path."""

    host: str = "127.0.0.1"
    answers: dict[str, Answer] = field(default_factory=dict)
    received: list[Received] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _server: ThreadingHTTPServer | None = None
    _thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------------------------

    def start(self) -> TargetServer:
        target = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                split = urlsplit(self.path)
                request = Received(
                    wall=datetime.now(UTC),
                    monotonic=time.monotonic(),
                    method=self.command,
                    path=split.path,
                    query=split.query,
                    headers={k.lower(): v for k, v in self.headers.items()},
                    body=body,
                )
                status, payload, delay, extra = target._answer_for(request)
                if delay:
                    time.sleep(delay)
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "text/plain; charset=utf-8")
                    self.send_header("Content-Length", str(len(payload)))
                    for name, value in extra.items():
                        self.send_header(name, value)
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(payload)
                except OSError:  # the client gave up (e.g. its timeout): nothing to answer
                    self.close_connection = True

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = _handle

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base's name
                pass

        class QuietServer(ThreadingHTTPServer):
            def handle_error(self, request: object, client_address: object) -> None:
                pass  # a client that went away mid-request (a killed dispatcher) is expected in some tests

        server = QuietServer((self.host, 0), Handler, bind_and_activate=False)
        server.daemon_threads = True
        server.request_queue_size = 256  # many jobs fire at the same instant; do not drop their SYNs
        server.server_bind()
        server.server_activate()
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None

    @property
    def base_url(self) -> str:
        assert self._server is not None, "target not started"
        return f"http://{self.host}:{self._server.server_address[1]}"

    def url(self, path: str) -> str:
        return self.base_url + (path if path.startswith("/") else "/" + path)

    # -- behaviour ---------------------------------------------------------------------------------

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
        with self._lock:
            self.answers[path] = Answer(
                status, _bytes(body), delay, fail_first, fail_status, _bytes(fail_body), dict(headers or {})
            )

    def redirect(self, path: str, to: str, status: int = 302) -> None:
        """Answer ``path`` with a redirect to the path ``to``."""
        self.respond(path, status, b"moved", headers={"Location": self.url(to)})

    def _answer_for(self, request: Received) -> tuple[int, bytes, float, dict[str, str]]:
        with self._lock:
            self.received.append(request)
            answer = self.answers.get(request.path)
            if answer is None:
                if "fail" in request.path:
                    return 500, f"target failure at {request.path}".encode(), 0.0, {}
                return 200, b"ok", 0.0, {}
            answer.served += 1
            if answer.served <= answer.fail_first:
                return answer.fail_status, answer.fail_body, answer.delay, {}
            return answer.status, answer.body, answer.delay, answer.headers

    # -- what arrived ------------------------------------------------------------------------------

    def requests(self, path: str | None = None) -> list[Received]:
        """Requests received so far (for ``path`` only, when given), oldest first."""
        with self._lock:
            return [r for r in self.received if path is None or r.path == path]

    def wait_for(self, count: int, timeout: float, path: str | None = None) -> list[Received]:
        """Wait until at least ``count`` requests (for ``path``) have arrived; AssertionError after
        ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            found = self.requests(path)
            if len(found) >= count:
                return found
            if time.monotonic() >= deadline:
                raise AssertionError(
                    f"expected {count} request(s) to {path or 'the target'} within {timeout:.1f} s, got {len(found)}"
                )
            time.sleep(0.02)


def _bytes(value: bytes | str) -> bytes:
    return value.encode() if isinstance(value, str) else value


def fired_paths(target: TargetServer, prefix: str) -> Counter[str]:
    """How often each path under ``/fire/<prefix>`` was requested."""
    return Counter(r.path for r in target.requests() if r.path.startswith(f"/fire/{prefix}"))
