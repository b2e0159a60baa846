"""Virtual environments for the older official clients, which cannot share one (each pins its own
azure-mgmt-scheduler, and 1.x/2.0.0 need msrest and msrestazure of their day). The test run creates them
from PyPI under ``.venv-sdks/`` in the repository root, one per client, named after a hash of its
requirements and of the interpreter version, so a second run reuses them and a changed pin makes a new
one. Creation is serialised with a lock file (two test runs may start at once) and marked complete only
when pip succeeded. When it cannot be done (no network to PyPI, no ``venv`` module) the tests fail in CI
(``CI=true``) with pip's own words, and are skipped locally."""

from __future__ import annotations

import fcntl
import hashlib
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from support.environment import REPO, missing

ROOT = REPO / ".venv-sdks"
PIP_TIMEOUT = 900  # seconds for one environment's install, on a slow network

# Each client with the packages that shape what it sends and reads: the SDK, and for the msrest
# generation the msrest/msrestazure/isodate that pip chose for it (pinned, so every run tests the same).
REQUIREMENTS: dict[str, tuple[str, ...]] = {
    "2.0.0": ("azure-mgmt-scheduler==2.0.0", "msrest==0.7.1", "msrestazure==0.6.4.post1", "isodate==0.7.2"),
    "1.1.3": ("azure-mgmt-scheduler==1.1.3", "msrest==0.7.1", "msrestazure==0.4.34", "isodate==0.7.2"),
    "1.1.2": ("azure-mgmt-scheduler==1.1.2", "msrest==0.7.1", "msrestazure==0.4.34", "isodate==0.7.2"),
    "7.0.0": ("azure-mgmt-scheduler==7.0.0", "azure-mgmt-core==1.6.0", "msrest==0.7.1", "isodate==0.7.2"),
    # The classic (2014) Service Management client, for tests/e2e/test_classic_clients.py.
    "legacy-0.20.8": ("azure-servicemanagement-legacy==0.20.8", "azure-common==1.1.28", "requests==2.34.2"),
}


def env_dir(version: str, root: Path = ROOT, requirements: tuple[str, ...] | None = None) -> Path:
    """Where the environment of client ``version`` lives under ``root``, keyed by its requirements."""
    pins = REQUIREMENTS[version] if requirements is None else requirements
    key = "\n".join((f"python{sys.version_info[0]}.{sys.version_info[1]}", *pins))
    return root / f"{version}-{hashlib.sha256(key.encode()).hexdigest()[:12]}"


def _create(version: str) -> Path:
    """The environment's python, created first if needed; RuntimeError with pip's output otherwise."""
    return create_env(version, REQUIREMENTS[version], ROOT)


def create_env(name: str, requirements: tuple[str, ...], root: Path) -> Path:
    """The python of a virtual environment named ``name`` under ``root`` holding ``requirements`` (pip
    from PyPI), created first if needed, serialised with a lock file; RuntimeError with pip's output
    otherwise. Also used for the Azure CLI's environment (support/azure_cli.py)."""
    target = env_dir(name, root, requirements)
    python = target / "bin" / "python"
    ready = target / ".ready"
    if ready.exists():
        return python
    root.mkdir(exist_ok=True)
    with open(root / f"{target.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another run may be creating it: wait, then reuse
        if ready.exists():
            return python
        shutil.rmtree(target, ignore_errors=True)  # a half-made one from an interrupted run
        steps = (
            [sys.executable, "-m", "venv", str(target)],
            [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *requirements],
        )
        for step in steps:
            try:
                done = subprocess.run(step, capture_output=True, text=True, timeout=PIP_TIMEOUT)
            except subprocess.TimeoutExpired:
                raise RuntimeError(f"'{' '.join(step)}' took over {PIP_TIMEOUT} s") from None
            if done.returncode != 0:
                output = (done.stdout + done.stderr).strip().splitlines()[-15:]
                raise RuntimeError(f"'{' '.join(step)}' failed:\n" + "\n".join(output))
        ready.write_text("\n".join(requirements) + "\n")
    return python


def sdk_pythons(versions: tuple[str, ...]) -> dict[str, Path]:
    """Client version → the python of its environment (created in parallel when missing). Fails in CI and
    skips locally, naming what went wrong, when one cannot be created."""
    with ThreadPoolExecutor(max_workers=len(versions)) as pool:
        futures = {version: pool.submit(_create, version) for version in versions}
    pythons, problems = {}, []
    for version, future in futures.items():
        try:
            pythons[version] = future.result()
        except (RuntimeError, OSError) as exc:
            problems.append(f"client {version}: {exc}")
    if problems:
        missing(
            f"Could not create the client environments under {ROOT} (they need PyPI reachable through pip):\n"
            + "\n".join(problems)
        )
    return pythons
