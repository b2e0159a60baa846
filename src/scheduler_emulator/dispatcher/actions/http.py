"""Http and Https actions, over the process's one shared httpx client."""

from __future__ import annotations

import base64
import ssl
from urllib.parse import urlsplit

import httpx

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

    async def close(self) -> None:
        await self.client.aclose()

    async def execute(self, request: HttpRequest, context: FireContext) -> Outcome:
        headers = dict(request.headers or {})
        headers.update(scheduler_headers(context))
        auth = request.authentication
        if auth is not None and auth.type == "Basic":
            token = base64.b64encode(f"{auth.username}:{auth.password}".encode()).decode()
            headers["Authorization"] = f"Basic {token}"
        elif auth is not None and auth.type in ("ClientCertificate", "ActiveDirectoryOAuth"):
            return Outcome(False, f"Http Action - {auth.type} authentication is not supported by this emulator yet")
        host = urlsplit(request.uri).hostname or request.uri
        try:
            response = await self.client.request(
                request.method.upper(),
                request.uri,
                headers=headers,
                content=request.body.encode() if request.body is not None else None,
            )
        except httpx.TimeoutException:
            return Outcome(False, f"Http Action - Request to host '{host}' failed: the request timed out")
        except httpx.TooManyRedirects:
            return Outcome(False, f"Http Action - Request to host '{host}' failed: more than {MAX_REDIRECTS} redirects")
        except httpx.HTTPError as exc:
            return Outcome(False, f"Http Action - Request to host '{host}' failed: {_describe(exc)}")
        reason = response.reason_phrase or ""
        message = (
            f"Http Action - Response from host '{response.url.host or host}': "
            f"'{response.status_code} {reason}'".rstrip() + f" Body: {body_excerpt(response.content)}"
        )
        return Outcome(200 <= response.status_code < 300, message)


def _describe(exc: httpx.HTTPError) -> str:
    cause = exc.__cause__ or exc.__context__
    text = str(exc) or type(exc).__name__
    if cause is not None and str(cause) and str(cause) not in text:
        text = f"{text} ({cause})"
    if isinstance(exc, httpx.ConnectError) and "refused" in text.lower():
        return f"connection refused ({text})"
    return text
