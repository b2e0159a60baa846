"""The service's process (``scheduler-emulator``, once cli.py has read the flags): prepare HTTPS, check the store,
run the server."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn

from scheduler_emulator import __version__
from scheduler_emulator.api.access import is_loopback
from scheduler_emulator.app import create_app
from scheduler_emulator.at_rest import make_files_private, secret_key, secure_data_dir
from scheduler_emulator.config import ConfigError, Settings
from scheduler_emulator.connections import guarded_protocol
from scheduler_emulator.dispatcher.action_process import ActionProcess
from scheduler_emulator.dispatcher.action_process import wanted as action_process_wanted
from scheduler_emulator.dispatcher.own_process import DispatcherProcess
from scheduler_emulator.dispatcher.own_process import wanted as dispatcher_process_wanted
from scheduler_emulator.logs import configure_logging, say, stop_background_logging
from scheduler_emulator.store.database import Database
from scheduler_emulator.store.secrets import SecretBox, SecretKeyMismatch
from scheduler_emulator.tls import self_signed_certificate


def check_secret_key(settings: Settings) -> None:
    """Before serving: migrate the store and check that the secret key opens its secrets (ConfigError if
    not), so that a wrong key stops start-up with a clear message instead of failing inside the server."""
    if settings.in_memory:
        return
    database = Database(settings.effective_database_url, SecretBox(secret_key(settings)))
    try:
        database.migrate()
        database.prepare_secrets()
    except SecretKeyMismatch:
        raise ConfigError(
            "the secret key does not decrypt the secrets stored in "
            f"{settings.effective_database_url.split('@')[-1]}: they were encrypted with another key. Start with "
            "the key that wrote them (SCHEDULER_SECRET_KEY or --secret-key-file); every process sharing a "
            "database must use the same key."
        ) from None
    finally:
        database.dispose()


def serve(settings: Settings) -> None:
    """Run the service in the foreground until interrupted (``settings`` as cli.py read and checked them)."""
    # Forked first, while this process runs one thread (see dispatcher/action_process.py). The dispatcher's
    # process, when there is one, forks the action process of its own.
    dispatcher_process = DispatcherProcess.fork(settings) if dispatcher_process_wanted(settings) else None
    wants_actions = dispatcher_process is None and action_process_wanted(settings)
    action_process = ActionProcess.fork(settings) if wants_actions else None
    configure_logging(settings.log_level, settings.log_format)
    make_files_private()
    secure_data_dir(settings.data_dir)
    ssl: dict[str, str] = {}
    if settings.https:
        if settings.cert and settings.key:  # both exist: cli.py checked them (config.check_certificate_files)
            cert, key = settings.cert, settings.key
        else:
            cert, key = self_signed_certificate(settings.data_dir / "tls", settings.host)
            say(f"HTTPS certificate (self-signed; trust it in your client): {cert.resolve()}")
        ssl = {"ssl_certfile": str(cert), "ssl_keyfile": str(key)}
    scheme = "https" if settings.https else "http"
    store = "in memory" if settings.in_memory else settings.effective_database_url.split("@")[-1]
    say(f"azure-scheduler-emulator {__version__}: store {store}")
    if settings.auth_mode == "none" and not is_loopback(settings.host):
        say(
            f"WARNING: listening on {settings.host} (not loopback) with no inbound authentication: anyone who can "
            "reach the port can create jobs. Set --auth-token or --auth-jwks (docs/running-exposed.md).",
            sys.stderr,
        )
    try:
        app = create_app(settings, action_process=action_process, dispatcher_process=dispatcher_process)
        check_secret_key(settings)
    except ConfigError as exc:
        say(f"scheduler-emulator: error: {exc}", sys.stderr)
        raise SystemExit(2) from None
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
        http=guarded_protocol(settings),
        timeout_keep_alive=settings.keep_alive_timeout,  # type: ignore[arg-type]
        **ssl,  # type: ignore[arg-type]
    )
    server = uvicorn.Server(config)
    original_startup = server.startup

    async def startup(sockets: object = None) -> None:
        await original_startup(sockets)  # type: ignore[arg-type]
        for listener in server.servers:
            for sock in listener.sockets:
                host, port = sock.getsockname()[:2]
                shown = f"[{host}]" if ":" in host else host
                say(f"Listening on {scheme}://{shown}:{port}")

    server.startup = startup  # type: ignore[method-assign]
    original_capture_signals = server.capture_signals

    @contextmanager
    def capture_signals() -> Iterator[None]:
        # uvicorn ends a process stopped by a signal by raising that signal again when this context exits,
        # which runs no exit handler: every log line still queued is written before that.
        with original_capture_signals():
            try:
                yield
            finally:
                stop_background_logging()

    server.capture_signals = capture_signals  # type: ignore[method-assign]
    try:
        server.run()
    finally:
        stop_background_logging()
