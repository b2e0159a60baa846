"""``scheduler-emulator``: parse the flags, then run the service (serving.py)."""

from __future__ import annotations

import sys
from typing import NoReturn

from scheduler_emulator.collector import collector_paused


def refuse(exc: Exception) -> NoReturn:
    """End a start that cannot work: one line on stderr (the cause and the fix), exit status 2."""
    from scheduler_emulator.logs import say

    say(f"scheduler-emulator: error: {exc}", sys.stderr)
    raise SystemExit(2)


def main(argv: list[str] | None = None) -> None:
    """Read and check the flags and the environment first, then import the service: a start refused for a bad
    flag or value imports only the settings (pydantic), not the app and its dependencies (a fraction of the
    cost of a start). Every start-up failure a user can cause (a ConfigError, here or in serving.serve) ends the
    process with one line and exit status 2, never a traceback."""
    with collector_paused():
        from scheduler_emulator.at_rest import check_given_secret_key
        from scheduler_emulator.config import ConfigError, settings_from_args
        from scheduler_emulator.tls import check_operator_certificate, load_certificate

        try:
            settings = settings_from_args(argv)
            server = settings.server
            if server.cert and server.key:
                check_operator_certificate(server.cert, server.key)
            for _, path in settings.security.management_certificates:
                load_certificate(path)  # read again by the app (api/classic/certificates.py); here before any child
            check_given_secret_key(settings.store)
        except ConfigError as exc:
            refuse(exc)
        if settings.supervised:  # the dispatcher role's child of a serving process: no server to import
            from scheduler_emulator.dispatcher.role import run_supervised

            run_supervised(settings)
            return
        from scheduler_emulator.serving import serve

    try:
        serve(settings, argv=sys.argv[1:] if argv is None else argv)
    except ConfigError as exc:
        refuse(exc)
    except KeyboardInterrupt:
        # Ctrl-C: the service has already stopped gracefully; uvicorn re-raises the captured SIGINT once it has,
        # which would end in a traceback. Exit as a shell expects of an interrupted command (128 + SIGINT).
        raise SystemExit(130) from None
