"""Http and Https actions over the process's shared httpx client (one more per client certificate),
with Basic, ClientCertificate and ActiveDirectoryOAuth authentication."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import os
import socket
import ssl
import tempfile
import time
from collections import OrderedDict
from urllib.parse import urlsplit

import httpx
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12

from scheduler_emulator.config import Settings
from scheduler_emulator.dispatcher.actions import FireContext, Outcome, body_excerpt
from scheduler_emulator.domain.clock import isoformat_z
from scheduler_emulator.schemas.job import HttpRequest

MAX_REDIRECTS = 5


def new_client(timeout: float) -> httpx.AsyncClient:
    """The shared client: certificates verified, redirects followed (at most 5), the action timeout."""
    return httpx.AsyncClient(
        timeout=httpx.Timeout(timeout),
        follow_redirects=True,
        max_redirects=MAX_REDIRECTS,
        verify=ssl.create_default_context(),
        limits=httpx.Limits(max_connections=1000, max_keepalive_connections=200),
        trust_env=False,
    )


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
    """Sends the job's request; success is a 2xx answer after redirects."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.client = new_client(settings.action_timeout)
        self.certificates = ClientCertificates(settings.action_timeout)
        self.tokens = TokenCache(self.client, settings.oauth_authority)

    async def close(self) -> None:
        await self.certificates.close()
        await self.client.aclose()

    async def execute(self, request: HttpRequest, context: FireContext) -> Outcome:
        headers = dict(request.headers or {})
        headers.update(scheduler_headers(context))
        host = urlsplit(request.uri).hostname or request.uri
        client = self.client
        auth = request.authentication
        if auth is not None and auth.type == "Basic":
            token = base64.b64encode(f"{auth.username}:{auth.password}".encode()).decode()
            headers["Authorization"] = f"Basic {token}"
        elif auth is not None and auth.type == "ClientCertificate":
            try:
                client = self.certificates.client_for(auth.pfx or "", auth.password)
            except ValueError as exc:
                return Outcome(False, f"Http Action - the client certificate could not be used: {exc}")
        elif auth is not None and auth.type == "ActiveDirectoryOAuth":
            try:
                bearer = await self.tokens.token(auth.tenant or "", auth.client_id or "", auth.secret or "",
                                                 auth.audience or "")
            except TokenError as exc:
                return Outcome(False, f"Http Action - {exc}")
            headers["Authorization"] = f"Bearer {bearer}"
        try:
            response = await client.request(
                request.method.upper(),
                request.uri,
                headers=headers,
                content=request.body.encode() if request.body is not None else None,
            )
        except httpx.TimeoutException:
            return Outcome(False, f"Http Action - Request to host '{host}' failed: the request timed out")
        except httpx.TooManyRedirects:
            return Outcome(False, f"Http Action - Request to host '{host}' failed: more than {MAX_REDIRECTS} redirects")
        except (httpx.HTTPError, OSError) as exc:  # ssl.SSLError can escape httpx's mapping during a read
            tls = urlsplit(request.uri).scheme.lower() == "https"
            return Outcome(False, f"Http Action - Request to host '{host}' failed: {_describe(exc, tls)}")
        reason = response.reason_phrase or ""
        message = (
            f"Http Action - Response from host '{response.url.host or host}': "
            f"'{response.status_code} {reason}'".rstrip() + f" Body: {body_excerpt(response.content)}"
        )
        return Outcome(200 <= response.status_code < 300, message)


class ClientCertificates:
    """One client per ClientCertificate pfx, presenting it as the TLS client certificate. Python's ssl module
    loads certificates only from files, so each pfx is converted to PEM in a private temporary file that is
    removed as soon as it is loaded."""

    MAX_CLIENTS = 64

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self._clients: OrderedDict[str, httpx.AsyncClient] = OrderedDict()

    def client_for(self, pfx_base64: str, password: str | None) -> httpx.AsyncClient:
        key = hashlib.sha256(f"{pfx_base64}\0{password or ''}".encode()).hexdigest()
        client = self._clients.get(key)
        if client is not None:
            self._clients.move_to_end(key)
            return client
        context = ssl.create_default_context()
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
        with tempfile.TemporaryDirectory(prefix="scheduler-cert-") as directory:
            path = os.path.join(directory, "client.pem")
            descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(descriptor, "wb") as file:
                file.write(pem)
            context.load_cert_chain(path)
        client = httpx.AsyncClient(
            timeout=httpx.Timeout(self.timeout), follow_redirects=True, max_redirects=MAX_REDIRECTS,
            verify=context, trust_env=False,
        )
        self._clients[key] = client
        if len(self._clients) > self.MAX_CLIENTS:
            _, oldest = self._clients.popitem(last=False)
            asyncio.get_running_loop().create_task(oldest.aclose())
        return client

    async def close(self) -> None:
        for client in self._clients.values():
            await client.aclose()
        self._clients.clear()


class TokenError(Exception):
    """A token could not be obtained; the message says from where and why (never the secret)."""


class TokenCache:
    """Client-credentials tokens from ``{authority}/{tenant}/oauth2/token``, reused until shortly before
    they expire."""

    def __init__(self, client: httpx.AsyncClient, authority: str) -> None:
        self.client = client
        self.authority = authority.rstrip("/")
        self._tokens: dict[str, tuple[str, float]] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    async def token(self, tenant: str, client_id: str, secret: str, audience: str) -> str:
        key = hashlib.sha256("\0".join((tenant, client_id, secret, audience)).encode()).hexdigest()
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            cached = self._tokens.get(key)
            if cached is not None and time.monotonic() < cached[1]:
                return cached[0]
            url = f"{self.authority}/{tenant}/oauth2/token"
            where = f"could not obtain a token for audience '{audience}' from {url}"
            try:
                response = await self.client.post(url, data={
                    "grant_type": "client_credentials", "client_id": client_id, "client_secret": secret,
                    "resource": audience,
                })
            except (httpx.HTTPError, OSError) as exc:
                raise TokenError(f"{where}: {_describe(exc)}") from None
            if response.status_code != 200:
                raise TokenError(f"{where}: '{response.status_code} {response.reason_phrase}' "
                                 f"Body: {body_excerpt(response.content)}")
            try:
                body = response.json()
                access_token = str(body["access_token"])
                lifetime = float(body.get("expires_in", 3600))
            except (ValueError, KeyError, TypeError):
                raise TokenError(f"{where}: the answer holds no access_token") from None
            # Renew shortly before expiry: 5 minutes early, or a tenth of the lifetime for short-lived tokens.
            margin = min(300.0, lifetime / 10)
            self._tokens[key] = (access_token, time.monotonic() + lifetime - margin)
            return access_token


def _describe(exc: BaseException, tls: bool = False) -> str:
    """What went wrong, in a user's words: the most specific cause in the exception chain."""
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and len(chain) < 10:
        chain.append(current)
        current = current.__cause__ or current.__context__
    for error in chain:
        if isinstance(error, ssl.SSLCertVerificationError):
            return f"TLS error: the server certificate is not trusted ({error.verify_message})"
        if isinstance(error, ssl.SSLError):
            return f"TLS error: {error.reason or error}"
    for error in chain:
        if isinstance(error, ConnectionRefusedError):
            return "connection refused"
        if isinstance(error, ConnectionResetError):
            hint = " during TLS (the server may have refused the client certificate)" if tls else ""
            return f"the connection was reset by the server{hint}"
        if isinstance(error, socket.gaierror):
            return f"the host name could not be resolved ({error})"
    return next((str(error) for error in chain if str(error)), type(exc).__name__)
