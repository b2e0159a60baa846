"""Http and Https actions, with Basic, ClientCertificate and ActiveDirectoryOAuth authentication.

The hot path uses aiohttp, one session per process: measured against a local nginx from one asyncio
process (bench/http_clients.py), aiohttp sustains 4,600–6,900 requests/s at 1–64 requests in flight,
while httpx falls from about 940/s with 1 in flight to about 110/s with 64 — and the dispatcher has many
occurrences in flight at once."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
import socket
import ssl
import tempfile
import time
from collections import OrderedDict
from dataclasses import dataclass
from urllib.parse import urlsplit

import aiohttp
from yarl import URL

from scheduler_emulator.config_groups import OutboundSettings
from scheduler_emulator.dispatcher.actions import MAX_MESSAGE_BODY_BYTES, FireContext, Outcome, body_excerpt
from scheduler_emulator.dispatcher.actions.outbound import BlockedTarget, literal_refusal
from scheduler_emulator.dispatcher.actions.session import SharedSession, exact_timeout
from scheduler_emulator.domain.clock import isoformat_z
from scheduler_emulator.domain.outbound import OutboundPolicy
from scheduler_emulator.schemas.job import HttpRequest

MAX_REDIRECTS = 5


def scheduler_headers(context: FireContext) -> dict[str, str]:
    """The ``x-ms-*`` headers the real service added to every request."""
    return {
        "x-ms-execution-tag": context.execution_tag,
        "x-ms-client-request-id": context.client_request_id,
        "x-ms-scheduler-expected-execution-time": isoformat_z(context.expected_time),
        "x-ms-scheduler-jobid": context.job_name,
        "x-ms-scheduler-jobcollectionid": context.collection_name,
        "x-ms-scheduler-execution-region": context.region,
    }


class HttpAction:
    """Sends the job's request; success is a 2xx answer after redirects (at most 5)."""

    def __init__(self, outbound: OutboundSettings, shared: SharedSession) -> None:
        self.shared = shared
        self.timeout = shared.timeout
        self.timeout_seconds = shared.seconds
        self.verify = shared.verify
        self.policy = outbound.policy
        self.certificates = ClientCertificates()
        self.tokens = TokenCache(outbound.oauth_authority, self.policy)
        self._urls: dict[str, URL] = {}  # parsed once per URI (aiohttp would parse a string at every request)
        self._refusals: dict[str, str | None] = {}  # literal_refusal by URL host

    def session(self) -> aiohttp.ClientSession:
        """The process's one session (see session.py)."""
        return self.shared.get()

    async def close(self) -> None:
        """Nothing of its own to close: the shared session is closed by its owner."""

    async def execute(self, request: HttpRequest, context: FireContext) -> Outcome:
        url = self._urls.get(request.uri)
        if url is None:
            if len(self._urls) >= 10_000:
                self._urls.clear()
            try:
                url = self._urls[request.uri] = URL(request.uri)
            except ValueError as exc:
                return _failed(request.uri, f"the URI is not valid ({exc})")
        tls: ssl.SSLContext = self.verify
        credentials: dict[str, str] = {}  # headers that carry the job's secrets
        auth = request.authentication
        if auth is not None and auth.type == "Basic":
            token = base64.b64encode(f"{auth.username}:{auth.password}".encode()).decode()
            credentials["Authorization"] = f"Basic {token}"
        elif auth is not None and auth.type == "ClientCertificate":
            try:
                tls = self.certificates.context_for(auth.pfx or "", auth.password)
            except ValueError as exc:
                return Outcome(False, f"Http Action - the client certificate could not be used: {exc}")
        elif auth is not None and auth.type == "ActiveDirectoryOAuth":
            try:
                bearer = await self.tokens.token(
                    self.session(),
                    tenant=auth.tenant or "",
                    client_id=auth.client_id or "",
                    secret=auth.secret or "",
                    audience=auth.audience or "",
                )
            except TokenError as exc:
                return Outcome(False, f"Http Action - {exc}")
            credentials["Authorization"] = f"Bearer {bearer}"
        service_headers = scheduler_headers(context)
        first = Hop(
            url=url,
            method=request.method.upper(),
            body=request.body.encode() if request.body is not None else None,
            headers={**(request.headers or {}), **credentials, **service_headers},
            tls=tls,
        )
        try:
            return await self._follow(first, service_headers, request.uri)
        except TimeoutError:
            return _failed(request.uri, "the request timed out")
        except (aiohttp.ClientError, OSError) as exc:
            return _failed(request.uri, describe_error(exc, urlsplit(request.uri).scheme.lower() == "https"))

    def _refusal(self, host: str) -> str | None:
        """literal_refusal, asked before every request: the answer for a host is kept (the policy is fixed)."""
        if host in self._refusals:
            return self._refusals[host]
        if len(self._refusals) >= 10_000:
            self._refusals.clear()
        refusal = self._refusals[host] = literal_refusal(self.policy, host)
        return refusal

    async def _follow(self, hop: Hop, service_headers: dict[str, str], uri: str) -> Outcome:
        """Send ``hop`` and follow redirects (at most 5), each destination checked by the outbound policy.
        Once a redirect leaves the job's origin, the job's headers and credentials (Authorization, cookies,
        the client certificate) stay behind: only the service's own ``x-ms-*`` headers go on.

        The action timeout bounds the whole attempt, redirects and body included: aiohttp's total timeout
        covers a request from connecting to reading its body, and each redirect gets what is left of it (one
        timer per request, where an ``asyncio.timeout`` around the attempt was a second one: ~3 % of a
        dispatcher's CPU at 3,000 fires/s)."""
        origin: tuple[str, str, int] | None = None  # the job's origin, worked out at the first redirect
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout_seconds
        timeout = self.timeout
        for _ in range(MAX_REDIRECTS + 1):
            if (refusal := self._refusal(hop.url.host or "")) is not None:
                return _failed(uri, refusal)
            async with self.session().request(
                hop.method,
                hop.url,
                headers=hop.headers,
                data=hop.body,
                allow_redirects=False,
                ssl=hop.tls,
                timeout=timeout,
            ) as response:
                location = response.headers.get("Location") if response.status in REDIRECTS else None
                if location is None:
                    excerpt = await response.content.read(MAX_MESSAGE_BODY_BYTES)
                    host = hop.url.host or _host(uri)
                    message = response_message(host, response.reason, response.raw_headers, excerpt)
                    return Outcome(200 <= response.status < 300, message)
                status = response.status
            left = deadline - loop.time()
            if left <= 0:
                raise TimeoutError
            timeout = exact_timeout(left)
            try:
                target = hop.url.join(URL(location))
            except ValueError:
                return _failed(uri, f"a redirect named an invalid Location ({location[:200]!r})")
            if target.scheme not in ("http", "https") or not target.host:
                return _failed(uri, f"a redirect led to '{str(target)[:200]}', which is not an http(s) URL")
            method, body = hop.method, hop.body
            if status == 303 or (status in (301, 302) and method == "POST"):
                method, body = ("HEAD" if method == "HEAD" else "GET"), None  # as browsers and aiohttp do
            if origin is None:
                origin = _origin(hop.url)
            if _origin(target) != origin:
                hop = Hop(url=target, method=method, body=body, headers=dict(service_headers), tls=self.verify)
                origin = ("", "", 0)  # crossed once: nothing of the job's comes back on a later hop
            else:
                hop = Hop(url=target, method=method, body=body, headers=hop.headers, tls=hop.tls)
        return _failed(uri, f"more than {MAX_REDIRECTS} redirects")


REDIRECTS = frozenset({301, 302, 303, 307, 308})


@dataclass(frozen=True, kw_only=True)
class Hop:
    """One request of an attempt: the first, or one a redirect asked for."""

    url: URL
    method: str
    body: bytes | None
    headers: dict[str, str]
    tls: ssl.SSLContext


def _origin(url: URL) -> tuple[str, str, int]:
    return (url.scheme.lower(), (url.host or "").lower(), url.port or 0)


MAX_MESSAGE_HEADERS_BYTES = 2048
# .NET keeps these on the response's content, not in the HttpResponseMessage.Headers the service wrote out.
_CONTENT_HEADERS = frozenset(
    {
        "allow",
        "content-disposition",
        "content-encoding",
        "content-language",
        "content-length",
        "content-location",
        "content-md5",
        "content-range",
        "content-type",
        "expires",
        "last-modified",
    }
)


def response_message(host: str, reason: str | None, headers: tuple[tuple[bytes, bytes], ...], body: bytes) -> str:
    """A history message in the service's words (docs/reference/actions.md#history-messages), as recorded
    (azure-sdk-for-net's Scenario_JobHistoryList session, 2016): ``Http Action - Response from host '{host}': '{reason
    phrase as sent}' Response Headers: {Name: value\\r\\n per header, the values of a repeated header joined by ', ',
    content headers left out, as .NET's HttpResponseHeaders.ToString() writes them} Body: {the first 2048 bytes}``. The
    headers are cut at 2048 bytes too, so that a message stays bounded."""
    merged: dict[str, tuple[str, list[str]]] = {}
    for raw_name, raw_value in headers:
        name = raw_name.decode("latin-1")
        if name.lower() not in _CONTENT_HEADERS:
            merged.setdefault(name.lower(), (name, []))[1].append(raw_value.decode("latin-1"))
    lines = "".join(f"{name}: {', '.join(values)}\r\n" for name, values in merged.values())
    shown = body_excerpt(lines.encode()[:MAX_MESSAGE_HEADERS_BYTES])
    head = f"Http Action - Response from host '{host}': '{reason or ''}'"
    return f"{head} Response Headers: {shown} Body: {body_excerpt(body)}"


def _host(uri: str) -> str:
    return urlsplit(uri).hostname or uri


def _failed(uri: str, why: str) -> Outcome:
    return Outcome(False, f"Http Action - Request to host '{_host(uri)}' failed: {why}")


class ClientCertificates:
    """An SSL context per ClientCertificate pfx, presenting it as the TLS client certificate. Python's ssl
    module loads certificates only from files, so each pfx is converted to PEM in a private temporary file
    that is removed as soon as it is loaded."""

    MAX_CONTEXTS = 256

    def __init__(self) -> None:
        self._contexts: OrderedDict[str, ssl.SSLContext] = OrderedDict()

    def context_for(self, pfx_base64: str, password: str | None) -> ssl.SSLContext:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.serialization import pkcs12

        key = hashlib.sha256(f"{pfx_base64}\0{password or ''}".encode()).hexdigest()
        context = self._contexts.get(key)
        if context is not None:
            self._contexts.move_to_end(key)
            return context
        try:
            private_key, certificate, chain = pkcs12.load_key_and_certificates(
                base64.b64decode(pfx_base64), password.encode() if password else None
            )
        except Exception as exc:  # noqa: BLE001 - any failure means the pfx cannot be used
            raise ValueError("the pfx does not open with its password") from exc
        if private_key is None or certificate is None:
            raise ValueError("the pfx holds no certificate with a private key")
        pem = private_key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ) + b"".join(c.public_bytes(serialization.Encoding.PEM) for c in [certificate, *chain])
        context = ssl.create_default_context()
        with tempfile.TemporaryDirectory(prefix="scheduler-cert-") as directory:
            path = os.path.join(directory, "client.pem")
            descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(descriptor, "wb") as file:
                file.write(pem)
            context.load_cert_chain(path)
        self._contexts[key] = context
        if len(self._contexts) > self.MAX_CONTEXTS:
            self._contexts.popitem(last=False)
        return context


class TokenError(Exception):
    """A token could not be obtained; the message says from where and why (never the secret)."""


class TokenCache:
    """Client-credentials tokens from ``{authority}/{tenant}/oauth2/token``, reused until shortly before
    they expire; the ``MAX_TOKENS`` most recently used are kept (least recently used dropped first)."""

    MAX_TOKENS = 4096

    def __init__(self, authority: str, policy: OutboundPolicy) -> None:
        self.authority = authority.rstrip("/")
        self.policy = policy
        self._tokens: OrderedDict[str, tuple[str, float]] = OrderedDict()
        self._locks: dict[str, asyncio.Lock] = {}  # one fetch at a time per key; only while a fetch may run

    async def token(
        self, session: aiohttp.ClientSession, *, tenant: str, client_id: str, secret: str, audience: str
    ) -> str:
        key = hashlib.sha256("\0".join((tenant, client_id, secret, audience)).encode()).hexdigest()
        cached = self._tokens.get(key)
        if cached is not None and time.monotonic() < cached[1]:
            self._tokens.move_to_end(key)
            return cached[0]
        lock = self._locks.setdefault(key, asyncio.Lock())
        try:
            async with lock:
                return await self._fetch(
                    session, key, tenant=tenant, client_id=client_id, secret=secret, audience=audience
                )
        finally:
            # Nobody holds it now: forget it, so the map stays bounded (at worst a caller arriving this instant
            # fetches a token of its own too).
            if not lock.locked():
                self._locks.pop(key, None)

    async def _fetch(
        self,
        session: aiohttp.ClientSession,
        key: str,
        *,
        tenant: str,
        client_id: str,
        secret: str,
        audience: str,
    ) -> str:
        """A token for ``key``: the cached one if a concurrent fetch just stored it, else a new one."""
        cached = self._tokens.get(key)
        if cached is not None and time.monotonic() < cached[1]:
            return cached[0]
        url = f"{self.authority}/{tenant}/oauth2/token"
        where = f"could not obtain a token for audience '{audience}' from {url}"
        if (refusal := literal_refusal(self.policy, URL(url).host)) is not None:
            raise TokenError(f"{where}: {refusal}")
        form = {
            "grant_type": "client_credentials",
            "client_id": client_id,
            "client_secret": secret,
            "resource": audience,
        }
        try:
            async with session.post(url, data=form, allow_redirects=False) as response:
                content = await response.read()
                status, reason = response.status, response.reason
        except TimeoutError:
            raise TokenError(f"{where}: the request timed out") from None
        except (aiohttp.ClientError, OSError) as exc:
            raise TokenError(f"{where}: {describe_error(exc, url.startswith('https'))}") from None
        if status != 200:
            raise TokenError(f"{where}: '{status} {reason}' Body: {body_excerpt(content)}")
        try:
            body = json.loads(content)
            access_token = str(body["access_token"])
            lifetime = float(body.get("expires_in", 3600))
        except (ValueError, KeyError, TypeError):
            raise TokenError(f"{where}: the answer holds no access_token") from None
        # Renew shortly before expiry: 5 minutes early, or a tenth of the lifetime for short-lived tokens.
        margin = min(300.0, lifetime / 10)
        self._tokens[key] = (access_token, time.monotonic() + lifetime - margin)
        self._tokens.move_to_end(key)
        while len(self._tokens) > self.MAX_TOKENS:
            self._tokens.popitem(last=False)
        return access_token


def describe_error(exc: BaseException, tls: bool = False) -> str:
    """What went wrong, in a user's words: the most specific cause in the exception chain."""
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and len(chain) < 10:
        chain.append(current)
        current = current.__cause__ or current.__context__ or getattr(current, "os_error", None)
    for error in chain:
        if isinstance(error, BlockedTarget):
            return str(error)
        if isinstance(error, aiohttp.ClientConnectorCertificateError):
            return f"TLS error: the server certificate is not trusted ({error.certificate_error})"
        if isinstance(error, ssl.SSLCertVerificationError):
            return f"TLS error: the server certificate is not trusted ({error.verify_message})"
        if isinstance(error, ssl.SSLError):
            return f"TLS error: {error.reason or error}"
    for error in chain:
        if isinstance(error, ConnectionRefusedError):
            return "connection refused"
        if isinstance(error, socket.gaierror):
            return f"the host name could not be resolved ({error})"
        if isinstance(error, ConnectionResetError | aiohttp.ServerDisconnectedError):
            hint = " during TLS (the server may have refused the client certificate)" if tls else ""
            return f"the connection was reset by the server{hint}"
    return next((str(error) for error in chain if str(error)), type(exc).__name__)
