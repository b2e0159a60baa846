"""Connection-level protection that uvicorn lacks (docs/reference/security.md#protecting-the-process): slow request
heads and bodies, oversize heads, and a hard cap on open connections.

uvicorn offers an idle keep-alive timeout (``timeout_keep_alive``, used as is). It has no deadline for a
request head or body in progress — a client sending its headers one byte at a time holds a connection
forever —, no cap on a request head's size with httptools (llhttp parses any length), and its
``limit_concurrency`` still accepts every connection and answers 503 only once a request arrives. So the
server runs this subclass of uvicorn's httptools protocol (the C parser: h11, in pure Python, was a sixth
of an API request's CPU):

- from the moment a connection opens, or the first byte of a request on a kept-alive one arrives, the
  client has ``head_timeout`` seconds to finish the request head, then ``body_timeout`` for the body;
  missing either closes the connection;
- a head not finished within ``max_head_bytes`` is answered 431 and the connection closed;
- a connection beyond ``max_connections`` takes the place of the kept-alive connection idle the longest or, with
  none idle, is answered 503 and closed at once instead of waiting.

When the server closes a connection (each close is logged at debug with its reason, and so is every end the client
makes): for a head or body past its deadline, a head over its cap, an idle kept-alive connection past the
keep-alive timeout, or an idle one taken to make room under the connection cap. Never while a request's bytes wait:

- no body deadline runs while the server itself is not reading (uvicorn stops reading while a pipelined request
  waits for the one before it to be answered); it starts when reading resumes (issue 29);
- the idle close is put off while a byte waits on the socket: the loop runs its due timers before it reads its
  sockets, so a request that had arrived just before the timeout was dropped unread (issue 29).

What keep-alive cannot avoid (RFC 9112 §9.3.1) is a request that the client sends while the server's idle close
is on its way: a client checks that its pooled connection is still open, then writes, and a close that falls in
between leaves the request unanswered (httpx raises ``ReadError`` or ``RemoteProtocolError``; it does not
retry). The server's idle clock starts when it has written the answer, the client's when it has read it, so a
server timeout equal to the client's (5 s each: httpx's ``keepalive_expiry`` and uvicorn's default) makes the
server close first whenever a client reuses a connection near its expiry (issue 49: a 30,000-PUT httpx load lost
a request now and then; httpx clients reusing connections just under their expiry beside two busy cores lost 38
of 1,000). The default timeout is therefore longer than the clients' own expiries
(config.py), so that they retire an idle connection before the server would; and at the connection cap an idle
connection, longest idle first, gives way to a new one rather than the newcomer being refused.
tests/e2e/test_keep_alive_load.py loads tens of thousands of requests over kept-alive connections, pipelined,
split, and idling near the timeout, and httpx clients reusing connections up to their expiry beside busy cores.

The parser's callbacks say where a request stands: ``on_message_begin`` (its head is arriving),
``on_headers_complete`` (its body), ``on_message_complete`` (all received: the response is under way).
"""

from __future__ import annotations

import asyncio
import json
import logging
import select
import ssl
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from scheduler_emulator.config_groups import ServerSettings

log = logging.getLogger("scheduler_emulator.connections")

HEAD, BODY = "head", "body"
HEAD_ENDS = (b"\r\n\r\n", b"\n\n")


def _error_bytes(status: int, reason: str, code: str, message: str) -> bytes:
    body = json.dumps({"error": {"code": code, "message": message}}).encode()
    head = (
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json; charset=utf-8\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


class GuardedHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with the deadlines and caps above; ``guarded_protocol`` sets the limits."""

    head_timeout = 10.0
    body_timeout = 30.0
    max_head_bytes = 16 * 1024
    max_connections = 1000

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline: asyncio.TimerHandle | None = None
        self._deadline_for: str | None = None
        self._phase: str | None = HEAD  # what the client is sending: HEAD, BODY or nothing (None)
        self._head = b""  # the current head's first max_head_bytes + 4 bytes, while it arrives
        self._head_size = 0
        self._put_off = 0  # times the idle close was put off since the last response
        self._idle_since: float | None = None  # the loop's time when it last became idle between requests
        self._tls: dict[str, Any] | None = None  # the ASGI TLS extension of this connection (None: plain HTTP)

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self.max_connections and not self._make_room():
            log.warning("refused a connection: %d are open, the most allowed", self.max_connections)
            transport.write(
                _error_bytes(
                    503, "Service Unavailable", "ServiceUnavailable", "Too many open connections; try again shortly."
                )
            )
            transport.close()
            return
        self._tls = tls_extension(transport.get_extra_info("ssl_object"))
        self._watch()

    def connection_lost(self, exc: Exception | None) -> None:
        self._clear()
        self._idle_since = None
        if log.isEnabledFor(logging.DEBUG):
            log.debug("the connection of %s ended (%s) %s", self._who(), exc or "closed", self._where())
        super().connection_lost(exc)

    def eof_received(self) -> None:
        if log.isEnabledFor(logging.DEBUG):
            log.debug("the client %s closed its side %s", self._who(), self._where())
        super().eof_received()

    def data_received(self, data: bytes) -> None:
        self._idle_since = None
        if self._phase is None and (self.cycle is None or self.cycle.response_complete):
            self._begin_head()  # the first byte of the next request on a kept-alive connection
        if self._phase is HEAD and self._head_too_large(data):
            log.debug("closing the connection of %s: a head over %d bytes", self._who(), self.max_head_bytes)
            self._clear()
            self.transport.write(
                _error_bytes(
                    431,
                    "Request Header Fields Too Large",
                    "RequestHeaderFieldsTooLarge",
                    f"The request head is over {self.max_head_bytes} bytes.",
                )
            )
            self.transport.close()
            return
        super().data_received(data)
        self._watch()

    # The parser's callbacks, called from within data_received.

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._tls is not None:  # the client's certificate, for the classic surface (api/classic/certificates.py)
            self.scope["extensions"] = {"tls": self._tls}  # type: ignore[dict-item]
        if self._phase is not HEAD:
            self._begin_head()

    def on_headers_complete(self) -> None:
        super().on_headers_complete()
        self._phase, self._head, self._head_size = BODY, b"", 0

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._phase = None

    def on_response_complete(self) -> None:
        self._clear()  # the keep-alive timeout takes over until the next request's first byte
        self._put_off = 0
        super().on_response_complete()
        if self.timeout_keep_alive_task is not None:  # idle now (no pipelined request waits): it may give way
            self._idle_since = self.loop.time()
        self._watch()  # reading resumed: a pipelined request's body deadline starts now

    def timeout_keep_alive_handler(self) -> None:
        """Close an idle kept-alive connection, unless a request's bytes wait on its socket: read next, they
        cancel the close (a few milliseconds later, it is tried again)."""
        if self.transport.is_closing():
            return
        if self._bytes_waiting() and self._put_off < 200:  # bounded: a second at most
            self._put_off += 1
            self.timeout_keep_alive_task = self.loop.call_later(0.005, self.timeout_keep_alive_handler)
            return
        log.debug(
            "closing the idle connection of %s: the keep-alive timeout (put off %d times)", self._who(), self._put_off
        )
        self.transport.close()

    def shutdown(self) -> None:
        """The server stops: an idle connection closes now, a busy one after its response. Under TLS an idle
        connection is aborted instead: closing it sends close_notify and waits for the client's, which a client
        keeping a pooled connection idle never sends, so a stop (SIGTERM) waited uvicorn's whole graceful
        shutdown timeout (--shutdown-grace + 5 s) for it."""
        idle = self.cycle is None or self.cycle.response_complete
        if idle and self.transport.get_extra_info("ssl_object") is not None:
            self._clear()
            self.transport.abort()
            return
        super().shutdown()

    def _make_room(self) -> bool:
        """Over the cap: close the connection idle the longest (none with a byte waiting), if there is one."""
        idle = sorted(
            (
                other
                for other in self.connections
                if isinstance(other, GuardedHttpProtocol) and other._idle_since is not None
            ),
            key=lambda other: other._idle_since or 0.0,
        )
        for other in idle:
            if other.transport.is_closing() or other._bytes_waiting():
                continue
            log.info(
                "closed the idle connection of %s to make room for a new one: %d are open, the most allowed",
                other._who(),
                self.max_connections,
            )
            other._idle_since = None
            other._unset_keepalive_if_required()
            other.transport.close()
            return True
        return False

    def _who(self) -> str:
        return f"{self.client[0]}:{self.client[1]}" if self.client else "a client"

    def _where(self) -> str:
        """Where the connection stood, for the debug log of its end."""
        if self.cycle is not None and not self.cycle.response_complete:
            return (
                f"with a request under way ({self._phase or 'received'}, answer begun: {self.cycle.response_started})"
            )
        if self._phase is not None and (self.cycle is not None or self._head_size):
            return f"in a request's {self._phase}"
        return "while idle" if self.cycle is not None else "before any request"

    def _bytes_waiting(self) -> bool:
        """Whether the client's socket has something to read (bytes, or its end of the connection)."""
        sock = self.transport.get_extra_info("socket")
        fileno = sock.fileno() if sock is not None else -1
        if fileno < 0:
            return False
        poller = select.poll()
        poller.register(fileno, select.POLLIN)
        return bool(poller.poll(0))

    # --

    def _begin_head(self) -> None:
        self._phase, self._head, self._head_size = HEAD, b"", 0

    def _head_too_large(self, data: bytes) -> bool:
        """Whether the head so far (with ``data``) is over the cap without having ended within it."""
        self._head_size += len(data)
        room = self.max_head_bytes + 4 - len(self._head)
        if room > 0:
            self._head += data[:room]
        if self._head_size <= self.max_head_bytes:
            return False
        return not any(end in self._head for end in HEAD_ENDS)

    def _watch(self) -> None:
        """Arm the deadline that matches the request's state: head, body, or none."""
        if self.transport is None or self.transport.is_closing():
            self._clear()
            return
        phase = self._phase
        if phase is HEAD and self.cycle is not None and not self.cycle.response_complete:
            phase = None  # pipelined bytes wait while the current response is under way
        if phase is HEAD and self.timeout_keep_alive_task is not None:
            phase = None  # idle between requests: the keep-alive timeout applies
        if self.flow is not None and self.flow.read_paused:
            phase = None  # the server is not reading (a pipelined request waits its turn): nothing to hold against
        if phase is self._deadline_for:
            return
        self._clear()
        if phase is HEAD:
            self._deadline = self.loop.call_later(self.head_timeout, self._expire, "head", self.head_timeout)
        elif phase is BODY:
            self._deadline = self.loop.call_later(self.body_timeout, self._expire, "body", self.body_timeout)
        else:
            return
        self._deadline_for = phase

    def _clear(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
        self._deadline, self._deadline_for = None, None

    def _expire(self, what: str, seconds: float) -> None:
        self._deadline, self._deadline_for = None, None
        if not self.transport.is_closing():
            log.warning("closed the connection of %s: no complete request %s within %g s", self._who(), what, seconds)
            self.transport.close()


def tls_extension(ssl_object: ssl.SSLObject | None) -> dict[str, Any] | None:
    """The ASGI TLS extension (asgiref's "TLS" extension specification) of a connection, which uvicorn does not
    fill: ``client_cert_chain`` holds the client's certificate in PEM when it sent one (the server asks for one only
    when client certificates authenticate, tls.request_client_certificates). None on plain HTTP."""
    if ssl_object is None:
        return None
    der = ssl_object.getpeercert(binary_form=True)
    return {
        "server_cert": None,
        "client_cert_chain": [ssl.DER_cert_to_PEM_cert(der)] if der else [],
        "client_cert_name": None,
        "client_cert_error": None,
        "tls_version": None,
        "cipher_suite": None,  # the specification's numbers: Python's ssl does not expose them
    }


def guarded_protocol(server: ServerSettings) -> type[GuardedHttpProtocol]:
    """The protocol class for uvicorn's ``http`` setting, with the operator's limits."""
    return type(
        "ConfiguredHttpProtocol",
        (GuardedHttpProtocol,),
        {
            "head_timeout": server.head_timeout,
            "body_timeout": server.body_timeout,
            "max_head_bytes": server.max_head_bytes,
            "max_connections": server.max_connections,
        },
    )
