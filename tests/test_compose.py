"""docker-compose.yml: validated by the real ``docker-compose`` (Debian's 1.29, which needs no Docker daemon
for ``config``) for the default setup and every profile, plus the facts users' CI relies on.

Without ``docker-compose`` on PATH these tests fail in CI (``CI=true``) and are skipped locally.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.doc_blocks import blocks

REPO = Path(__file__).resolve().parent.parent
COMPOSE_FILE = REPO / "docker-compose.yml"
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
PROFILES = ("postgres", "servicebus")  # the ones docs/docker.md documents; all must exist and validate
IGNORED_ENVIRONMENT = (
    "SCHEDULER_IMAGE",
    "SERVICEBUS_IMAGE",
    "SERVICEBUS_SQL_IMAGE",
    "COMPOSE_FILE",
    "COMPOSE_PROFILES",
    "COMPOSE_PROJECT_NAME",
)


def compose_binary() -> str:
    binary = shutil.which("docker-compose")
    if binary is None:
        message = (
            "docker-compose is needed to validate docker-compose.yml and is not on PATH "
            "(Debian/Ubuntu: apt-get install docker-compose)"
        )
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)
    return binary


def compose_config(*profiles: str) -> dict[str, Any]:
    """``docker-compose -f docker-compose.yml [--profile P]... config``, parsed; fails with compose's message."""
    args = [compose_binary(), "-f", str(COMPOSE_FILE)]
    for profile in profiles:
        args += ["--profile", profile]
    # What the file interpolates, and compose's own settings, stay at their defaults whatever the shell has set.
    env = {k: v for k, v in os.environ.items() if k not in IGNORED_ENVIRONMENT}
    result = subprocess.run(
        [*args, "config"], cwd=REPO, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, f"{' '.join(args)} config failed:\n{result.stderr}{result.stdout}"
    config = yaml.safe_load(result.stdout)
    assert isinstance(config, dict) and config.get("services"), result.stdout
    return config


@pytest.fixture(scope="module")
def default_config() -> dict[str, Any]:
    return compose_config()


def published_ports(service: dict[str, Any]) -> dict[int, int]:
    """container port → host port, from either the long syntax compose prints or "HOST:CONTAINER"."""
    ports: dict[int, int] = {}
    for entry in service.get("ports", []):
        if isinstance(entry, dict):
            ports[int(entry["target"])] = int(entry["published"])
        else:
            host, _, container = str(entry).rpartition(":")
            ports[int(container.split("/")[0])] = int(host.rsplit(":", 1)[-1])
    return ports


def environment(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {k: str(v) for k, v in env.items()}


def healthy_dependencies(service: dict[str, Any]) -> set[str]:
    depends = service.get("depends_on") or {}
    if isinstance(depends, list):
        return set()
    return {name for name, spec in depends.items() if (spec or {}).get("condition") == "service_healthy"}


def profiles_in_file() -> set[str]:
    raw = yaml.safe_load(COMPOSE_FILE.read_text())
    return {p for service in raw["services"].values() for p in service.get("profiles", [])}


def test_the_documented_profiles_exist() -> None:
    assert set(PROFILES) == profiles_in_file()


@pytest.mark.parametrize("profiles", [(), *((p,) for p in PROFILES), PROFILES], ids=lambda p: "+".join(p) or "default")
def test_compose_file_validates(profiles: tuple[str, ...]) -> None:
    config = compose_config(*profiles)
    assert {"scheduler", "azurite"} <= set(config["services"])
    for profile in profiles:
        assert any(profile in s.get("profiles", []) for s in config["services"].values())


def test_emulator_publishes_7480_and_keeps_its_data_in_a_named_volume(default_config: dict[str, Any]) -> None:
    scheduler = default_config["services"]["scheduler"]
    assert published_ports(scheduler) == {7480: 7480}
    assert "profiles" not in scheduler  # part of the default `docker-compose up`
    data = [v for v in scheduler["volumes"] if (v["target"] if isinstance(v, dict) else v.split(":")[1]) == "/data"]
    assert data, scheduler["volumes"]
    source = data[0]["source"] if isinstance(data[0], dict) else data[0].split(":")[0]
    assert source in default_config["volumes"], "the /data volume should be a named volume"


def test_emulators_publish_on_the_hosts_loopback_only() -> None:
    """Anyone who reaches the API can create jobs: the compose file keeps it on the host's loopback
    (docs/reference/security.md#inbound-authentication)."""
    services = compose_config("postgres")["services"]
    for name in ("scheduler", "scheduler-postgres"):
        [entry] = services[name]["ports"]
        host_ip = entry.get("host_ip") if isinstance(entry, dict) else str(entry).rsplit(":", 2)[0]
        assert host_ip == "127.0.0.1", (name, entry)


def dockerfile_healthcheck() -> list[str]:
    dockerfile = (REPO / "Dockerfile").read_text()
    match = re.search(r"^HEALTHCHECK\b.*?\bCMD\s+(\[.*\])\s*$", dockerfile.replace("\\\n", " "), re.MULTILINE)
    assert match, "the Dockerfile has no HEALTHCHECK CMD [...]"
    command = json.loads(match.group(1))
    assert isinstance(command, list)
    return command


def test_the_images_healthcheck_calls_the_health_endpoint() -> None:
    command = dockerfile_healthcheck()
    assert command[0] == "python3"
    assert "/_emulator/health" in " ".join(command)


def test_compose_healthcheck_is_the_images_own(default_config: dict[str, Any]) -> None:
    """The compose file sets only the timings and inherits the image's command: a repeated command with spaces in
    an argument is split by podman's Docker API (scripts/container-check.sh, section 7, runs it there)."""
    check = default_config["services"]["scheduler"]["healthcheck"]
    assert "test" not in check, check
    assert not check.get("disable")
    assert check["interval"] and check["retries"]


def test_emulator_waits_for_a_healthy_azurite_and_sends_storage_queue_actions_to_it(
    default_config: dict[str, Any],
) -> None:
    services = default_config["services"]
    scheduler = services["scheduler"]
    assert "azurite" in healthy_dependencies(scheduler)
    assert services["azurite"].get("healthcheck", {}).get("test"), "azurite needs a healthcheck for service_healthy"
    mapping = dict(
        item.split("=", 1) for item in environment(scheduler)["SCHEDULER_STORAGE_ENDPOINTS"].split(",") if item
    )
    assert mapping == {"devstoreaccount1": "http://azurite:10001/devstoreaccount1"}
    assert services["azurite"]["image"].startswith("mcr.microsoft.com/azure-storage/azurite")
    assert 10001 in published_ports(services["azurite"])
    assert "10001" in services["azurite"]["command"]


def test_azurite_image_is_the_version_the_test_suite_uses(default_config: dict[str, Any]) -> None:
    package = json.loads((REPO / "package.json").read_text())
    version = package["devDependencies"]["azurite"].lstrip("^~=")
    assert default_config["services"]["azurite"]["image"].endswith(f":{version}")


def test_postgres_profile_runs_an_emulator_on_postgresql() -> None:
    services = compose_config("postgres")["services"]
    scheduler = services["scheduler-postgres"]
    assert scheduler["profiles"] == ["postgres"] and services["postgres"]["profiles"] == ["postgres"]
    assert services["postgres"]["image"] == "postgres:16"
    assert {"postgres", "azurite"} <= healthy_dependencies(scheduler)
    assert environment(scheduler)["SCHEDULER_DATABASE_URL"].startswith("postgresql://")
    assert "@postgres:5432/" in environment(scheduler)["SCHEDULER_DATABASE_URL"]
    # Both emulators can run at once: different host ports.
    assert published_ports(scheduler) == {7480: 7481}
    assert (
        environment(scheduler)["SCHEDULER_STORAGE_ENDPOINTS"]
        == environment(services["scheduler"])["SCHEDULER_STORAGE_ENDPOINTS"]
    )


def test_servicebus_profile_is_wired_through_the_endpoint_mapping() -> None:
    services = compose_config("servicebus")["services"]
    bus = services["servicebus"]
    assert bus["profiles"] == ["servicebus"]
    assert bus["image"].startswith("mcr.microsoft.com/azure-messaging/servicebus-emulator")
    sql_host = environment(bus)["SQL_SERVER"]
    assert sql_host in services and services[sql_host]["profiles"] == ["servicebus"]
    assert 5672 in published_ports(bus)
    for name in ("scheduler", "scheduler-postgres"):
        if name not in services:  # `docker compose` v2 leaves out services of inactive profiles
            continue
        mapping = environment(services[name])["SCHEDULER_SERVICEBUS_ENDPOINTS"]
        assert re.fullmatch(r"[\w-]+=amqp://servicebus:5672", mapping), mapping


def readme_ci_example() -> dict[str, Any]:
    """The README's CI job (its one ``yaml`` block), parsed."""
    found = [block for block in blocks(Path("README.md")) if block.language == "yaml"]
    assert len(found) == 1, f"the README should hold one CI example in a yaml block, found {len(found)}"
    workflow = yaml.safe_load(found[0].text)
    assert isinstance(workflow, dict), found[0].text
    return workflow


def test_readme_ci_example_starts_the_emulators_own_service_and_waits_for_its_health() -> None:
    """What users copy into their CI: a compose command that this compose file accepts (checked by the real
    docker-compose), for the emulator's own service alone, then a bounded wait on the port that service
    publishes, and the URL the tests are given is that port."""
    workflow = readme_ci_example()
    [job] = workflow["jobs"].values()
    runs = [step["run"] for step in job["steps"] if "run" in step]
    [up] = [run for run in runs if " up " in run]
    words = up.split()
    assert words[:2] == ["docker", "compose"], up
    file = words[words.index("-f") + 1]
    assert Path(file).name == "docker-compose.yml", up
    assert {"-d", "--build", "--no-deps"} <= set(words), up
    service = words[-1]
    services = compose_config()["services"]
    assert service in services and "profiles" not in services[service], up
    host_port = published_ports(services[service])[7480]

    [wait] = [run for run in runs if "_emulator/health" in run]
    bound = re.match(r"timeout (\d+) ", wait)
    assert bound and 0 < int(bound.group(1)) <= 300, f"the wait must be bounded: {wait}"
    assert f"http://127.0.0.1:{host_port}/_emulator/health" in wait, wait
    assert "curl -fsS" in wait, "curl must fail on a 503 (-f), or an unhealthy emulator would pass the wait"
    urls = {v for step in job["steps"] for v in (step.get("env") or {}).values()}
    assert f"http://127.0.0.1:{host_port}" in urls, job["steps"]
    logs = [run for run in runs if " logs " in run]
    assert logs and logs[0].split()[-1] == service, runs
