"""ServiceBusQueue and ServiceBusTopic actions, sent with the official SDK (``azure.servicebus.aio``).

Where a namespace lives: ``{namespace}.servicebus.windows.net`` over TLS, unless the operator maps the
namespace (``--servicebus-endpoint NAMESPACE=ENDPOINT``) to

- ``HOST[:PORT]`` or ``amqp://HOST[:PORT]``: plain TCP (port 5672 by default), the SDK's development-emulator
  mode (``use_tls=False``, what ``UseDevelopmentEmulator=true`` in a connection string selects: it keeps the
  port and turns TLS off) — the official Service Bus emulator or any AMQP 1.0 peer that speaks CBS;
- ``amqps://HOST[:PORT]`` or ``sb://HOST[:PORT]``: TLS to another host (a namespace reached under another
  name, a proxy); a port other than 5671 is given to the SDK as its custom endpoint address.

Authentication is the job's SAS rule (``sasKeyName``/``sasKey``) as the SDK's credential object
(``AzureNamedKeyCredential``) beside the endpoint chosen above: no job value is ever spliced into a
connection string, so none can add settings of its own (another ``Endpoint``, ``UseDevelopmentEmulator``)
(docs/reference/security.md#job-values-that-name-endpoints). The SDK signs a token per entity and puts it on that
endpoint's ``$cbs`` node. The key is never written to a message or a log.

Opening a sender (connection, CBS, link) costs about half a second, so senders stay open and are reused
per (namespace, key name, key, entity) — the SDK keeps their connections alive — until they have been
unused for ten minutes or :meth:`ServiceBusAction.close` closes them; sends on one sender take turns. SDK
retries are off: the job's retry policy is in charge, and the operator's action timeout bounds each
attempt. A send that fails drops its sender (and client) so the next one reconnects; a failure on a sender
that had already worked (a connection the service or a network device closed since) is retried at once on
a fresh connection within the same time budget, so that a dropped connection does not cost the job a
failed attempt.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import re
from dataclasses import dataclass
from datetime import UTC, timedelta
from typing import Any
from urllib.parse import urlsplit

from azure.core.credentials import AzureNamedKeyCredential
from azure.servicebus import ServiceBusMessage
from azure.servicebus.aio import ServiceBusClient, ServiceBusSender
from azure.servicebus.exceptions import (
    MessageSizeExceededError,
    MessagingEntityDisabledError,
    MessagingEntityNotFoundError,
    OperationTimeoutError,
    ServiceBusAuthenticationError,
    ServiceBusAuthorizationError,
    ServiceBusCommunicationError,
    ServiceBusConnectionError,
    ServiceBusError,
    ServiceBusQuotaExceededError,
    ServiceBusServerBusyError,
)

from scheduler_emulator.dispatcher.actions import FireContext, Outcome
from scheduler_emulator.domain.durations import describe, parse_duration
from scheduler_emulator.schemas.job import ServiceBusMessage as JobServiceBusMessage
from scheduler_emulator.schemas.job import ServiceBusQueueMessage, ServiceBusTopicMessage, is_service_bus_namespace

log = logging.getLogger("scheduler_emulator.dispatcher.service_bus")

DEFAULT_HOST_SUFFIX = ".servicebus.windows.net"
PLAIN_PORT = 5672
TLS_PORT = 5671
MAX_TTL_MS = 2**32 - 1  # the AMQP header's ttl is a uint of milliseconds
CLOSE_TIMEOUT = 5.0  # seconds granted to closing one client
IDLE_CLOSE_SECONDS = 600.0  # an unused sender is closed after this long


# The SDK's property names in its validation messages → the job definition's.
_WIRE_NAMES = {
    "content_type": "contentType",
    "correlation_id": "correlationId",
    "subject": "label",
    "message_id": "messageId",
    "session_id": "sessionId",
    "partition_key": "partitionKey",
    "reply_to_session_id": "replyToSessionId",
    "reply_to": "replyTo",
    "scheduled_enqueue_time_utc": "scheduledEnqueueTimeUtc",
    "time_to_live": "timeToLive",
}
_WIRE_NAME = re.compile(r"\b(" + "|".join(sorted(_WIRE_NAMES, key=len, reverse=True)) + r")\b")


class SendFailure(Exception):
    """A send that did not complete, with the history message's wording."""


@dataclass(frozen=True)
class Endpoint:
    """How to reach one namespace: where the SDK connects, and the options that go with it."""

    host: str  # host[:port] as shown in messages
    endpoint: str  # sb://host, or sb://host:port in plain TCP mode: the SDK's fully qualified namespace
    emulator: bool  # plain TCP (the SDK's development-emulator mode)
    custom_endpoint_address: str | None = None

    def client(self, credential: AzureNamedKeyCredential) -> ServiceBusClient:
        """A client for this endpoint that authenticates with ``credential``; SDK retries off (the job's
        retry policy is in charge)."""
        options: dict[str, Any] = {"retry_total": 0}
        if self.emulator:
            options["use_tls"] = False  # the SDK then keeps the port of the fully qualified namespace
        if self.custom_endpoint_address:
            options["custom_endpoint_address"] = self.custom_endpoint_address
        return ServiceBusClient(self.endpoint, credential, **options)


def resolve_endpoint(namespace: str, endpoints: dict[str, str]) -> Endpoint:
    """The endpoint of ``namespace``: the operator's mapping (see the module docstring) or the public one.
    ValueError with a readable reason for a mapping the SDK cannot use."""
    mapped = endpoints.get(namespace.lower())
    if mapped is None:
        if not is_service_bus_namespace(namespace):  # a job stored before the API checked the name
            raise ValueError("it is not a valid Service Bus namespace name")
        host = f"{namespace}{DEFAULT_HOST_SUFFIX}"
        return Endpoint(host=host, endpoint=f"sb://{host}", emulator=False)
    text = mapped.strip()
    scheme = "amqp"
    if "://" in text:
        scheme, _, _ = text.partition("://")
        scheme = scheme.lower()
    else:
        text = f"amqp://{text}"
    if scheme not in ("amqp", "amqps", "sb"):
        raise ValueError(f"the endpoint '{mapped}' mapped to it is not amqp://, amqps:// or sb://")
    parts = urlsplit(text)
    try:
        port = parts.port
    except ValueError:
        raise ValueError(f"the endpoint '{mapped}' mapped to it has an invalid port") from None
    if not parts.hostname:
        raise ValueError(f"the endpoint '{mapped}' mapped to it has no host")
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    if scheme == "amqp":
        address = f"{host}:{port or PLAIN_PORT}"
        return Endpoint(host=address, endpoint=f"sb://{address}", emulator=True)
    if port and port != TLS_PORT:
        return Endpoint(
            host=f"{host}:{port}",
            endpoint=f"sb://{host}",
            emulator=False,
            custom_endpoint_address=f"sb://{host}:{port}",
        )
    return Endpoint(host=host, endpoint=f"sb://{host}", emulator=False)


def build_message(job_message: JobServiceBusMessage) -> ServiceBusMessage:
    """The SDK message for a job's service bus message. ValueError for a property the service would refuse."""
    props = job_message.brokered_message_properties
    kwargs: dict[str, Any] = {}
    if props is not None:
        if props.session_id and props.partition_key and props.partition_key != props.session_id:
            raise ValueError(
                f"brokeredMessageProperties.partitionKey '{props.partition_key}' must equal sessionId "
                f"'{props.session_id}' when both are set"
            )
        kwargs = {
            "content_type": props.content_type,
            "correlation_id": props.correlation_id,
            "subject": props.label,
            "message_id": props.message_id,
            "session_id": props.session_id,
            "partition_key": props.partition_key,
            "reply_to": props.reply_to,
            "reply_to_session_id": props.reply_to_session_id,
            "to": props.to,
        }
        if props.scheduled_enqueue_time_utc is not None:
            kwargs["scheduled_enqueue_time_utc"] = props.scheduled_enqueue_time_utc.astimezone(UTC)
        if props.time_to_live is not None:
            ttl = parse_duration(props.time_to_live)
            if ttl < timedelta(0):
                raise ValueError("brokeredMessageProperties.timeToLive must not be negative")
            # Longer than the header can carry means "as long as the entity allows": the entity's own
            # default time to live caps a message's anyway, so leaving it out is the same.
            if ttl.total_seconds() * 1000 <= MAX_TTL_MS:
                kwargs["time_to_live"] = ttl
    # forcePersistence and viaPartitionKey have no modern equivalent: accepted, stored, not sent.
    application_properties: dict[str | bytes, Any] = {
        name: value for name, value in (job_message.custom_message_properties or {}).items()
    }
    return ServiceBusMessage(
        body=job_message.message if job_message.message is not None else "",
        application_properties=application_properties or None,
        **{name: value for name, value in kwargs.items() if value is not None},
    )


@dataclass(frozen=True)
class _Target:
    """One entity of one namespace, reached with one SAS rule."""

    namespace: str
    entity_kind: str  # "queue" | "topic"
    entity: str
    key_name: str
    key: str
    endpoint: Endpoint

    @property
    def cache_key(self) -> tuple[str, ...]:
        digest = hashlib.sha256(self.key.encode()).hexdigest()  # another key for the same rule → another sender
        return (self.namespace.lower(), self.key_name, digest, self.entity_kind, self.entity)

    def open(self) -> tuple[ServiceBusClient, ServiceBusSender]:
        """A client and its sender; nothing is connected until the first send."""
        try:
            client = self.endpoint.client(AzureNamedKeyCredential(self.key_name, self.key))
        except (ValueError, TypeError) as exc:
            raise SendFailure(
                f"the connection settings for namespace '{self.namespace}' are not valid: {_scrub(str(exc), self.key)}"
            ) from None
        if self.entity_kind == "queue":
            return client, client.get_queue_sender(self.entity)
        return client, client.get_topic_sender(self.entity)


class _Link:
    """The cached sender (and the client that owns it) of one target."""

    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.users = 0  # sends using or waiting for this link
        self.client: ServiceBusClient | None = None
        self.sender: ServiceBusSender | None = None
        self.proven = False  # a send on this sender completed
        self.last_used = 0.0  # loop time


class ServiceBusAction:
    """Sends the job's message to a Service Bus queue or topic."""

    idle_close_seconds = IDLE_CLOSE_SECONDS

    def __init__(self, endpoints: dict[str, str], timeout: float) -> None:
        self.endpoints = endpoints
        self.timeout = timeout
        self._links: dict[tuple[str, ...], _Link] = {}
        self._closing: set[asyncio.Task[None]] = set()
        sdk_log = logging.getLogger("azure.servicebus")
        if sdk_log.level == logging.NOTSET:  # its INFO lines narrate every link state change
            sdk_log.setLevel(max(logging.WARNING, logging.getLogger().level))

    async def execute(self, message: ServiceBusQueueMessage | ServiceBusTopicMessage, context: FireContext) -> Outcome:
        if isinstance(message, ServiceBusQueueMessage):
            kind, entity_kind, entity = "ServiceBusQueue", "queue", message.queue_name
        else:
            kind, entity_kind, entity = "ServiceBusTopic", "topic", message.topic_path
        namespace = message.namespace
        key_name, key = message.authentication.sas_key_name or "", message.authentication.sas_key or ""
        where = f"{entity_kind} '{entity}' of namespace '{namespace}'"
        try:
            endpoint = resolve_endpoint(namespace, self.endpoints)
        except ValueError as exc:
            return Outcome(False, f"{kind} Action - cannot reach namespace '{namespace}': {exc}")
        try:
            outgoing = build_message(message)
        except (ValueError, TypeError) as exc:
            reason = _WIRE_NAME.sub(lambda m: f"brokeredMessageProperties.{_WIRE_NAMES[m.group(0)]}", str(exc))
            return Outcome(False, f"{kind} Action - the message for {where} is not valid: {_scrub(reason, key)}")
        target = _Target(namespace, entity_kind, entity, key_name, key, endpoint)
        describe_failure = _Describer(target, where, self.timeout)
        self._close_idle()
        try:
            async with asyncio.timeout(self.timeout):
                await self._send(target, outgoing)
        except TimeoutError:
            return Outcome(False, f"{kind} Action - {describe_failure.timeout()}")
        except SendFailure as exc:
            return Outcome(False, f"{kind} Action - {exc}")
        except Exception as exc:  # noqa: BLE001 - whatever the SDK raises is the attempt's failure
            return Outcome(False, f"{kind} Action - {describe_failure(exc)}")
        return Outcome(True, f"{kind} Action - message sent to {where}")

    async def _send(self, target: _Target, outgoing: ServiceBusMessage) -> None:
        link = self._links.setdefault(target.cache_key, _Link())
        link.users += 1
        try:
            async with link.lock:
                await self._send_on(link, target, outgoing)
        finally:
            link.users -= 1
            link.last_used = asyncio.get_running_loop().time()

    async def _send_on(self, link: _Link, target: _Target, outgoing: ServiceBusMessage) -> None:
        reused = link.sender is not None and link.proven
        for attempt in (1, 2):
            if link.sender is None:
                link.client, link.sender = target.open()
                link.proven = False
            try:
                await link.sender.send_messages(outgoing)
            except asyncio.CancelledError:
                self._discard(link)  # cut off mid-send (the action timeout): its state is unknown
                raise
            except Exception as exc:
                self._discard(link)
                if attempt == 1 and reused and not _is_final(exc):
                    # most likely a connection the service or the network closed since the last send
                    log.info(
                        "sender for %s '%s' of namespace '%s' failed (%s); reconnecting",
                        target.entity_kind,
                        target.entity,
                        target.namespace,
                        type(exc).__name__,
                    )
                    continue
                raise
            link.proven = True
            return

    def _close_idle(self) -> None:
        """Forget links nobody uses: failed ones at once, open ones after ``idle_close_seconds`` (a deleted job's,
        a rotated key's)."""
        now = asyncio.get_running_loop().time()
        for cache_key, link in list(self._links.items()):
            if link.users == 0 and (link.sender is None or now - link.last_used > self.idle_close_seconds):
                del self._links[cache_key]
                self._discard(link)

    def _discard(self, link: _Link) -> None:
        """Forget the link's sender and client and close them in the background (bounded)."""
        client, sender = link.client, link.sender
        link.client, link.sender, link.proven = None, None, False
        if client is not None:
            task = asyncio.get_running_loop().create_task(_close_quietly(client, sender))
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)

    async def close(self) -> None:
        links, self._links = list(self._links.values()), {}
        for link in links:
            self._discard(link)
        await asyncio.gather(*list(self._closing), return_exceptions=True)


async def _close_quietly(client: ServiceBusClient, sender: ServiceBusSender | None) -> None:
    # The client tracks its senders weakly: close the sender itself, then the client.
    for closable in (sender, client):
        if closable is not None:
            with contextlib.suppress(Exception, TimeoutError):
                await asyncio.wait_for(closable.close(), CLOSE_TIMEOUT)


def _is_final(exc: Exception) -> bool:
    """Failures a fresh connection would not cure."""
    return isinstance(
        exc,
        (
            ServiceBusAuthenticationError,
            ServiceBusAuthorizationError,
            MessagingEntityNotFoundError,
            MessagingEntityDisabledError,
            MessageSizeExceededError,
            ValueError,
            TypeError,
        ),
    )


def _scrub(text: str, key: str) -> str:
    """One line of error text, never containing the SAS key."""
    if key:
        text = text.replace(key, "***")
    return re.sub(r"\s+", " ", text).strip()


class _Describer:
    """The history message (after ``{kind} Action - ``) for a failed send."""

    def __init__(self, target: _Target, where: str, timeout: float) -> None:
        self.namespace, self.entity_kind, self.entity = target.namespace, target.entity_kind, target.entity
        self.key_name, self.key, self.endpoint = target.key_name, target.key, target.endpoint
        self.where, self.timeout_seconds = where, timeout

    def timeout(self) -> str:
        seconds = f"{self.timeout_seconds:g} second{'s' if self.timeout_seconds != 1 else ''}"
        if self.timeout_seconds == int(self.timeout_seconds):
            seconds = describe(timedelta(seconds=self.timeout_seconds))
        return f"sending to {self.where} timed out after {seconds} (endpoint {self.endpoint.host})"

    def __call__(self, exc: BaseException) -> str:
        reason = self.reason(exc)
        if isinstance(exc, ServiceBusAuthenticationError | ServiceBusAuthorizationError):
            return f"could not authenticate to namespace '{self.namespace}' with key '{self.key_name}': {reason}"
        if isinstance(exc, MessagingEntityNotFoundError):
            return f"{self.entity_kind} '{self.entity}' was not found in namespace '{self.namespace}': {reason}"
        if isinstance(exc, MessagingEntityDisabledError):
            return f"{self.entity_kind} '{self.entity}' of namespace '{self.namespace}' is disabled: {reason}"
        if isinstance(exc, MessageSizeExceededError):
            return f"the message is too large for {self.where}: {reason}"
        if isinstance(exc, OperationTimeoutError):
            return self.timeout()
        if isinstance(exc, ServiceBusQuotaExceededError | ServiceBusServerBusyError):
            return f"namespace '{self.namespace}' refused the message for {self.entity_kind} '{self.entity}': {reason}"
        if isinstance(exc, ServiceBusConnectionError | ServiceBusCommunicationError | OSError):
            return f"could not connect to namespace '{self.namespace}' at {self.endpoint.host}: {reason}"
        return f"sending to {self.where} failed: {reason}"

    def reason(self, exc: BaseException) -> str:
        """What went wrong, in one line: the SDK's text and its inner AMQP error's, without boilerplate."""
        outer = str(exc.message) if isinstance(exc, ServiceBusError) and exc.message else str(exc)
        inner = getattr(exc, "inner_exception", None) or exc.__cause__
        parts: list[str] = []
        for raw in (outer, str(inner) if inner is not None else ""):
            text = _readable(raw, self.key)
            if not text or any(text in part for part in parts):
                continue
            parts = [part for part in parts if part not in text] + [text]
        if parts:
            return "; ".join(parts)
        condition = _CONDITION.search(outer) or (_CONDITION.search(str(inner)) if inner is not None else None)
        return condition.group(1) if condition else type(exc).__name__


_CONDITION = re.compile(r"Error condition:\s*(?:ErrorCondition\.)?([\w:.\-]+?)\.?(?:\s|$)")
_TOKEN_REFUSED = re.compile(r"CBS Token authentication failed\.?\s*Status code:\s*(\d+)\s*Description:\s*(.*)", re.S)
_BOILERPLATE = re.compile(
    r"Service Bus has encountered an error\.?|Error condition:\s*(?:ErrorCondition\.)?[\w:.\-]+?\.?(?=\s|$)"
    r"|Error Description:|Failed to initiate the connection due to exception:"
)


def _readable(raw: str, key: str) -> str:
    refused = _TOKEN_REFUSED.search(raw)
    if refused:
        return _scrub(f"the namespace refused the token ({refused.group(1)}): {refused.group(2)}", key)
    text = _scrub(_BOILERPLATE.sub(" ", raw), key)
    if "Errno 111" in text or "Connection refused" in text:
        text = f"connection refused ({text})"
    elif "Name or service not known" in text or "nodename nor servname" in text or "getaddrinfo failed" in text:
        text = f"the host name could not be resolved ({text})"
    return text
