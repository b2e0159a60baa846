"""The service's process (``scheduler-emulator``, once cli.py has read the flags): bind the port, prepare the data
directory and the store, run the server (and, where one command should use two cores, the dispatcher role in a
child process it supervises: dispatcher/child.py). Every start-up failure a user can cause is found before any
child is started and raised as a ConfigError (one line, exit status 2: cli.py).

The order of a start: ``prepare`` (what a start can fail on), then the child is spawned, then this process imports
and builds the API (``_server``) while the child's interpreter imports the dispatcher; the server listens once the
child has made its first claim cycle (dispatcher/child.py). So this module imports only what ``prepare`` needs; the
API's modules are imported in ``_server``."""

from __future__ import annotations

import socket
import ssl as ssl_module
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, NamedTuple

from sqlalchemy import make_url
from sqlalchemy.exc import ArgumentError, DBAPIError

from scheduler_emulator import __version__
from scheduler_emulator.at_rest import make_files_private, prepare_data_dir, secret_key, secure_data_dir
from scheduler_emulator.collector import collector_paused
from scheduler_emulator.config import ConfigError, Settings
from scheduler_emulator.dispatcher import child
from scheduler_emulator.listening import bind_listeners
from scheduler_emulator.logs import configure_logging, say, stop_background_logging
from scheduler_emulator.store.database import Database
from scheduler_emulator.store.secrets import SecretBox, SecretKeyMismatch
from scheduler_emulator.tls import request_client_certificates, self_signed_certificate

if TYPE_CHECKING:
    import uvicorn


def asking_for_client_certificates(
    _config: uvicorn.Config, default: Callable[[], ssl_module.SSLContext]
) -> ssl_module.SSLContext:
    """uvicorn's server context, asking clients for a certificate (tls.request_client_certificates)."""
    context = default()
    request_client_certificates(context)
    return context


def check_store(settings: Settings) -> None:
    """Before serving: open the store, migrate it and check that the secret key opens its secrets; ConfigError
    (one line: the cause and the fix) when the store cannot be reached or used, or the key is not the one that
    sealed its secrets. Nothing stays open: the server and its dispatcher's process open their own connections."""
    if settings.in_memory:
        return
    try:
        where = make_url(settings.store.url).render_as_string(hide_password=True)
    except ArgumentError:
        where = "?"  # refused below, unshown: an unreadable URL may hold a password anywhere
    database: Database | None = None
    try:
        database = Database(settings.store.url, SecretBox(secret_key(settings.store)))
        database.migrate()
        database.prepare_secrets()
    except SecretKeyMismatch:
        raise ConfigError(
            f"the secret key does not decrypt the secrets stored in {where}: they were encrypted with another key. "
            "Start with the key that wrote them (SCHEDULER_SECRET_KEY or --secret-key-file); every process sharing "
            "a database must use the same key."
        ) from None
    except DBAPIError as exc:
        cause = " ".join(str(exc.orig).split()) if exc.orig is not None else type(exc).__name__
        raise ConfigError(
            f"the database {where} cannot be used ({cause[:300]}): check that it is running and reachable, and that "
            "--database-url (SCHEDULER_DATABASE_URL) names it"
        ) from None
    except ArgumentError:
        raise ConfigError(
            "--database-url is not a URL SQLAlchemy can read: give sqlite:///PATH or "
            "postgresql+psycopg://USER@HOST:PORT/DATABASE"
        ) from None
    except ImportError as exc:  # a dialect or driver that is not installed
        raise ConfigError(
            f"--database-url {where} needs a database driver that is not installed ({exc}): use SQLite "
            "(sqlite:///PATH) or PostgreSQL (postgresql+psycopg://USER@HOST:PORT/DATABASE)"
        ) from None
    finally:
        if database is not None:
            database.dispose()


class Prepared(NamedTuple):
    """What ``prepare`` made ready: the listening sockets and uvicorn's TLS options (none over HTTP)."""

    listeners: list[socket.socket]
    ssl: dict[str, Any]


def prepare(settings: Settings) -> Prepared:
    """Everything a start can fail on, in an order that touches nothing when it does: the port (bound and
    listening), the data directory, the store, the HTTPS certificate. ConfigError on any failure."""
    listeners = bind_listeners(settings.host, settings.port)
    try:
        make_files_private()
        prepare_data_dir(settings.store, settings.server, settings.identity)
        secure_data_dir(settings.data_dir)
        check_store(settings)
        ssl: dict[str, Any] = {}
        if settings.https:
            if settings.cert and settings.key:  # cli.py checked them (tls.check_operator_certificate)
                cert, key = settings.cert, settings.key
            else:
                cert, key = self_signed_certificate(settings.data_dir / "tls", settings.host)
                say(f"HTTPS certificate (self-signed; trust it in your client): {cert.resolve()}")
            ssl = {"ssl_certfile": str(cert), "ssl_keyfile": str(key)}
            if settings.security.mode != "none":
                # The classic surface's clients authenticate with a management certificate, asked of every client,
                # optionally, so bearer clients are served as before (docs/classic-api.md#management-certificates).
                ssl["ssl_context_factory"] = asking_for_client_certificates
    except BaseException:
        for sock in listeners:
            sock.close()
        raise
    return Prepared(listeners, ssl)


def serve(settings: Settings, *, argv: Sequence[str]) -> None:
    """Run the service in the foreground until interrupted (``settings`` as cli.py read and checked them from the
    flags ``argv``, which the dispatcher role's child is started with too); ConfigError when it cannot start (see
    prepare). The child, when there is one, is spawned once ``prepare`` has passed, and ended with this process
    however the server ends (DispatcherChild.end)."""
    prepared = prepare(settings)
    configure_logging(settings.log_level, settings.log_format)
    store = "in memory" if settings.in_memory else settings.store.url.split("@")[-1]
    say(f"azure-scheduler-emulator {__version__}: store {store}")
    wants_child = child.wanted(settings.roles, settings.store, settings.dispatch)
    dispatcher_child = child.DispatcherChild.spawned(argv) if wants_child else None

    def at_exit() -> None:
        if dispatcher_child is not None:
            dispatcher_child.end()
        stop_background_logging()

    try:
        server = _server(settings, prepared, dispatcher_child, at_exit)
        server.run(sockets=prepared.listeners)
    finally:
        at_exit()


def _server(
    settings: Settings, prepared: Prepared, dispatcher_child: child.DispatcherChild | None, at_exit: Callable[[], None]
) -> uvicorn.Server:
    """The API's server, built while the dispatcher role's child imports (the module's docstring); ``at_exit`` is
    run before uvicorn re-raises the signal that stopped it."""
    with collector_paused():  # as cli.py's imports: what is built here lives as long as the process
        import uvicorn

        from scheduler_emulator.api.access import is_loopback
        from scheduler_emulator.api.root import DASHBOARD_PATH
        from scheduler_emulator.app import create_app
        from scheduler_emulator.connections import guarded_protocol

        if settings.security.mode == "none" and not is_loopback(settings.host):
            say(
                f"WARNING: listening on {settings.host} (not loopback) with no inbound authentication: anyone who "
                "can reach the port can create jobs. Set --auth-token or --auth-jwks (docs/running-exposed.md).",
                sys.stderr,
            )
        app = create_app(settings, dispatcher_host=dispatcher_child)
    scheme = "https" if settings.https else "http"
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level,
        log_config=None,
        timeout_graceful_shutdown=int(settings.shutdown_grace) + 5,
        # Connection protection (docs/reference/security.md#protecting-the-process): uvicorn's idle keep-alive timeout,
        # plus our httptools protocol for head/body deadlines, the head size cap and the connection cap (see
        # connections.py).
        http=guarded_protocol(settings.server),
        timeout_keep_alive=settings.keep_alive_timeout,  # type: ignore[arg-type]
        **prepared.ssl,
    )
    server = uvicorn.Server(config)
    original_startup = server.startup

    async def startup(sockets: object = None) -> None:
        await original_startup(sockets)  # type: ignore[arg-type]
        urls = []
        for listener in server.servers:
            for sock in listener.sockets:
                host, port = sock.getsockname()[:2]
                urls.append(f"{scheme}://{f'[{host}]' if ':' in host else host}:{port}")
        for url in urls:
            say(f"Listening on {url}" + (" (the ARM and classic APIs)" if settings.api else " (health and metrics)"))
        if settings.api and urls:
            say(f"Dashboard: {urls[0]}{DASHBOARD_PATH}")

    server.startup = startup  # type: ignore[method-assign]
    original_capture_signals = server.capture_signals

    @contextmanager
    def capture_signals() -> Iterator[None]:
        # uvicorn ends a process stopped by a signal by raising that signal again when this context exits,
        # which runs no exit handler: the child is ended, its metrics directory removed and every log line still
        # queued is written before that.
        with original_capture_signals():
            try:
                yield
            finally:
                at_exit()

    server.capture_signals = capture_signals  # type: ignore[method-assign]
    return server
