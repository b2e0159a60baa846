"""The real Azure CLI for the tests, in its own virtual environment: ``azure-cli`` from PyPI, pinned, under
``.venv-az/`` in the repository root (git-ignored), created on first use the way support/sdk_envs.py creates the old
SDKs' environments (keyed by the pin and the interpreter, locked, marked ready only when pip succeeded), so a
second run reuses it. The first install downloads about 160 packages (docs/azure-cli.md gives the time it
took). When it cannot be made (no PyPI) the tests fail in CI (``CI=true``)
and are skipped locally."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from support.environment import REPO, missing
from support.sdk_envs import create_env

ROOT = REPO / ".venv-az"
AZURE_CLI_VERSION = "2.91.0"
REQUIREMENTS = (f"azure-cli=={AZURE_CLI_VERSION}",)


def az_python() -> Path:
    """The python of the Azure CLI's environment (created first when missing; fails or skips without PyPI)."""
    try:
        return create_env(f"azure-cli-{AZURE_CLI_VERSION}", REQUIREMENTS, ROOT)
    except (RuntimeError, OSError) as exc:
        missing(f"Could not create the Azure CLI's environment under {ROOT} (it needs PyPI reachable): {exc}")
        raise  # missing() skips or fails; never reached


@dataclass
class AzureCli:
    """Runs ``az`` with its own configuration directory (``AZURE_CONFIG_DIR``) and the emulator's certificate
    trusted (``REQUESTS_CA_BUNDLE``), as a user following docs/azure-cli.md would after exporting those two."""

    python: Path
    config_dir: Path
    ca_bundle: Path | None = None
    timeout: float = 120

    def environment(self) -> dict[str, str]:
        env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("AZURE_", "REQUESTS_", "MSAL_")) and key not in ("HTTP_PROXY", "HTTPS_PROXY")
        }
        env.update(
            AZURE_CONFIG_DIR=str(self.config_dir),
            AZURE_CORE_COLLECT_TELEMETRY="false",
            AZURE_CORE_NO_COLOR="true",
            AZURE_CORE_SURVEY_MESSAGE="false",
            AZURE_CORE_ONLY_SHOW_ERRORS="true",
            NO_PROXY="*",
        )
        if self.ca_bundle is not None:
            env["REQUESTS_CA_BUNDLE"] = str(self.ca_bundle)
        return env

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """``az ARGS`` (as ``python -m azure.cli``, which is what the ``az`` script runs); with ``check``, a
        non-zero exit raises AssertionError carrying the command and its output."""
        done = subprocess.run(
            [str(self.python), "-m", "azure.cli", *args],
            capture_output=True,
            text=True,
            env=self.environment(),
            timeout=self.timeout,
        )
        if check and done.returncode != 0:
            raise AssertionError(f"az {' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
        return done
