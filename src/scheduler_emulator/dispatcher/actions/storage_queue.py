"""StorageQueue actions: one message per attempt on ``queueName`` of ``storageAccount``, sent with the
official SDK (``azure.storage.queue.aio``) and the job's SAS token.

The message text is the XML envelope the real service wrote (docs/reference/actions.md#storagequeue), as .NET's
``XmlSerializer`` writes a ``StorageQueueMessage`` object: a UTF-16 declaration, two-space indentation, CRLF line ends,
``xsd``/``xsi`` namespace declarations, and ``ExpectedExecutionTime`` as an unzoned ``DateTime``
(``2015-09-10T00:00:00``, UTC; a fraction of a second only when there is one). The text goes on the queue as is: no
base64.

The SDK's own retries are off (the job's ``retryPolicy`` is in charge), connecting may take at most
:data:`CONNECT_TIMEOUT` seconds and the whole attempt at most the operator's action timeout. All clients
share one aiohttp session; a client per (endpoint, queue, SAS) is kept for reuse (at most
:data:`MAX_CACHED_CLIENTS`). The SAS token never appears in a history message or a log line.
"""

from __future__ import annotations

import asyncio
import logging
import re
import socket
import ssl
from collections import OrderedDict
from datetime import UTC, datetime
from types import TracebackType
from typing import Any
from urllib.parse import quote, unquote

import aiohttp
from azure.core.credentials import AzureSasCredential
from azure.core.exceptions import (
    HttpResponseError,
    ServiceRequestError,
    ServiceRequestTimeoutError,
    ServiceResponseError,
    ServiceResponseTimeoutError,
)
from azure.core.pipeline.transport import AioHttpTransport, AsyncHttpTransport
from azure.storage.queue.aio import QueueClient

from scheduler_emulator.dispatcher.actions import FireContext, Outcome
from scheduler_emulator.dispatcher.actions.session import SharedSession
from scheduler_emulator.schemas.job import StorageQueueMessage, is_storage_account

PREFIX = "StorageQueue Action - "
CONNECT_TIMEOUT = 5.0  # seconds to establish a connection (the SDK's default waits 20 s, and retries)
MAX_CACHED_CLIENTS = 256
DEFAULT_ENDPOINT = "https://{account}.queue.core.windows.net"

# The SDK logs every request and response at INFO; keep that out of the service's log.
_sdk_log = logging.getLogger("scheduler_emulator.dispatcher.storage_queue.sdk")
_sdk_log.setLevel(logging.WARNING)

XML_DECLARATION = '<?xml version="1.0" encoding="utf-16"?>'
ROOT_OPEN = (
    '<StorageQueueMessage xmlns:xsd="http://www.w3.org/2001/XMLSchema" '
    'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">'
)
NEWLINE = "\r\n"

# Characters that XML text cannot hold literally (or that a parser would normalise, like CR):
# written as character references so the receiver gets the job's message back exactly.
_XML_ESCAPES = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
_NEEDS_REFERENCE = re.compile("[\x00-\x08\x0b\x0c\x0d\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def xml_text(value: str) -> str:
    """``value`` as XML character data: ``& < >`` escaped, CR and other characters a parser would
    drop or reject written as character references; quotes stay literal, as XmlSerializer writes them."""
    escaped = "".join(_XML_ESCAPES.get(ch, ch) for ch in value)
    return _NEEDS_REFERENCE.sub(lambda m: f"&#x{ord(m.group()):X};", escaped)


def expected_time_text(moment: datetime) -> str:
    """The expected execution time as the real envelope wrote it: UTC, no zone designator, the
    fraction of a second (up to 7 digits, trailing zeros dropped) only when there is one."""
    utc = moment.astimezone(UTC)
    text = utc.strftime("%Y-%m-%dT%H:%M:%S")
    if utc.microsecond:
        text += "." + f"{utc.microsecond:06d}".rstrip("0")
    return text


def envelope(message: str, context: FireContext) -> str:
    """The ``StorageQueueMessage`` XML document put on the queue."""
    fields = [
        ("ExecutionTag", context.execution_tag),
        ("ClientRequestId", context.client_request_id),
        ("ExpectedExecutionTime", expected_time_text(context.expected_time)),
        ("SchedulerJobId", context.job_name),
        ("SchedulerJobCollectionId", context.collection_name),
        ("Region", context.region),
        ("Message", message),
    ]
    lines = [XML_DECLARATION, ROOT_OPEN]
    for name, value in fields:
        lines.append(f"  <{name}>{xml_text(value)}</{name}>" if value else f"  <{name} />")
    lines.append("</StorageQueueMessage>")
    return NEWLINE.join(lines)


def normalize_sas(sas_token: str) -> str:
    """The job's SAS token without surrounding whitespace or a leading ``?``."""
    return sas_token.strip().removeprefix("?")


def redact(text: str, sas_token: str) -> str:
    """``text`` with every trace of the SAS token (the token, its signature in any encoding, any
    ``sig=`` query parameter) replaced by ``REDACTED``."""
    secrets = {sas_token, normalize_sas(sas_token)}
    for part in normalize_sas(sas_token).split("&"):
        name, _, value = part.partition("=")
        if name.lower() == "sig" and value:
            secrets.update({value, unquote(value), quote(unquote(value), safe="")})
    for secret in sorted((s for s in secrets if len(s) >= 8), key=len, reverse=True):
        text = text.replace(secret, "REDACTED")
    return re.sub(r"(?i)\bsig=[^&\s'\"<>]+", "sig=REDACTED", text)


class _SharedTransport(AsyncHttpTransport[Any, Any]):
    """Hands every request to the action's one transport; closing a client leaves that transport open."""

    def __init__(self, transport: AioHttpTransport) -> None:
        self._transport = transport

    async def send(self, request: Any, **kwargs: Any) -> Any:
        return await self._transport.send(request, **kwargs)

    async def open(self) -> None:
        pass

    async def close(self) -> None:
        pass

    async def __aenter__(self) -> _SharedTransport:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None = None,
        exc_value: BaseException | None = None,
        traceback: TracebackType | None = None,
    ) -> None:
        pass


class StorageQueueAction:
    """Puts the job's message on a storage queue."""

    def __init__(self, endpoints: dict[str, str], timeout: float, shared: SharedSession | None = None) -> None:
        """``shared``: the process's one session (see session.py); without it the action opens and owns one."""
        self.endpoints = {name.lower(): url.rstrip("/") for name, url in endpoints.items()}
        self.timeout = timeout
        self.shared = shared
        self._session: aiohttp.ClientSession | None = None  # its own: operator-mapped endpoints, or no shared one
        self._transports: dict[bool, AioHttpTransport] = {}  # by "checked by the outbound policy"
        self._clients: OrderedDict[tuple[str, str, str], QueueClient] = OrderedDict()

    def endpoint_for(self, account: str) -> str | None:
        """The account's queue service endpoint: the operator's mapping, else the public one (None when
        the name cannot be a storage account's)."""
        mapped = self.endpoints.get(account.lower())
        if mapped is not None:
            return mapped
        if not is_storage_account(account.lower()):  # a job stored before the API checked the name
            return None
        return DEFAULT_ENDPOINT.format(account=account.lower())

    async def execute(self, message: StorageQueueMessage, context: FireContext) -> Outcome:
        account, queue = message.storage_account, message.queue_name
        where = f"queue '{queue}' of account '{account}'"
        endpoint = self.endpoint_for(account)
        if endpoint is None:
            return Outcome(
                False,
                f"{PREFIX}'{account}' is not a valid storage account name (3 to 24 lower-case "
                "letters and digits) and the emulator has no endpoint mapped for it",
            )
        sas = normalize_sas(message.sas_token)
        if not sas:
            return Outcome(False, f"{PREFIX}the job's sasToken for {where} is empty")
        try:
            async with asyncio.timeout(self.timeout):
                client = self._client(endpoint, queue, sas, mapped=account.lower() in self.endpoints)
                sent = await client.send_message(envelope(message.message, context))
        except TimeoutError:
            return Outcome(
                False,
                f"{PREFIX}could not add the message to {where} at {endpoint}: no answer within {self.timeout:g} s",
            )
        except HttpResponseError as exc:
            status, explanation = _describe_response(exc)
            text = f"{PREFIX}{status} from {where}" + (f": {explanation}" if explanation else "")
            return Outcome(False, redact(text, sas))
        except (ServiceRequestError, ServiceResponseError) as exc:
            return Outcome(
                False,
                redact(f"{PREFIX}could not reach account '{account}' at {endpoint}: {_describe_connection(exc)}", sas),
            )
        except Exception as exc:  # noqa: BLE001 - any other failure is a failed attempt, not a crash
            return Outcome(
                False, redact(f"{PREFIX}could not add the message to {where}: {type(exc).__name__}: {exc}", sas)
            )
        return Outcome(True, f"{PREFIX}message added to {where} (message id {sent.id})")

    def _client(self, endpoint: str, queue: str, sas: str, *, mapped: bool) -> QueueClient:
        key = (endpoint, queue, sas)
        client = self._clients.get(key)
        if client is not None:
            self._clients.move_to_end(key)
            return client
        client = QueueClient(
            endpoint,
            queue,
            credential=AzureSasCredential(sas),  # a plain string would be taken for an account key
            # An operator-mapped endpoint is the operator's choice, not the job's: it is not checked against the
            # outbound policy (docs/reference/security.md#outbound-policy); the public endpoint a job names is.
            transport=_SharedTransport(self._shared_transport(checked=not mapped)),
            retry_total=0,
            logger=_sdk_log,
        )
        self._clients[key] = client
        while len(self._clients) > MAX_CACHED_CLIENTS:
            # Nothing to close: an evicted client holds no connection of its own (the transport is shared).
            self._clients.popitem(last=False)
        return client

    def _shared_transport(self, *, checked: bool) -> AioHttpTransport:
        transport = self._transports.get(checked)
        if transport is None:
            if checked and self.shared is not None:
                session = self.shared.get()  # azure-core decompresses itself only when the session does not
            else:
                if self._session is None:
                    self._session = aiohttp.ClientSession(
                        cookie_jar=aiohttp.DummyCookieJar(),
                        auto_decompress=False,
                        trust_env=False,
                        connector=aiohttp.TCPConnector(limit=200),
                    )
                session = self._session
            transport = self._transports[checked] = AioHttpTransport(
                session=session,
                session_owner=False,
                use_env_settings=False,
                connection_timeout=min(CONNECT_TIMEOUT, self.timeout),
                read_timeout=self.timeout,
            )
        return transport

    async def close(self) -> None:
        clients, self._clients = list(self._clients.values()), OrderedDict()
        for client in clients:
            await client.close()
        if self._session is not None:
            await self._session.close()
        self._session = None
        self._transports = {}


def _describe_response(exc: HttpResponseError) -> tuple[str, str]:
    """(``403 AuthenticationFailed``, ``Server failed to authenticate the request...``): the status
    and the service's error code, then the first line of its message plus any detail fields (such as
    AuthenticationErrorDetail)."""
    status = exc.status_code or (exc.response.status_code if exc.response is not None else None)
    code = getattr(exc, "error_code", None)  # set by the storage SDK
    code_text = str(getattr(code, "value", code)) if code else ""
    if not code_text and exc.response is not None:
        code_text = exc.response.reason or ""
    head = " ".join(str(part) for part in (status, code_text) if part) or type(exc).__name__
    lines = [line.strip() for line in (exc.message or "").splitlines()]
    summary = lines[0] if lines and lines[0] not in (code_text, str(status)) else ""
    details = []
    for line in lines[1:]:
        if line.startswith("Content:"):
            break
        name, sep, value = line.partition(":")
        if sep and name not in ("RequestId", "Time", "ErrorCode") and value.strip():
            details.append(f"{name}: {value.strip()}")
    if details:
        summary = f"{summary} ({'; '.join(details)})".strip()
    return head, summary


def _describe_connection(exc: ServiceRequestError | ServiceResponseError) -> str:
    """``connection refused``, ``DNS lookup of 'host' failed``, ``TLS error``... for a failed connection."""
    inner = getattr(exc, "inner_exception", None) or exc.__cause__
    chain: list[BaseException] = []
    current: BaseException | None = inner
    while current is not None and current not in chain:
        chain.append(current)
        current = getattr(current, "os_error", None) or current.__cause__ or current.__context__
    detail = str(inner or exc)
    if isinstance(exc, ServiceRequestTimeoutError):
        return f"connection timed out after {CONNECT_TIMEOUT:g} s"
    if isinstance(exc, ServiceResponseTimeoutError):
        return "the service did not answer in time"
    if any(isinstance(e, ConnectionRefusedError) for e in chain):
        return "connection refused"
    if any(isinstance(e, socket.gaierror) for e in chain):
        host = getattr(inner, "host", None)
        return f"DNS lookup of '{host}' failed ({detail})" if host else f"DNS lookup failed ({detail})"
    if any(isinstance(e, ssl.SSLError | aiohttp.ClientSSLError) for e in chain):
        return f"TLS error ({detail})"
    if any(isinstance(e, ConnectionResetError) for e in chain):
        return "the connection was reset"
    return detail
