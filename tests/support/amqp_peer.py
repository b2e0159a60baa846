"""A small AMQP 1.0 peer standing in for a Service Bus namespace in tests, built on python-qpid-proton.

It listens on 127.0.0.1 (plain TCP, SASL ANONYMOUS as the SDK's development-emulator mode negotiates) and
plays the parts of the service the Service Bus SDK's sender touches:

- the ``$cbs`` node: a put-token request carries a ``SharedAccessSignature`` token; the peer checks its
  HMAC-SHA256 signature against the key it knows for the token's key name (and its expiry) and answers
  ``status-code`` 200, or 401 with the reason, correlated to the request's message id;
- queue and topic entities: a sender link to an entity is accepted only when a token for that entity (or
  the whole namespace) was accepted on the same connection, and otherwise detached with
  ``amqp:unauthorized-access``; an entity outside ``entities`` (when given) is refused with
  ``amqp:not-found``; every message that arrives is recorded with its sections as they were on the wire.

Everything runs on one reactor thread; tests talk to it through thread-safe methods (records are copied
under a lock, commands are injected as events). Every wait is bounded.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import itertools
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import parse_qs, quote_plus, urlsplit

from proton import Condition, Endpoint, Message, Terminus, int32
from proton.handlers import MessagingHandler
from proton.reactor import ApplicationEvent, Container, EventInjector

T = TypeVar("T")

CBS_NODE = "$cbs"
PUT_TOKEN = "put-token"


@dataclass(frozen=True)
class ReceivedMessage:
    """One message that arrived on an entity, with what each AMQP section carried."""

    connection: int
    address: str  # the link's target address as the client gave it
    entity: str  # its entity path (``orders``, ``events``)
    body: Any
    application_properties: dict[str, Any]
    message_id: Any
    correlation_id: Any
    content_type: str | None
    subject: str | None
    reply_to: str | None
    reply_to_group_id: str | None
    to: str | None
    group_id: str | None
    ttl_ms: int | None  # header ttl
    absolute_expiry_time: float | None
    creation_time: float | None
    annotations: dict[str, Any]  # message annotations, keys as text

    @property
    def text(self) -> str:
        return self.body.decode("utf-8") if isinstance(self.body, bytes) else str(self.body)


@dataclass(frozen=True)
class TokenRequest:
    """One put-token request on ``$cbs`` and the peer's verdict."""

    connection: int
    audience: str
    token_type: str
    key_name: str | None
    status: int
    description: str


@dataclass(frozen=True)
class LinkAttach:
    """A link the client attached to an entity (``$cbs`` links are not listed)."""

    connection: int
    address: str
    entity: str
    role: str  # "sender" (client sends to us) or "receiver"
    refused: str | None  # the error condition if the peer refused it


@dataclass
class _ConnectionState:
    number: int
    authorized: set[str] = field(default_factory=set)  # entity paths (lower case); "" = namespace


def entity_of(address: str) -> str:
    """``amqps://host:port/orders`` → ``orders``; ``orders`` → ``orders``."""
    if "://" in address:
        return urlsplit(address).path.strip("/")
    return address.strip("/")


def sas_token(audience: str, key_name: str, key: str, expiry: int | None = None) -> str:
    """A token the way the SDKs make one (for tests of the peer itself)."""
    expiry = int(time.time()) + 3600 if expiry is None else expiry
    encoded = quote_plus(audience)
    signature = base64.b64encode(hmac.new(key.encode(), f"{encoded}\n{expiry}".encode(), hashlib.sha256).digest())
    return (
        f"SharedAccessSignature sr={encoded}&sig={quote_plus(signature.decode())}&se={expiry}"
        f"&skn={quote_plus(key_name)}"
    )


def verify_token(token: str, keys: dict[str, str], now: float | None = None) -> tuple[bool, str, str | None, str]:
    """(valid, reason, key name, resource) for a ``SharedAccessSignature`` token against the known keys."""
    prefix = "SharedAccessSignature "
    if not token.startswith(prefix):
        return False, "the token is not a SharedAccessSignature", None, ""
    fields = {name: values[0] for name, values in parse_qs(token[len(prefix) :], keep_blank_values=True).items()}
    resource, signature, expiry, key_name = (fields.get(name) for name in ("sr", "sig", "se", "skn"))
    if not resource or not signature or not expiry or not key_name:
        return False, "the token lacks sr, sig, se or skn", key_name, resource or ""
    key = keys.get(key_name)
    if key is None:
        return False, f"no authorization rule named '{key_name}'", key_name, resource
    try:
        expires = int(expiry)
    except ValueError:
        return False, "the token's expiry is not a number", key_name, resource
    if expires <= (time.time() if now is None else now):
        return False, "the token has expired", key_name, resource
    expected = base64.b64encode(
        hmac.new(key.encode(), f"{quote_plus(resource)}\n{expiry}".encode(), hashlib.sha256).digest()
    ).decode()
    if not hmac.compare_digest(expected, signature):
        return False, "the token's signature does not match the key", key_name, resource
    return True, "OK", key_name, resource


def _text_keys(mapping: dict[Any, Any] | None) -> dict[str, Any]:
    return {str(k): v for k, v in (mapping or {}).items()}


class _Handler(MessagingHandler):
    def __init__(self, peer: AmqpPeer) -> None:
        super().__init__(prefetch=100, auto_accept=False)
        self.peer = peer
        self.acceptor: Any = None
        self.open_connections: dict[int, Any] = {}  # connection number → proton connection

    # -- connections --------------------------------------------------------------------------------

    @staticmethod
    def _state(connection: Any) -> _ConnectionState:
        # attributes set on a proton wrapper live in the C object's record, so every wrapper sees them
        state: _ConnectionState = connection.peer_state
        return state

    def on_start(self, event: Any) -> None:
        self.acceptor = event.container.listen(f"127.0.0.1:{self.peer.requested_port}")
        self.peer.port = int(self.acceptor._selectable.getsockname()[1])
        self.peer._ready.set()

    def on_connection_opening(self, event: Any) -> None:
        number = self.peer._next_connection()
        event.connection.peer_state = _ConnectionState(number)
        self.open_connections[number] = event.connection

    def on_connection_closed(self, event: Any) -> None:
        self._forget(event.connection)

    def on_transport_closed(self, event: Any) -> None:
        if event.connection is not None:
            self._forget(event.connection)

    def _forget(self, connection: Any) -> None:
        state = getattr(connection, "peer_state", None)
        if state is not None and self.open_connections.pop(state.number, None) is not None:
            self.peer._note_closed(state.number)

    # -- links --------------------------------------------------------------------------------------

    def on_link_opening(self, event: Any) -> None:
        # Attached as asked, except that a refused link gets no terminus for the entity (as Service Bus
        # answers); on_link_opened then detaches it with the reason.
        link = event.link
        link.source.copy(link.remote_source)
        address = (link.remote_target.address if link.is_receiver else link.remote_source.address) or ""
        if address == CBS_NODE or (link.is_sender and link.remote_source.address == CBS_NODE):
            link.target.copy(link.remote_target)
            return
        entity = entity_of(address)
        state = self._state(event.connection)
        refusal: tuple[str, str] | None = None
        known = self.peer.entities
        if known is not None and entity.lower() not in known:
            refusal = ("amqp:not-found", f"The messaging entity '{entity}' could not be found.")
        elif "" not in state.authorized and entity.lower() not in state.authorized:
            refusal = (
                "amqp:unauthorized-access",
                f"Unauthorized access. 'Send' claim(s) are required to perform this operation on '{entity}'.",
            )
        self.peer._note_link(
            LinkAttach(
                state.number,
                address,
                entity,
                "sender" if link.is_receiver else "receiver",
                refusal[0] if refusal else None,
            )
        )
        if refusal is None:
            link.target.copy(link.remote_target)
        else:
            link.target.type = Terminus.UNSPECIFIED  # a null target
        link.peer_refusal = refusal

    def on_link_opened(self, event: Any) -> None:
        link = event.link
        refusal = getattr(link, "peer_refusal", None)
        if refusal:
            link.condition = Condition(*refusal)
            link.close()

    # -- messages -----------------------------------------------------------------------------------

    def on_message(self, event: Any) -> None:
        link, message, delivery = event.link, event.message, event.delivery
        address = link.remote_target.address or ""
        if address == CBS_NODE:
            self.accept(delivery)
            self._put_token(event, message)
            return
        if event.connection.state & Endpoint.LOCAL_CLOSED:
            return  # arrived after the peer closed the connection: never taken (nor settled)
        entity = entity_of(address)
        state = self._state(event.connection)
        if "" not in state.authorized and entity.lower() not in state.authorized:
            delivery.local.condition = Condition("amqp:unauthorized-access", "no accepted token for this entity")
            self.reject(delivery)
            return
        expiry = message.expiry_time
        creation = message.creation_time
        self.peer._note_message(
            ReceivedMessage(
                connection=state.number,
                address=address,
                entity=entity,
                body=message.body.tobytes() if isinstance(message.body, memoryview) else message.body,
                application_properties=_text_keys(message.properties),
                message_id=message.id,
                correlation_id=message.correlation_id,
                content_type=str(message.content_type) if message.content_type else None,
                subject=message.subject,
                reply_to=message.reply_to,
                reply_to_group_id=message.reply_to_group_id,
                to=message.address,
                group_id=message.group_id,
                ttl_ms=round(message.ttl * 1000) if message.ttl else None,
                absolute_expiry_time=float(expiry) if expiry else None,
                creation_time=float(creation) if creation else None,
                annotations=_text_keys(message.annotations),
            )
        )
        self.accept(delivery)

    def _put_token(self, event: Any, request: Message) -> None:
        state = self._state(event.connection)
        props = _text_keys(request.properties)
        operation, audience, token_type = props.get("operation"), str(props.get("name") or ""), props.get("type")
        status, description, key_name = 400, "unsupported operation", None
        if operation == PUT_TOKEN:
            token = request.body.decode() if isinstance(request.body, bytes) else str(request.body or "")
            valid, reason, key_name, resource = verify_token(token, self.peer.keys)
            if valid and resource.rstrip("/") != audience.rstrip("/"):
                valid, reason = False, "the token's resource is not the audience it is put for"
            status, description = (200, "OK") if valid else (401, f"InvalidSignature: {reason}")
            if valid:
                path = entity_of(audience) if "://" in audience else ""
                state.authorized.add(path.lower())
        self.peer._note_token(TokenRequest(state.number, audience, str(token_type), key_name, status, description))
        reply = Message(
            address=request.reply_to,
            correlation_id=request.id,
            properties={"status-code": int32(status), "status-description": description},
            body=None,
        )
        link = event.connection.link_head(Endpoint.LOCAL_ACTIVE)
        while link is not None:
            if (
                link.is_sender
                and link.source.address == CBS_NODE
                and (not request.reply_to or link.target.address in (request.reply_to, None))
            ):
                link.send(reply)
                return
            link = link.next(Endpoint.LOCAL_ACTIVE)

    # -- commands from the test thread --------------------------------------------------------------

    def on_drop(self, event: Any) -> None:
        abrupt = bool(event.subject)
        for connection in list(self.open_connections.values()):
            self._forget(connection)  # closed from the peer's side, whatever the client does next
            if abrupt:
                selectable = getattr(connection.transport, "_selectable", None)
                if selectable is not None:
                    with contextlib.suppress(OSError):
                        selectable._delegate.shutdown(socket.SHUT_RDWR)
                    continue
            connection.condition = Condition("amqp:connection:forced", "the test peer dropped the connection")
            connection.close()
        self.peer._dropped.set()

    def on_shutdown(self, event: Any) -> None:
        if self.acceptor is not None:
            self.acceptor.close()
        for connection in list(self.open_connections.values()):
            connection.close()
        self.peer._injector.close()
        event.container.stop()


class AmqpPeer:
    """Start with :meth:`start`, stop with :meth:`stop` (or use it as a context manager)."""

    def __init__(self, keys: dict[str, str], entities: set[str] | None = None, port: int = 0) -> None:
        self.keys = dict(keys)
        self.entities = {e.lower() for e in entities} if entities is not None else None
        self.requested_port = port
        self.port = 0
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self._dropped = threading.Event()
        self._connection_numbers = itertools.count(1)
        self._messages: list[ReceivedMessage] = []
        self._tokens: list[TokenRequest] = []
        self._links: list[LinkAttach] = []
        self._connections: list[int] = []
        self._closed: list[int] = []
        self._injector = EventInjector()
        self._handler = _Handler(self)
        self._container = Container(self._handler)
        self._container.selectable(self._injector)
        self._thread = threading.Thread(target=self._run, name="amqp-peer", daemon=True)
        self._error: BaseException | None = None

    # -- lifecycle ------------------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            self._container.run()
        except BaseException as exc:  # noqa: BLE001 - surfaced by stop() and the waits
            self._error = exc
            self._ready.set()

    def start(self, timeout: float = 10) -> AmqpPeer:
        self._thread.start()
        if not self._ready.wait(timeout) or self._error is not None or not self.port:
            raise RuntimeError(f"the AMQP peer did not start: {self._error!r}")
        return self

    def stop(self, timeout: float = 10) -> None:
        if self._thread.is_alive():
            self._injector.trigger(ApplicationEvent("shutdown"))
            self._thread.join(timeout)
        if self._thread.is_alive():
            raise RuntimeError("the AMQP peer did not stop in time")

    def __enter__(self) -> AmqpPeer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        return f"amqp://127.0.0.1:{self.port}"

    def drop_connections(self, abrupt: bool = False, timeout: float = 5) -> None:
        """Close every open client connection: with an AMQP close (``amqp:connection:forced``), or
        ``abrupt``-ly by shutting the socket down."""
        self._dropped.clear()
        self._injector.trigger(ApplicationEvent("drop", subject=abrupt))
        if not self._dropped.wait(timeout):
            raise RuntimeError("the AMQP peer did not drop its connections in time")

    # -- records (called on the reactor thread) ------------------------------------------------------

    def _next_connection(self) -> int:
        number = next(self._connection_numbers)
        with self._lock:
            self._connections.append(number)
        return number

    def _note_closed(self, number: int) -> None:
        with self._lock:
            self._closed.append(number)

    def _note_link(self, link: LinkAttach) -> None:
        with self._lock:
            self._links.append(link)

    def _note_token(self, request: TokenRequest) -> None:
        with self._lock:
            self._tokens.append(request)

    def _note_message(self, message: ReceivedMessage) -> None:
        with self._lock:
            self._messages.append(message)

    # -- what happened (any thread) --------------------------------------------------------------------

    def messages(self, entity: str | None = None) -> list[ReceivedMessage]:
        with self._lock:
            return [m for m in self._messages if entity is None or m.entity.lower() == entity.lower()]

    def tokens(self, entity: str | None = None) -> list[TokenRequest]:
        with self._lock:
            return [t for t in self._tokens if entity is None or entity_of(t.audience).lower() == entity.lower()]

    def links(self, entity: str | None = None) -> list[LinkAttach]:
        with self._lock:
            return [lk for lk in self._links if entity is None or lk.entity.lower() == entity.lower()]

    def connections(self) -> list[int]:
        """Numbers of every connection opened so far (1, 2, ...)."""
        with self._lock:
            return list(self._connections)

    def open_connections(self) -> list[int]:
        with self._lock:
            return [n for n in self._connections if n not in self._closed]

    def connections_of(self, entity: str) -> set[int]:
        """The connections on which a token for ``entity`` was put."""
        return {t.connection for t in self.tokens(entity)}

    def wait_for(self, check: Callable[[], T | None], timeout: float, what: str) -> T:
        deadline = time.monotonic() + timeout
        while True:
            result = check()
            if result:
                return result
            if self._error is not None:
                raise RuntimeError(f"the AMQP peer failed: {self._error!r}")
            if time.monotonic() >= deadline:
                raise AssertionError(f"timed out after {timeout:.1f} s waiting for {what}")
            time.sleep(0.05)

    def wait_messages(self, entity: str, count: int, timeout: float) -> list[ReceivedMessage]:
        """The messages on ``entity`` once at least ``count`` have arrived."""

        def enough() -> list[ReceivedMessage] | None:
            found = self.messages(entity)
            return found if len(found) >= count else None

        return self.wait_for(enough, timeout, f"{count} message(s) on '{entity}' (have {len(self.messages(entity))})")
