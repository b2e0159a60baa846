"""Create the client environments the suite drives (the older official SDKs of tests/support/sdk_envs.py and
the Azure CLI of tests/support/azure_cli.py) before pytest starts, all at once, so that their first install (the
CLI alone takes 75-170 s) is not paid inside the suite's time. Run by `make test`; idempotent (a ready environment
is reused). A failure is only reported here: the tests that need the environment fail in CI (or skip locally)
naming it."""

from __future__ import annotations

import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from support.azure_cli import AZURE_CLI_VERSION  # noqa: E402 - after the path above
from support.azure_cli import REQUIREMENTS as CLI_REQUIREMENTS  # noqa: E402
from support.azure_cli import ROOT as CLI_ROOT  # noqa: E402
from support.sdk_envs import REQUIREMENTS, _create, create_env  # noqa: E402


def main() -> int:
    began = time.monotonic()
    jobs = {f"client {version}": (_create, version) for version in REQUIREMENTS}
    jobs[f"azure-cli {AZURE_CLI_VERSION}"] = (
        lambda _: create_env(f"azure-cli-{AZURE_CLI_VERSION}", CLI_REQUIREMENTS, CLI_ROOT),
        None,
    )
    with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
        futures = {name: pool.submit(function, argument) for name, (function, argument) in jobs.items()}
    problems = []
    for name, future in futures.items():
        try:
            future.result()
        except (RuntimeError, OSError) as exc:
            problems.append(f"{name}: {exc}")
    for problem in problems:
        print(f"prepare_clients: could not create {problem}", file=sys.stderr)
    print(
        f"prepare_clients: {len(jobs) - len(problems)} of {len(jobs)} client environments ready "
        f"({time.monotonic() - began:.0f} s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
