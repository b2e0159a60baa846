"""A raw HTTPS client for requests no ordinary client sends: paths with dot segments or escapes kept as
written, any body bytes, any Content-Type."""

from __future__ import annotations

import http.client
import ssl
from urllib.parse import urlsplit

from support.server import ServerProcess


class RawClient:
    """Requests sent exactly as written (no path normalisation, any body bytes) over one kept-alive
    connection, reopened whenever the server closes it."""

    def __init__(self, server: ServerProcess) -> None:
        parts = urlsplit(server.url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 443
        verify = server.verify
        self.context = verify if isinstance(verify, ssl.SSLContext) else ssl.create_default_context()
        self.connection: http.client.HTTPSConnection | None = None

    def request(self, method: str, target: str, headers: dict[str, str], body: bytes | None) -> tuple[int, bytes, str]:
        for attempt in range(2):
            if self.connection is None:
                self.connection = http.client.HTTPSConnection(self.host, self.port, context=self.context, timeout=30)
            try:
                self.connection.putrequest(method, target, skip_accept_encoding=True)
                for name, value in headers.items():
                    self.connection.putheader(name, value.encode("utf-8"))
                if body is not None:
                    self.connection.putheader("content-length", str(len(body)))
                self.connection.endheaders(body)
                response = self.connection.getresponse()
                data = response.read()
                if response.getheader("connection", "").lower() == "close":
                    self.close()
                return response.status, data, response.getheader("content-type", "")
            except (ConnectionError, http.client.HTTPException, ssl.SSLError):
                self.close()
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def close(self) -> None:
        if self.connection is not None:
            self.connection.close()
            self.connection = None
