"""Every generation of the official clients reads what every other wrote (issue 15).

Five clients, each in its own environment against one emulator over HTTPS: azure-mgmt-scheduler 2.0.0,
1.1.3 and 1.1.2 (msrest), 7.0.0 (azure-core), each in a virtual environment the test run creates and
caches (tests/support/sdk_envs.py), and the JavaScript SDK azure-arm-scheduler 1.2.0-preview through Node
(package.json). Each runs tests/e2e/clients/{python_client.py,node_client.js} as a subprocess, and
raw HTTP (httpx) plays a sixth client.

1. write: each client creates its own collection, then two jobs (retry policies, monthly occurrences,
   error actions, a Service Bus time to live) in one shared collection; raw HTTP writes the same two in
   each duration format (ISO-8601, TimeSpan) with each spelling of ``occurrence``;
2. read: every client gets, patches (the error action's retry interval, in its own format) and runs every
   job, and lists the shared collection page by page (``$top`` below the job count);
3. history: once every run has been recorded, every client reads every job's history page by page.

Each client prints what it deserialised; every field is compared here with what the writer meant. The
result is a writer x reader matrix, printed (``pytest -s``) and asserted all-passing."""

from __future__ import annotations

import functools
import json
import math
import os
import re
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.api_client import API
from support.environment import REPO, missing
from support.sdk_envs import sdk_pythons
from support.server import EmulatorPool, ServerProcess
from support.target_server import TargetServer
from support.times import iso_seconds as iso
from support.times import parse
from support.waiting import unique, wait_until

SDKS = ("2.0.0", "1.1.3", "1.1.2", "7.0.0")
JS = "js 1.2.0-preview"
CLIENTS = (*SDKS, JS)
RAW = "raw HTTP"
# Raw writers: (duration format, spelling of monthlyOccurrences' occurrence key).
RAW_WRITERS = {
    "raw ISO-8601 + occurrence": ("iso", "occurrence"),
    "raw TimeSpan + Occurrence": ("timespan", "Occurrence"),
    "raw ISO-8601 + Occurrence": ("iso", "Occurrence"),
    "raw TimeSpan + occurrence": ("timespan", "occurrence"),
}
WRITERS = (*CLIENTS, *RAW_WRITERS)
READERS = (*CLIENTS, RAW)
CLIENT_SCRIPTS = Path(__file__).parent / "clients"
SCRIPT_TIMEOUT = 120
JOBS_TOP = 4  # 18 jobs: 5 pages
HISTORY_TOP = 2  # 6 runs per job: 3 pages

# The lengths used, with their texts in each format, written out by hand (not by the code under test):
# ISO-8601 as isodate writes it (msrest, azure-core), .NET TimeSpan, and ISO-8601 as moment writes it
# (the JS SDK: hours, never days).
ISO, TIMESPAN, MOMENT = 0, 1, 2
TEXTS = {
    30: ("PT30S", "00:00:30", "PT30S"),
    900: ("PT15M", "00:15:00", "PT15M"),
    3723: ("PT1H2M3S", "01:02:03", "PT1H2M3S"),
    93784: ("P1DT2H3M4S", "1.02:03:04", "PT26H3M4S"),
    172800: ("P2D", "2.00:00:00", "PT48H"),
}
SECONDS_OF = {text: seconds for seconds, texts in TEXTS.items() for text in texts}
# What each writer sends for a length, and so what raw HTTP (answered as sent) reads back: the 1.1.3/2.0.0
# patch writes TimeSpan (days x30, stored as the standard TimeSpan of the same length).
SENT_FORMAT = {"2.0.0": TIMESPAN, "1.1.3": TIMESPAN, "1.1.2": ISO, "7.0.0": ISO, JS: MOMENT}
SENT_FORMAT.update({writer: ISO if fmt == "iso" else TIMESPAN for writer, (fmt, _) in RAW_WRITERS.items()})

START = (datetime.now(UTC) + timedelta(days=30)).replace(minute=0, second=0, microsecond=0)
END = START + timedelta(days=270)


def job_specs(target: str) -> dict[str, dict[str, Any]]:
    """The two jobs every writer creates, in the neutral form (see clients/python_client.py)."""
    return {
        "a": {
            "start_time": iso(START),
            "state": "Enabled",
            "action": {
                "type": "Http",
                "request": {"uri": f"{target}/a", "method": "POST", "body": "ping", "headers": {"X-Matrix": "a"}},
                "retry_policy": {"retry_type": "Fixed", "retry_interval": 30, "retry_count": 2},
                "error_action": {
                    "type": "ServiceBusQueue",
                    "service_bus_queue_message": {
                        "namespace": "localns",
                        "queue_name": "errors",
                        "message": "failed",
                        "transport_type": "AMQP",
                        "authentication": {"type": "SharedAccessKey", "sas_key_name": "Send", "sas_key": "sb-secret"},
                        "brokered_message_properties": {"time_to_live": 3723, "content_type": "text/plain"},
                        "custom_message_properties": {"Source": "matrix"},
                    },
                    "retry_policy": {"retry_type": "Fixed", "retry_interval": 172800, "retry_count": 1},
                },
            },
            "recurrence": {
                "frequency": "Month",
                "interval": 1,
                "count": 12,
                "end_time": iso(END),
                "schedule": {
                    "hours": [9],
                    "minutes": [30],
                    "monthly_occurrences": [{"day": "Friday", "occurrence": -1}, {"day": "Monday", "occurrence": 1}],
                },
            },
        },
        "b": {
            "start_time": iso(START),
            "state": "Enabled",
            "action": {
                "type": "Http",
                "request": {"uri": f"{target}/b", "method": "GET"},
                "retry_policy": {"retry_type": "Fixed", "retry_interval": 93784, "retry_count": 3},
                "error_action": {
                    "type": "Http",
                    "request": {"uri": f"{target}/b-error", "method": "PUT", "body": "error"},
                    "retry_policy": {"retry_type": "Fixed", "retry_interval": 900, "retry_count": 1},
                },
            },
            "recurrence": {
                "frequency": "Month",
                "interval": 2,
                "schedule": {"monthly_occurrences": [{"day": "Wednesday", "occurrence": 2}, {"day": "Sunday"}]},
            },
        },
    }


def job_name(writer: str, spec: str) -> str:
    # Job names match case-insensitively: the two spellings of the key need words of their own.
    slug = writer.replace("Occurrence", "upper").replace("occurrence", "lower")
    return re.sub(r"[^A-Za-z0-9]+", "-", slug).strip("-").lower() + f"-{spec}"


# --- the neutral form, on the raw HTTP side ----------------------------------------------------------

DICTIONARIES = ("headers", "custom_message_properties")  # their keys are data, not field names
DATES = ("start_time", "end_time", "expected_execution_time", "last_execution_time", "next_execution_time")


def snake(name: str) -> str:
    if name == "Occurrence":
        return "occurrence"
    if name == "occurrence":
        return "occurrence (lower-case key)"  # never expected in a response: the SDKs lose it
    return re.sub(r"[A-Z]", lambda m: "_" + m.group().lower(), name)


def camel(name: str) -> str:
    return re.sub(r"_([a-z])", lambda m: m.group(1).upper(), name)


def raw_neutral(value: Any, key: str = "") -> Any:
    """A JSON response in the neutral form; a duration text not in TEXTS stays text (and mismatches). The
    service's own ``occurrence`` key beside the SDKs' ``Occurrence`` is dropped where both say the same."""
    if isinstance(value, dict):
        if "occurrence" in value and value.get("Occurrence") == value["occurrence"]:
            value = {name: item for name, item in value.items() if name != "occurrence"}
        return {
            (name if key in DICTIONARIES else snake(name)): raw_neutral(
                item, name if key in DICTIONARIES else snake(name)
            )
            for name, item in value.items()
            if item is not None
        }
    if isinstance(value, list):
        return [raw_neutral(item, key) for item in value]
    if key in ("retry_interval", "time_to_live"):
        return SECONDS_OF.get(value, value)
    if key in DATES and isinstance(value, str):
        return parse(value).timestamp()
    return value


def to_wire(value: Any, fmt: int, occurrence_key: str = "Occurrence", key: str = "") -> Any:
    """Neutral → a raw HTTP body: camelCase, durations as text in format ``fmt`` (ISO, TIMESPAN)."""
    if isinstance(value, dict):
        result = {}
        for name, item in value.items():
            wire = name if key in DICTIONARIES else (occurrence_key if name == "occurrence" else camel(name))
            result[wire] = to_wire(item, fmt, occurrence_key, name)
        return result
    if isinstance(value, list):
        return [to_wire(item, fmt, occurrence_key, key) for item in value]
    if key in ("retry_interval", "time_to_live"):
        return TEXTS[value][fmt]
    return value


# The service answered enumerations in its own spelling (docs/reference/arm-api.md#enumerations, recorded). The msrest
# generations (2.0.0, 1.1.x) deserialise each into its Enum member case-insensitively and so report the member's value,
# as the spec writes it; 7.0.0 (plain str), the JS SDK (ms-rest keeps an Enum's text) and raw HTTP report the text.
READS_THE_TEXT = ("7.0.0", JS, RAW)
SERVICE_SPELLING = {
    **{v: v.lower() for v in ("Enabled", "Disabled", "Fixed", "None", "Month", "Monday", "Wednesday", "Friday")},
    **{v: v.lower() for v in ("Sunday",)},
    "AMQP": "amqp",
    "SharedAccessKey": "sharedAccessKey",
}
ENUM_KEYS = ("state", "retry_type", "frequency", "day", "transport_type")


def expected(value: Any, reader: str, key: str = "", parent: str = "") -> Any:
    """What ``reader`` must deserialise for a neutral spec: dates as POSIX seconds, write-only secrets gone,
    enumerations as it reads them."""
    if isinstance(value, dict):
        return {name: expected(item, reader, name, key) for name, item in value.items() if name != "sas_key"}
    if isinstance(value, list):
        return [expected(item, reader, key, parent) for item in value]
    if key in DATES:
        return parse(value).timestamp()
    enum = key in ENUM_KEYS or (key == "type" and parent == "authentication" and value == "SharedAccessKey")
    if enum and reader in READS_THE_TEXT:
        return SERVICE_SPELLING[value]
    return value


def differences(got: Any, want: Any, path: str = "") -> list[str]:
    """Every field where ``got`` differs from ``want``, by path."""
    if isinstance(got, dict) and isinstance(want, dict):
        found = []
        for name in sorted(set(got) | set(want)):
            if name not in want:
                found.append(f"{path}.{name}: unexpected {got[name]!r}")
            elif name not in got:
                found.append(f"{path}.{name}: missing (want {want[name]!r})")
            else:
                found.extend(differences(got[name], want[name], f"{path}.{name}"))
        return found
    if isinstance(got, list) and isinstance(want, list) and len(got) == len(want):
        return [d for i, (g, w) in enumerate(zip(got, want, strict=True)) for d in differences(g, w, f"{path}[{i}]")]
    if isinstance(got, float | int) and isinstance(want, float | int) and not isinstance(got, bool):
        return [] if math.isclose(got, want, abs_tol=1e-6) else [f"{path}: {got!r} != {want!r}"]
    return [] if got == want else [f"{path}: {got!r} != {want!r}"]


# --- the clients --------------------------------------------------------------------------------------


@dataclass
class World:
    server: ServerProcess
    target: TargetServer
    subscription: str = field(default_factory=lambda: str(uuid.uuid4()))
    resource_group: str = field(default_factory=lambda: unique("rg-matrix-"))
    shared: str = field(default_factory=lambda: unique("jc-shared-"))

    def plan(self, phase: str, **extra: Any) -> dict[str, Any]:
        return {
            "phase": phase,
            "url": self.server.url,
            "cert": str(self.server.cert_path),
            "subscription": self.subscription,
            "resource_group": self.resource_group,
            "shared": self.shared,
            **extra,
        }

    def path(self, collection: str, job: str | None = None) -> str:
        base = (
            f"/subscriptions/{self.subscription}/resourceGroups/{self.resource_group}"
            f"/providers/Microsoft.Scheduler/jobCollections/{collection}"
        )
        return base + (f"/jobs/{job}" if job else "")


@pytest.fixture(scope="module")
def commands() -> dict[str, list[str]]:
    """Client → the command that runs its script."""
    node = shutil.which("node")
    if node is None or not (REPO / "node_modules" / "azure-arm-scheduler").is_dir():
        missing("The JS client needs Node.js 20+ and `npm ci` in the repository root (package-lock.json).")
    pythons = sdk_pythons(SDKS)
    result = {version: [str(pythons[version]), str(CLIENT_SCRIPTS / "python_client.py")] for version in SDKS}
    result[JS] = [str(node), str(CLIENT_SCRIPTS / "node_client.js")]
    return result


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """An emulator over HTTPS with a recording target for the jobs' actions. One store (SQLite): what is
    tested here sits above the store, whose own suites run on both backends."""
    target = TargetServer().start()
    try:
        with EmulatorPool() as pool:
            yield World(pool.start(tmp_path_factory.mktemp("matrix"), https=True, log_level="warning"), target)
    finally:
        target.stop()


def run_client(command: list[str], client: str, plan: dict[str, Any]) -> dict[str, Any]:
    env = {**os.environ, "NODE_EXTRA_CA_CERTS": plan["cert"], "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run(
        command, input=json.dumps(plan), capture_output=True, text=True, timeout=SCRIPT_TIMEOUT, env=env
    )
    assert done.returncode == 0, f"{client} {plan['phase']} failed:\n{done.stderr[-3000:]}"
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def every_client(commands: dict[str, list[str]], plans: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each client's script run on its plan, all at once."""
    with ThreadPoolExecutor(max_workers=len(plans)) as pool:
        futures = {client: pool.submit(run_client, commands[client], client, plan) for client, plan in plans.items()}
    return {client: future.result() for client, future in futures.items()}


def raw_pages(http: httpx.Client, path: str, top: int) -> list[list[Any]]:
    """Every page of a list, following nextLink (at most 1000)."""
    result = []
    response = http.get(path, params={"api-version": API, "$top": str(top)})
    for _ in range(1000):
        assert response.status_code == 200, response.text
        body = response.json()
        result.append([raw_neutral(item) for item in body["value"]])
        if "nextLink" not in body:
            return result
        response = http.get(body["nextLink"])
    raise AssertionError("more than 1000 pages")


# --- the test -----------------------------------------------------------------------------------------


def test_every_client_reads_what_every_client_wrote(world: World, commands: dict[str, list[str]]) -> None:
    specs = job_specs(world.target.base_url)
    owner = {job_name(writer, spec): writer for writer in WRITERS for spec in specs}
    spec_of = {name: specs[name[-1]] for name in owner}
    problems: dict[tuple[str, str], list[str]] = {(w, r): [] for w in WRITERS for r in READERS}

    def check(writer: str, reader: str, what: str, got: Any, want: Any) -> None:
        if isinstance(got, dict) and "error" in got and len(got) == 1:
            problems[writer, reader].append(f"{what}: {got['error']}")
        else:
            problems[writer, reader].extend(f"{what}{d}" for d in differences(got, want))

    def want_job(name: str, reader: str) -> dict[str, Any]:
        return {
            "id": world.path(world.shared, name),
            "type": "Microsoft.Scheduler/jobCollections/jobs",
            "name": f"{world.shared}/{name}",
            "properties": expected(spec_of[name], reader),
        }

    def without_status(job: Any) -> Any:
        if isinstance(job, dict) and isinstance(job.get("properties"), dict):
            job = {**job, "properties": {k: v for k, v in job["properties"].items() if k != "status"}}
        return job

    with world.server.client() as http:
        assert (
            http.put(world.path(world.shared), params={"api-version": API}, json={"location": "westus"}).status_code
            == 201
        )

        # 1. write
        collections = {client: unique("jc-own-") for client in CLIENTS}
        plans = {
            client: world.plan(
                "write", collection=collections[client], jobs={job_name(client, s): spec for s, spec in specs.items()}
            )
            for client in CLIENTS
        }
        written = every_client(commands, plans)
        for writer, (_, key) in RAW_WRITERS.items():
            for s, spec in specs.items():
                name = job_name(writer, s)
                body = {"properties": to_wire(spec, SENT_FORMAT[writer], key)}
                response = http.put(world.path(world.shared, name), params={"api-version": API}, json=body)
                assert response.status_code == 201, response.text
                check(writer, RAW, f"PUT {name}", without_status(raw_neutral(response.json())), want_job(name, RAW))
        for client in CLIENTS:
            want_collection = {
                "id": world.path(collections[client]),
                "type": "Microsoft.Scheduler/jobCollections",
                "name": collections[client],
                "location": "West US",
                "properties": {"sku": {"name": "Standard"}, "state": "Enabled"},
            }
            check(client, client, "collection", written[client]["collection"], want_collection)
            for name, job in written[client]["created"].items():
                check(client, client, f"PUT {name}", without_status(job), want_job(name, client))

        # 2. read: get, patch the error action's retry interval (same length, the reader's own format), run
        patches = {
            name: {
                "action": {
                    "error_action": {
                        "retry_policy": {
                            "retry_interval": spec["action"]["error_action"]["retry_policy"]["retry_interval"]
                        }
                    }
                },
                "state": "Enabled",
            }
            for name, spec in spec_of.items()
        }
        # One reader at a time, each run recorded before the next reader's: a run asked for while the
        # same job's previous one is still pending is the same run (they would coalesce).
        read: dict[str, Any] = {}
        for done, reader in enumerate(READERS, start=1):
            if reader == RAW:
                read[RAW] = raw_read(http, world, owner, spec_of, patches, problems)
            else:
                plan = world.plan("read", jobs=list(owner), patch=patches, top=JOBS_TOP)
                read[reader] = run_client(commands[reader], reader, plan)
            wait_until(
                functools.partial(runs_recorded, http, world, list(owner), done),
                60,
                f"{done} recorded runs of each of {len(owner)} jobs",
            )
        expected_pages = math.ceil(len(owner) / JOBS_TOP)
        for reader, result in read.items():
            for name, writer in owner.items():
                check(writer, reader, f"GET {name}", without_status(result["get"][name]), want_job(name, reader))
                check(writer, reader, f"PATCH {name}", without_status(result["patched"][name]), want_job(name, reader))
                if result["ran"].get(name) is not None:
                    check(writer, reader, f"run {name}", result["ran"][name], None)
            listed = result["list"]
            if isinstance(listed, dict):  # the whole list failed
                for writer in WRITERS:
                    check(writer, reader, "list", listed, [])
                continue
            if len(listed) != expected_pages:
                problems[WRITERS[0], reader].append(f"list: {len(listed)} pages, want {expected_pages}")
            by_name = {job["name"].split("/")[-1]: job for page in listed for job in page}
            for name, writer in owner.items():
                check(writer, reader, f"list {name}", without_status(by_name.get(name, {})), want_job(name, reader))

        # 3. history
        runs = len(READERS)
        histories = every_client(
            commands, {c: world.plan("history", jobs=list(owner), top=HISTORY_TOP) for c in CLIENTS}
        )
        raw_history: dict[str, Any] = {"history": {}, "get": {}}
        for name in owner:
            raw_history["history"][name] = raw_pages(http, world.path(world.shared, name) + "/history", HISTORY_TOP)
            got = http.get(world.path(world.shared, name), params={"api-version": API}).json()
            raw_history["get"][name] = raw_neutral(got)
        histories[RAW] = raw_history
        for name, writer in owner.items():
            truth = raw_history["history"][name]
            entries = [entry for page in truth for entry in page]
            assert len(entries) == runs and {e["properties"]["status"] for e in entries} == {"Completed"}, entries
            for reader, result in histories.items():
                check(writer, reader, f"history {name}", result["history"][name], truth)
                status = (result["get"][name].get("properties") or {}).get("status", {})
                check(
                    writer,
                    reader,
                    f"GET {name} after runs",
                    without_status(result["get"][name]),
                    want_job(name, reader),
                )
                want_counts = {"execution_count": runs, "failure_count": 0, "faulted_count": 0}
                check(writer, reader, f"status of {name}", {k: status.get(k) for k in want_counts}, want_counts)

    print_matrix(problems)
    failing = {cell: found for cell, found in problems.items() if found}
    assert not failing, "\n".join(f"{w} written, {r} reading: {found[:5]}" for (w, r), found in failing.items())


def raw_read(
    http: httpx.Client,
    world: World,
    owner: dict[str, str],
    spec_of: dict[str, dict[str, Any]],
    patches: dict[str, dict[str, Any]],
    problems: dict[tuple[str, str], list[str]],
) -> dict[str, Any]:
    """The read phase through raw HTTP, in the same form as the clients' scripts report it."""
    result: dict[str, Any] = {"get": {}, "patched": {}, "ran": {}, "list": None}
    for name in owner:
        got = http.get(world.path(world.shared, name), params={"api-version": API})
        result["get"][name] = raw_neutral(got.json())
        # Answered as sent: the main retry interval comes back in the format its writer sent.
        sent = TEXTS[spec_of[name]["action"]["retry_policy"]["retry_interval"]][SENT_FORMAT[owner[name]]]
        answered = got.json()["properties"]["action"]["retryPolicy"]["retryInterval"]
        if answered != sent:
            problems[owner[name], RAW].append(f"GET {name}: retryInterval {answered!r}, sent {sent!r}")
        patch = {"properties": to_wire(patches[name], TIMESPAN)}
        patched = http.patch(world.path(world.shared, name), params={"api-version": API}, json=patch)
        result["patched"][name] = raw_neutral(patched.json())
        ran = http.post(world.path(world.shared, name) + "/run", params={"api-version": API})
        result["ran"][name] = None if ran.status_code == 200 else {"error": ran.text}
    result["list"] = raw_pages(http, world.path(world.shared) + "/jobs", JOBS_TOP)
    return result


def runs_recorded(http: httpx.Client, world: World, names: list[str], count: int) -> bool:
    """Whether every job named has run ``count`` times (its executionCount)."""
    for name in names:
        status = http.get(world.path(world.shared, name), params={"api-version": API}).json()["properties"]["status"]
        if status["executionCount"] < count:
            return False
    return True


def print_matrix(problems: dict[tuple[str, str], list[str]]) -> None:
    """The writer x reader matrix in Markdown (visible with ``pytest -s``)."""
    lines = ["| writer \\ reader | " + " | ".join(READERS) + " |", "|---" * (len(READERS) + 1) + "|"]
    for writer in WRITERS:
        cells = [
            "pass" if not problems[writer, reader] else f"FAIL ({len(problems[writer, reader])})" for reader in READERS
        ]
        lines.append(f"| {writer} | " + " | ".join(cells) + " |")
    print("\n" + "\n".join(lines))
