"""The settings' groups (config.py): every flag lands in a group, a flag's value reaches its group as the
collaborator reads it, and no module below app.py and serving.py takes the whole ``Settings`` (issue 50: each
collaborator gets the group it uses). The CPU rule is config.usable_cpus, checked in a process confined to one
CPU."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from functools import cached_property
from pathlib import Path
from typing import Any

import pytest

import scheduler_emulator
from scheduler_emulator.config import Settings, settings_from_args

PACKAGE = Path(scheduler_emulator.__file__).parent
GROUPS = ("server", "roles", "store", "dispatch", "outbound", "security", "identity", "logging", "arm")

# Modules that still take a whole Settings, being rewritten under issue 50 by other hands (the process roles, the
# way into the database); each leaves this list when it takes its groups. app.py and serving.py stay: they are
# where the whole Settings is taken apart.
TAKE_IT_APART = frozenset({"app.py", "serving.py", "config.py", "dispatcher/role.py"})
# config.py: the groups' builders; dispatcher/role.py: the dispatcher role's child process, as serving.py is the API's


class Reads:
    """A Settings that records the names read from it."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.names: set[str] = set()

    def __getattr__(self, name: str) -> Any:
        self.names.add(name)
        return getattr(self.settings, name)


def test_every_flag_lands_in_a_group_and_groups_read_only_flags() -> None:
    """Each group is built from the flat fields alone, and together they read all of them: a new flag that no
    group carries (so no collaborator could be given it) fails here. ``GROUPS`` is every group there is."""
    assert {name for name, value in vars(Settings).items() if isinstance(value, cached_property)} == set(GROUPS)
    reads = Reads(Settings())
    for name in GROUPS:
        vars(Settings)[name].func(reads)  # the group's builder (a cached_property), reading through ``reads``
    assert reads.names == set(Settings.model_fields)


def test_flags_reach_their_groups() -> None:
    """Values as the collaborators read them: mappings parsed, lower-cased, paths resolved, modes derived."""
    settings = settings_from_args(
        [
            "--storage-endpoint",
            "Acct=http://127.0.0.1:10001/acct",
            "--servicebus-endpoint",
            "NS=127.0.0.1:5672",
            "--arm-site-host",
            "Web=127.0.0.1:9000",
            "--allowed-hosts",
            "Box.Example, other.example",
            "--data-dir",
            "/srv/emulator",
            "--https",
            "--auth-jwks",
            "keys.json",
            "--auth-audience",
            "api://me",
            "--lease-seconds",
            "12",
            "--log-level",
            "debug",
        ]
    )

    assert settings.outbound.storage_endpoints == {"acct": "http://127.0.0.1:10001/acct"}
    assert settings.outbound.servicebus_endpoints == {"ns": "127.0.0.1:5672"}
    assert settings.arm.site_hosts == {"web": "127.0.0.1:9000"}
    assert settings.server.allowed_host_names == {"box.example", "other.example"}
    assert settings.server.self_signed and settings.server.certificate_dir == Path("/srv/emulator/tls")
    assert settings.store.url == "sqlite:////srv/emulator/scheduler.db" and settings.store.kind == "sqlite"
    assert settings.security.mode == "jwt" and settings.security.audience == "api://me"
    assert settings.store.lease_seconds == settings.dispatch.lease_seconds == 12
    assert settings.logging.level == "debug"
    assert settings.server is settings.server  # built once


def test_an_operators_certificate_means_https_in_the_server_group(tmp_path: Path) -> None:
    settings = Settings(cert=tmp_path / "c.pem", key=tmp_path / "k.pem")
    assert settings.server.https and not settings.server.self_signed


def _takes_settings(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    arguments = function.args
    every = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
    return any(arg.annotation is not None and ast.unparse(arg.annotation) == "Settings" for arg in every)


def test_no_collaborator_below_the_app_takes_the_whole_settings() -> None:
    """Function and method parameters annotated ``Settings``, outside the modules that take it apart."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = path.relative_to(PACKAGE).as_posix()
        if module in TAKE_IT_APART:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and _takes_settings(node):
                found.append(f"{module}: {node.name}")
    assert found == []


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity on this system")
def test_usable_cpus_counts_the_cpus_the_process_is_confined_to() -> None:
    """A process confined to one CPU (as ``taskset -c 0`` or a container would) counts one, whatever the machine
    has."""
    code = (
        "import os; os.sched_setaffinity(0, {min(os.sched_getaffinity(0))}); "
        "from scheduler_emulator.config import usable_cpus; print(usable_cpus())"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert result.stdout.strip() == "1"


def test_management_certificates_reach_the_security_group_and_need_https_and_an_auth_flag(tmp_path: Path) -> None:
    base = ["--data-dir", str(tmp_path), "--auth-token", "t", "--https"]
    settings = settings_from_args(
        [*base, "--management-certificate", "s1:/a.pem", "--management-certificate", "s2:b:c"]
    )
    assert settings.security.management_certificates == (("s1", Path("/a.pem")), ("s2", Path("b:c")))
    with pytest.raises(ValueError, match="needs --https"):
        settings_from_args(["--data-dir", str(tmp_path), "--auth-token", "t", "--management-certificate", "s:/a"])
    with pytest.raises(ValueError, match="applies with an auth flag"):
        settings_from_args(["--data-dir", str(tmp_path), "--https", "--management-certificate", "s:/a"])
    with pytest.raises(ValueError, match="is not SUBSCRIPTION:FILE"):
        settings_from_args([*base, "--management-certificate", "no-file"])
