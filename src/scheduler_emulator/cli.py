"""``scheduler-emulator``: parse the flags, prepare HTTPS, run the server."""

from __future__ import annotations

import logging
import sys

import uvicorn

from scheduler_emulator import __version__
from scheduler_emulator.app import create_app
from scheduler_emulator.config import ConfigError, Settings, settings_from_args
from scheduler_emulator.tls import self_signed_certificate

# How long open connections get to finish on shutdown before they are dropped.
GRACEFUL_SHUTDOWN_SECONDS = 5


def main(argv: list[str] | None = None) -> None:
    try:
        settings = settings_from_args(argv)
    except ConfigError as exc:
        print(f"scheduler-emulator: error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    serve(settings)


def serve(settings: Settings) -> None:
    """Run the service in the foreground until interrupted."""
    logging.basicConfig(level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(max(logging.WARNING, logging.getLogger().level))
    ssl: dict[str, str] = {}
    if settings.https:
        if settings.cert and settings.key:
            cert, key = settings.cert, settings.key
            for path in (cert, key):
                if not path.is_file():
                    print(f"scheduler-emulator: error: {path} does not exist", file=sys.stderr)
                    raise SystemExit(2)
        else:
            cert, key = self_signed_certificate(settings.data_dir / "tls", settings.host)
            print(f"HTTPS certificate (self-signed; trust it in your client): {cert.resolve()}", flush=True)
        ssl = {"ssl_certfile": str(cert), "ssl_keyfile": str(key)}
    scheme = "https" if settings.https else "http"
    store = "in memory" if settings.in_memory else settings.effective_database_url.split("@")[-1]
    print(f"azure-scheduler-emulator {__version__}: store {store}", flush=True)
    config = uvicorn.Config(
        create_app(settings),
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level,
        # An idle keep-alive HTTPS connection whose client never answers the TLS close_notify would
        # otherwise hold a SIGTERM for asyncio's 30 s SSL shutdown timeout (or until killed).
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECONDS,
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
                print(f"Listening on {scheme}://{shown}:{port}", flush=True)

    server.startup = startup  # type: ignore[method-assign]
    server.run()
