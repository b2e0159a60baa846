"""The service's listening sockets, bound (and listening) before anything else starts.

A port already taken is the commonest start-up failure a user causes (a second emulator on the same data, say). It
is found first, before the store is opened or the dispatcher's and action processes are forked, so that such a
start touches nothing and says why at once. uvicorn then serves on these sockets (``Server.run(sockets=...)``).

The forked children inherit the descriptors (a fork copies them all): each child closes them as it starts
(``os.register_at_fork``), so that no child keeps the port open, or takes connections, once the service's process
has ended."""

from __future__ import annotations

import errno
import os
import socket

from scheduler_emulator.config import ConfigError

BACKLOG = 2048  # uvicorn's default


def bind_listeners(host: str, port: int) -> list[socket.socket]:
    """Sockets listening on ``host``:``port``, one per address ``host`` resolves to (as asyncio's create_server
    binds them; with port 0, every address on the one port the first was given). ConfigError, in one line that
    names the cause and the fix, when the port is taken or the host cannot be listened on."""
    try:
        found = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise ConfigError(
            f"--host {host} does not resolve to an address ({exc.strerror}): give an address of this machine, e.g. "
            "127.0.0.1 (loopback) or 0.0.0.0 (every interface)"
        ) from None
    listeners: list[socket.socket] = []
    try:
        for family, kind, protocol, _, address in dict.fromkeys(found):
            if listeners and port == 0:
                address = (address[0], listeners[0].getsockname()[1], *address[2:])
            sock = socket.socket(family, kind, protocol)
            listeners.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a restart need not wait for TIME_WAIT
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
            # Listening at once: with SO_REUSEADDR a second process may bind a port that is bound but not yet
            # listening; connections made before the server starts wait in the backlog.
            sock.listen(BACKLOG)
    except OSError as exc:
        for sock in listeners:
            sock.close()
        raise ConfigError(_why_not(exc, host, port)) from None
    os.register_at_fork(after_in_child=lambda: _close(listeners))
    return listeners


def _close(listeners: list[socket.socket]) -> None:
    for sock in listeners:
        sock.close()


def _why_not(exc: OSError, host: str, port: int) -> str:
    """The one line that says why ``host``:``port`` cannot be listened on, and what to do."""
    if exc.errno == errno.EADDRINUSE:
        return (
            f"port {port} on {host} is already in use (another scheduler-emulator, or another program, listens "
            "there): stop it, or choose another port with --port (0 picks a free one)"
        )
    if exc.errno == errno.EACCES:
        return (
            f"no permission to listen on port {port} (ports below 1024 need privileges): choose a port from 1024 "
            "up with --port"
        )
    if exc.errno == errno.EADDRNOTAVAIL:
        return f"--host {host} is not an address of this machine: give one of its addresses, e.g. 127.0.0.1 or 0.0.0.0"
    return f"cannot listen on {host}:{port} ({exc.strerror}): check --host and --port"
