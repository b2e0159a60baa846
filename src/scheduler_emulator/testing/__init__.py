"""Test your own code against the emulator (docs/testing-kit.md, docs/reference/test-support.md#the-test-kit).

``Emulator`` starts the service as you would run it (``python -m scheduler_emulator`` with your flags, in a
subprocess, on a free port with a temporary data directory) or attaches to a running one, and drives its virtual
clock; ``HttpTarget`` records the requests jobs send. The pytest plugin (``scheduler_emulator.testing.plugin``,
registered on install) offers both as fixtures.

    with Emulator(clock="virtual") as emulator, HttpTarget() as target:
        ...create a daily job whose action calls target.url...
        emulator.advance(days=3)
        assert len(target.requests) == 3

The kit speaks to the emulator only over HTTP, as any client does: it imports nothing else of the package
(tests/test_layering.py), so loading the plugin costs a test run nothing of the service.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import IO, Any, Protocol
from urllib.error import HTTPError
from urllib.parse import quote, urlsplit
from urllib.request import Request, urlopen

__all__ = ["Answer", "Emulator", "EmulatorError", "HttpTarget", "RecordedRequest"]

API_VERSION = "2016-03-01"
DEFAULT_SUBSCRIPTION = "00000000-0000-0000-0000-000000000000"
START_TIMEOUT = 60.0  # seconds: the longest wait for a start to answer its health check
STOP_GRACE = 15.0  # seconds between SIGTERM and SIGKILL when stopping
_HEALTH_POLL = 0.02  # seconds between two health checks while it starts


class EmulatorError(RuntimeError):
    """The emulator refused a call (its ARM error in ``code`` and ``message``) or could not start."""

    def __init__(self, message: str, status: int = 0, code: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.code = code


class _Process(Protocol):
    """What the kit uses of the process it started (``subprocess.Popen``'s names)."""

    @property
    def stdout(self) -> IO[str] | None: ...

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...

    def terminate(self) -> None: ...

    def kill(self) -> None: ...


class Emulator:
    """The emulator for one test session, started as ``python -m scheduler_emulator`` is run: a context manager
    that starts it (``start``: returns once ``GET /_emulator/health`` answers 200) and on exit stops it (SIGTERM,
    SIGKILL after 15 s) and deletes its temporary data directory. ``Emulator.attach(url)`` uses one already
    running instead; nothing is started or stopped.

    - ``clock``: ``"virtual"`` (time moves only through ``advance``/``set_time``) or ``"real"`` (``--clock``);
      ``clock_start``: the virtual clock's first time (``--clock-start``; a datetime or ISO-8601 text).
    - ``database_url``: its store (``--database-url``; default SQLite in the temporary data directory;
      processes given one PostgreSQL URL share it); ``https``: serve HTTPS with a self-signed certificate, which
      ``call``, ``history`` and ``sdk_client`` trust (``cert_path``).
    - ``args``: any other flags of the command line (docs/flags.md), after the kit's own
      (``--port 0 --data-dir <temporary> --clock … --log-level warning``), so they win;
      ``env``: environment variables added to this process's for it (e.g. ``SCHEDULER_SECRET_KEY``).
    - ``token``: the bearer token the kit's calls and ``sdk_client`` send (the emulator's ``--auth-token``);
      ``subscription_id``: the default of ``history`` and ``sdk_client``.
    - ``start_timeout``: how long a start may take to answer its health check (seconds).

    ``output`` (and ``log``) is every line it printed, kept after ``stop``."""

    def __init__(
        self,
        clock: str = "virtual",
        *,
        clock_start: datetime | str | None = None,
        args: Iterable[str] = (),
        env: dict[str, str] | None = None,
        token: str | None = None,
        subscription_id: str = DEFAULT_SUBSCRIPTION,
        database_url: str | None = None,
        https: bool = False,
        start_timeout: float = START_TIMEOUT,
    ) -> None:
        self.clock = clock
        self.clock_start = clock_start
        self.args = list(args)
        self.env = env or {}
        self.token = token
        self.subscription_id = subscription_id
        self.database_url = database_url
        self.https = https
        self.start_timeout = start_timeout
        self.cert_path: str | None = None  # the self-signed certificate's file, under https
        self.url = ""
        self._process: _Process | None = None
        self._data_dir: str | None = None
        self._output: list[str] = []

    @classmethod
    def attach(cls, url: str, token: str | None = None) -> Emulator:
        """An emulator already running at ``url`` (e.g. a docker-compose service); nothing is started."""
        emulator = cls(token=token)
        emulator.url = url.rstrip("/")
        return emulator

    # -- lifecycle ---------------------------------------------------------------------------------

    def start(self) -> Emulator:
        """Start the emulator and return once its health check answers 200; EmulatorError (with the end of its
        output) when it exits first or is not healthy within ``start_timeout``."""
        if self.url:
            return self
        deadline = time.monotonic() + self.start_timeout
        environment = {**os.environ, "PYTHONUNBUFFERED": "1", **self.env}
        process = self._process = self._launch(self._arguments(), environment)
        listening = threading.Event()

        def pump() -> None:
            assert process.stdout is not None
            for line in process.stdout:
                self._output.append(line.rstrip("\n"))
                if match := re.search(r"HTTPS certificate .*: (\S+)$", line.strip()):
                    self.cert_path = match.group(1)
                if not listening.is_set() and (match := re.search(r"Listening on (\S+)", line)):
                    self.url = match.group(1)
                    listening.set()
            listening.set()

        threading.Thread(target=pump, daemon=True).start()
        problem = None
        if not listening.wait(max(0.0, deadline - time.monotonic())):
            problem = f"did not listen within {self.start_timeout:g} s"
        elif not self.url:  # its output ended before it said where it listens
            problem = "exited before listening"
        elif not self._healthy(process, deadline):
            problem = "exited before it was healthy" if process.poll() is not None else "was not healthy in time"
        if problem is not None:
            self.stop()
            raise EmulatorError(f"the emulator {problem}:\n" + "\n".join(self._output[-30:]))
        return self

    def _launch(self, arguments: Sequence[str], environment: dict[str, str]) -> _Process:
        """Run ``python -m scheduler_emulator ARGUMENTS``, its standard output and error one text pipe. The project's
        own suite overrides this, ``_arguments`` and ``_healthy`` (tests/support/server.py's ``CommandEmulator``)."""
        return subprocess.Popen(
            [sys.executable, "-m", "scheduler_emulator", *arguments],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=environment,
        )

    def _arguments(self) -> list[str]:
        """The emulator's command line after ``python -m scheduler_emulator``."""
        self._data_dir = tempfile.mkdtemp(prefix="scheduler-emulator-")
        arguments = ["--port", "0", "--data-dir", self._data_dir, "--clock", self.clock, "--log-level", "warning"]
        if self.database_url is not None:
            arguments += ["--database-url", self.database_url]
        if self.https:
            arguments.append("--https")
        if self.clock_start is not None:
            start = self.clock_start
            arguments += ["--clock-start", start.isoformat() if isinstance(start, datetime) else start]
        return arguments + self.args

    def _healthy(self, process: _Process, deadline: float) -> bool:
        """Whether ``GET /_emulator/health`` answers 200 before ``deadline`` while ``process`` runs."""
        for _ in range(1_000_000):  # bounded: each round waits ``_HEALTH_POLL`` at least, until the deadline
            if process.poll() is not None or time.monotonic() >= deadline:
                return False
            try:
                request = Request(self.url + "/_emulator/health")
                wait = max(0.1, deadline - time.monotonic())
                with urlopen(request, timeout=wait, context=self._readiness_tls()) as answer:  # noqa: S310 - its URL
                    if answer.status == 200:
                        return True
            except OSError:  # HTTPError and URLError too
                pass  # not ready yet (503 while its store cannot be reached), or the connection was refused
            time.sleep(_HEALTH_POLL)
        return False

    def stop(self) -> None:
        """Stop the process it started (SIGTERM, then SIGKILL after ``STOP_GRACE`` seconds) and delete the temporary
        data directory; an attached emulator is left running and stays attached."""
        if self._process is not None:
            if self._process.poll() is None:
                self._process.terminate()
                try:
                    self._process.wait(STOP_GRACE)
                except subprocess.TimeoutExpired:
                    self._process.kill()
                    self._process.wait(5)
            self.url = ""
        if self._data_dir is not None:
            shutil.rmtree(self._data_dir, ignore_errors=True)
            self._data_dir = None

    @property
    def output(self) -> list[str]:
        """Every line the emulator printed (standard output and error), as it prints them."""
        return self._output

    @property
    def log(self) -> str:
        return "\n".join(self._output)

    def __enter__(self) -> Emulator:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.stop()

    # -- the virtual clock and the store -----------------------------------------------------------

    def now(self) -> datetime:
        """The emulator's current (virtual) time."""
        return _parse_time(self.call("GET", "/_emulator/clock")["now"])

    def advance(self, duration: timedelta | str | None = None, **parts: float) -> dict[str, Any]:
        """Move virtual time on by ``duration`` (a timedelta, an ISO-8601 duration, or ``days=3`` style
        keywords); every occurrence due meanwhile runs first. Returns ``{"now", "occurrences", "attempts",
        "failed"}``."""
        if duration is None:
            duration = timedelta(**parts)
        text = duration if isinstance(duration, str) else _iso_duration(duration)
        result: dict[str, Any] = self.call("POST", "/_emulator/clock", {"advance": text})
        return result

    def set_time(self, moment: datetime) -> dict[str, Any]:
        """Move virtual time on to ``moment`` (timezone-aware), running what falls due on the way."""
        if moment.tzinfo is None:
            raise ValueError("set_time needs a timezone-aware datetime")
        result: dict[str, Any] = self.call("POST", "/_emulator/clock", {"to": moment.isoformat()})
        return result

    def reset(self) -> None:
        """Remove every collection, job and history entry (the clock keeps its time)."""
        self.call("POST", "/_emulator/reset")

    def history(
        self, resource_group: str, collection: str, job: str, subscription_id: str | None = None
    ) -> list[dict[str, Any]]:
        """The job's history entries as the API returns them, newest first (every page)."""
        subscription = subscription_id or self.subscription_id
        path = (
            f"/subscriptions/{quote(subscription)}/resourceGroups/{quote(resource_group)}/providers/"
            f"Microsoft.Scheduler/jobCollections/{quote(collection)}/jobs/{quote(job)}/history"
        )
        entries: list[dict[str, Any]] = []
        page: dict[str, Any] = self.call("GET", path + f"?api-version={API_VERSION}")
        for _ in range(1000):  # bounded: at most 1000 entries per job are kept
            entries += page.get("value", [])
            link = page.get("nextLink")
            if not link:
                break
            parts = urlsplit(link)
            page = self.call("GET", f"{parts.path}?{parts.query}")
        return entries

    def sdk_client(self, subscription_id: str | None = None) -> Any:
        """A configured ``azure.mgmt.scheduler.SchedulerManagementClient`` (needs ``azure-mgmt-scheduler``)."""
        try:
            from azure.core.credentials import AccessToken
            from azure.core.pipeline.policies import SansIOHTTPPolicy
            from azure.mgmt.scheduler import SchedulerManagementClient
        except ImportError as exc:  # pragma: no cover - depends on what the user installed
            raise EmulatorError("sdk_client needs azure-mgmt-scheduler installed") from exc
        token = self.token

        class _Credential:
            def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:
                return AccessToken(token or "emulator", int(time.time()) + 3600)

        class _Bearer(SansIOHTTPPolicy):  # type: ignore[type-arg]
            """The token as a bearer header, over plain HTTP too (azure-core's own policy insists on TLS)."""

            def on_request(self, request: Any) -> None:
                if token:
                    request.http_request.headers["Authorization"] = f"Bearer {token}"

        return SchedulerManagementClient(
            _Credential(),
            subscription_id or self.subscription_id,
            base_url=self.url,
            authentication_policy=_Bearer(),
            retry_total=0,
            connection_verify=self.cert_path or True,
        )

    # -- plumbing ----------------------------------------------------------------------------------

    def call(self, method: str, path: str, body: Any = None) -> Any:
        """One request to the emulator; its JSON answer (None when empty); EmulatorError on 4xx/5xx."""
        if not self.url:
            raise EmulatorError("the emulator is not running (use it as a context manager, or start())")
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"} if data is not None else {}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        request = Request(self.url + path, data=data, method=method, headers=headers)
        try:
            with urlopen(request, timeout=600, context=self._tls()) as response:  # noqa: S310 - the emulator's URL
                raw = response.read()
        except HTTPError as exc:
            raw = exc.read()
            try:
                error = json.loads(raw)["error"]
                raise EmulatorError(
                    f"{exc.code} {error['code']}: {error['message']}", exc.code, error["code"]
                ) from None
            except (ValueError, KeyError, TypeError):
                raise EmulatorError(f"{exc.code}: {raw[:500]!r}", exc.code) from None
        return json.loads(raw) if raw else None

    def _readiness_tls(self) -> ssl.SSLContext | None:
        """What the health check during a start uses over HTTPS: no verification. It asks only whether the process
        this kit started, at the address it printed, answers; no token is sent, and the certificate may be one the
        user gave (``--cert``) that only their own clients trust."""
        if not self.url.startswith("https:"):
            return None
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        return context

    def _tls(self) -> ssl.SSLContext | None:
        """What trusts this emulator's self-signed certificate (None: the defaults)."""
        return ssl.create_default_context(cafile=self.cert_path) if self.cert_path else None


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str  # as sent, with its query string
    headers: dict[str, str]  # names in lower case
    body: bytes
    arrived: datetime | None = None  # UTC, once the headers and body were read
    monotonic: float = 0.0  # time.monotonic() at arrival (for gaps between requests)
    client_port: int = 0  # the sender's end of the connection (which process sent it: /proc/net/tcp names it)

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())

    @property
    def route(self) -> str:
        """The path without its query string (what ``respond`` and ``requests_to`` match)."""
        return urlsplit(self.path).path

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")

    @property
    def expected_time(self) -> datetime | None:
        """When the scheduler meant this request to be sent (``x-ms-scheduler-expected-execution-time``)."""
        value = self.header("x-ms-scheduler-expected-execution-time")
        return _parse_time(value) if value else None


@dataclass
class Answer:
    """How ``HttpTarget`` answers one path (see ``HttpTarget.respond``)."""

    status: int = 200
    body: bytes = b"ok"
    delay: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)
    fail_first: int = 0
    fail_status: int = 500
    fail_body: bytes = b"failing on purpose"
    served: int = 0


@dataclass
class HttpTarget:
    """A recording HTTP server on 127.0.0.1 for jobs to call: ``url`` (plus any path), ``requests`` in
    arrival order. ``statuses``: the status of each request in turn (the last repeats; default 200), to
    simulate a failing target; ``respond(path, ...)`` programs one path's answer instead (status, body,
    headers, a delay, failing the first N). ``wait_for(count, timeout)`` waits for requests to arrive."""

    statuses: list[int] = field(default_factory=lambda: [200])
    requests: list[RecordedRequest] = field(default_factory=list)
    url: str = ""
    host: str = "127.0.0.1"
    _server: ThreadingHTTPServer | None = None
    _thread: threading.Thread | None = None
    _answers: dict[str, Answer] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> HttpTarget:
        target = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                request = RecordedRequest(
                    self.command,
                    self.path,
                    {k.lower(): v for k, v in self.headers.items()},
                    body,
                    datetime.now(UTC),
                    time.monotonic(),
                    self.client_address[1],
                )
                status, payload, delay, extra = target._record(request)
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

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = _handle  # noqa: N815

            def log_message(self, *args: Any) -> None:
                pass

        class QuietServer(ThreadingHTTPServer):
            def handle_error(self, request: object, client_address: object) -> None:
                pass  # a client that went away mid-request (a stopped emulator) is no error of the target

        server = QuietServer((self.host, 0), Handler, bind_and_activate=False)
        server.daemon_threads = True
        server.request_queue_size = 256  # many jobs fire at the same instant; do not drop their connections
        server.server_bind()
        server.server_activate()
        self._server = server
        self.url = f"http://{self.host}:{server.server_address[1]}"
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

    def clear(self) -> None:
        with self._lock:
            self.requests.clear()

    def respond(
        self,
        path: str,
        status: int = 200,
        body: bytes | str = b"ok",
        *,
        delay: float = 0.0,
        headers: dict[str, str] | None = None,
        fail_first: int = 0,
        fail_status: int = 500,
        fail_body: bytes | str = b"failing on purpose",
    ) -> None:
        """From now on answer ``path`` (without a query string) with ``status`` and ``body`` (and ``headers``),
        after ``delay`` seconds; the first ``fail_first`` requests get ``fail_status``/``fail_body`` instead."""
        with self._lock:
            self._answers[path] = Answer(
                status, _bytes(body), delay, dict(headers or {}), fail_first, fail_status, _bytes(fail_body)
            )

    def requests_to(self, path: str | None = None) -> list[RecordedRequest]:
        """The requests so far (to ``path``, without a query string, when given), oldest first."""
        with self._lock:
            return [r for r in self.requests if path is None or r.route == path]

    def wait_for(self, count: int, timeout: float = 10.0, path: str | None = None) -> list[RecordedRequest]:
        """Wait until at least ``count`` requests (to ``path`` when given) have arrived and return them;
        AssertionError after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            found = self.requests_to(path)
            if len(found) >= count:
                return found
            if time.monotonic() >= deadline:
                raise AssertionError(
                    f"expected {count} request(s) to {path or self.url} within {timeout:.1f} s, got {len(found)}"
                )
            time.sleep(0.02)

    def default_answer(self, request: RecordedRequest, index: int) -> tuple[int, bytes, dict[str, str]]:
        """The answer of a path ``respond`` did not program: ``statuses`` in turn. Subclasses may change it."""
        return self.statuses[min(index, len(self.statuses) - 1)], b"ok", {}

    def _record(self, request: RecordedRequest) -> tuple[int, bytes, float, dict[str, str]]:
        with self._lock:
            index = len(self.requests)
            self.requests.append(request)
            answer = self._answers.get(request.route)
            if answer is None:
                status, body, headers = self.default_answer(request, index)
                return status, body, 0.0, headers
            answer.served += 1
            if answer.served <= answer.fail_first:
                return answer.fail_status, answer.fail_body, answer.delay, {}
            return answer.status, answer.body, answer.delay, answer.headers

    def __enter__(self) -> HttpTarget:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _bytes(value: bytes | str) -> bytes:
    return value.encode() if isinstance(value, str) else value


def _parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _iso_duration(delta: timedelta) -> str:
    if delta < timedelta(0):
        return "-" + _iso_duration(-delta)
    seconds = delta.total_seconds()
    days, rest = divmod(seconds, 86400)
    text = "P" + (f"{int(days)}D" if days else "")
    return text + (f"T{rest:g}S" if rest or not days else "")
