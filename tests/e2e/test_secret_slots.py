"""Every secret slot the job shape declares (``schemas.job_shape.SECRETS``), in every action type whose payload
has it, as the main action and as the error action, on each store: never in an answer (ARM, classic, the
dashboard's JSON, history), never in the log, never in plaintext in the database; masked where the dashboard
shows the definition; kept, for the same target, across a GET-modify-PUT round trip.

The targets try to leak: the HTTP target and the OAuth token endpoint answer 400 with the request they got
(headers and form) as their body, which the history message quotes. Service Bus and storage endpoints are
mapped to a loopback port nobody listens on."""

from __future__ import annotations

import base64
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from sqlalchemy import select
from support.api_client import QUICK_DISPATCH, wait_history
from support.azurite import closed_port
from support.certificates import pfx, self_signed
from support.databases import TEST_SECRET_KEY
from support.names import Names
from support.server import EmulatorPool, ServerProcess
from support.times import days_ahead

from scheduler_emulator.schemas.job_shape import ACTION_PLACES, PAYLOADS, SECRETS, ActionPlace, SecretKind, SecretSlot
from scheduler_emulator.store.database import Database
from scheduler_emulator.store.models import JobCollectionRow, JobRow
from scheduler_emulator.store.secrets import SecretBox

API = {"api-version": "2016-03-01"}
CLASSIC = {"x-ms-version": "2014-04-01"}
MASK = "********"
NAMESPACE, ACCOUNT = "slot-namespace", "slotaccount"
NO_RETRY = {"retryType": "None"}


class _Echo(BaseHTTPRequestHandler):
    """Answers 400 with the request it got (request line, headers, body) as its body."""

    def _echo(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        seen = f"{self.requestline}\n{self.headers}".encode() + (self.rfile.read(length) if length else b"")
        self.send_response(400)
        self.send_header("Content-Length", str(len(seen)))
        self.end_headers()
        self.wfile.write(seen)

    do_GET = do_POST = _echo

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def echo() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@dataclass(frozen=True)
class Case:
    """One job: a slot holding ``value``, in an action of ``action_type`` at ``place``."""

    job: str
    place: ActionPlace
    slot: SecretSlot
    action_type: str
    value: str


def _value(kind: SecretKind) -> str:
    """A distinct plaintext (URL-safe, so the form a target echoes shows it as it is)."""
    if kind is SecretKind.PFX:
        key, cert = self_signed("Slot Test", ca=False)
        password = "pfx-password-" + uuid.uuid4().hex
        value = pfx(key, cert, password)
        _PFX_PASSWORDS[value] = password
        return value
    return f"{kind.name.lower().replace('_', '-')}-{uuid.uuid4().hex}"


def cases() -> list[Case]:
    """Every (place, slot, action type) the declaration allows."""
    found = []
    for place in ACTION_PLACES:
        for slot in SECRETS:
            payload = next(p for p in PAYLOADS if p.key == slot.payload)
            for action_type in payload.action_types:
                job = f"{'error' if 'errorAction' in place.keys else 'main'}-{action_type}-{slot.name}".lower()
                found.append(Case(job, place, slot, action_type, _value(slot.kind)))
    return found


# The kind of authentication a request slot belongs to, with what else it needs (a new request slot needs
# a line here: the test then covers it).
_REQUEST_AUTH = {
    "password": lambda value: {"type": "Basic", "username": "user", "password": value},
    "pfx": lambda value: {"type": "ClientCertificate", "pfx": value, "password": _PFX_PASSWORDS[value]},
    "secret": lambda value: {
        "type": "ActiveDirectoryOAuth",
        "tenant": "t",
        "audience": "a",
        "clientId": "c",
        "secret": value,
    },
}
_PFX_PASSWORDS: dict[str, str] = {}


def _set(node: dict[str, Any], keys: tuple[str, ...], value: str) -> None:
    for key in keys[:-1]:
        node = node.setdefault(key, {})
    node[keys[-1]] = value


def action(case: Case, echo: str) -> dict[str, Any]:
    """The action holding the case's secret."""
    slot = case.slot
    if slot.payload == "request":
        scheme_uri = echo.replace("http://", "https://") if case.action_type == "Https" else echo
        payload: dict[str, Any] = {
            "uri": f"{scheme_uri}/{case.job}",
            "method": "POST",
            "body": "b",
            "authentication": _REQUEST_AUTH[slot.name](case.value),
        }
    elif slot.payload == "queueMessage":
        payload = {"storageAccount": ACCOUNT, "queueName": "q", "message": "m"}
    else:
        entity = {"serviceBusQueueMessage": "queueName", "serviceBusTopicMessage": "topicPath"}[slot.payload]
        payload = {
            "namespace": NAMESPACE,
            entity: "e",
            "message": "m",
            "authentication": {"type": "SharedAccessKey", "sasKeyName": "send"},
        }
    _set(payload, slot.keys, case.value)
    made = {"type": case.action_type, slot.payload: payload, "retryPolicy": NO_RETRY}
    if "errorAction" not in case.place.keys:
        return made
    return {
        "type": "Http",
        "request": {"uri": f"{echo}/{case.job}-main", "method": "GET"},
        "retryPolicy": NO_RETRY,
        "errorAction": made,
    }


def traces(case: Case) -> list[bytes]:
    value = case.value.encode()
    found = [value]
    if case.slot.kind is SecretKind.PFX:
        found = [value[:64], _PFX_PASSWORDS[case.value].encode()]  # any stretch of the base64; its password
    if case.slot.name == "password" and case.slot.payload == "request":
        found.append(base64.b64encode(b"user:" + value))  # the Basic credential as it goes on the wire
    return found


def test_the_cases_cover_every_declared_slot_kind_and_place() -> None:
    every = cases()
    assert {c.slot for c in every} == set(SECRETS)
    assert {c.slot.kind for c in every} == set(SecretKind)
    assert {c.place for c in every} == set(ACTION_PLACES)
    assert {c.action_type for c in every} == {t for p in PAYLOADS for t in p.action_types}
    # The write-only secrets of docs/reference/arm-api.md#write-only-secrets are all declared (the declaration may hold
    # more, never fewer).
    spec = {
        ("request", "authentication", "password"),
        ("request", "authentication", "pfx"),
        ("request", "authentication", "secret"),
        ("serviceBusQueueMessage", "authentication", "sasKey"),
        ("serviceBusTopicMessage", "authentication", "sasKey"),
        ("queueMessage", "sasToken"),
    }
    assert spec <= {(slot.payload, *slot.keys) for slot in SECRETS}


@pytest.fixture(scope="module")
def emulator(own_database: str, echo: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    closed = closed_port()
    data_dir = tmp_path_factory.mktemp("slots-data")
    with EmulatorPool() as pool:
        server = pool.start(
            data_dir,
            "--servicebus-endpoint",
            f"{NAMESPACE}=127.0.0.1:{closed}",
            "--storage-endpoint",
            f"{ACCOUNT}=http://127.0.0.1:{closed}/{ACCOUNT}",
            "--oauth-authority",
            echo,
            https=True,
            database_url=own_database,
            log_level="debug",
            env={"SCHEDULER_SECRET_KEY": TEST_SECRET_KEY},
            action_timeout=5,
            **QUICK_DISPATCH,
        )
        yield server


def _absent(case_list: list[Case], where: str, content: bytes) -> list[str]:
    return [f"{c.job}: the {c.slot.kind} is in {where}" for c in case_list for t in traces(c) if t in content]


def _at(node: Any, keys: tuple[str, ...]) -> Any:
    for key in keys:
        node = node[key]
    return node


def test_no_secret_slot_shows_anywhere_for_any_action_type_or_place(
    emulator: ServerProcess, own_database: str, echo: str
) -> None:
    server = emulator
    every = cases()
    names = Names()
    leaks: list[str] = []
    classic_jobs = f"/{names.subscription}/cloudservices/{names.resource_group}/resources/scheduler/~/JobCollections/"
    classic_jobs += f"{names.collection}/jobs"
    dashboard = (
        f"/_emulator/dashboard/subscriptions/{names.subscription}/resourceGroups/{names.resource_group}"
        f"/jobCollections/{names.collection}/jobs"
    )
    with server.client() as client:
        created = client.put(names.collection_path, params=API, json={"location": "westus", "properties": {}})
        assert created.status_code == 201, created.text
        answers: list[httpx.Response] = []
        for case in every:
            properties = {"startTime": days_ahead(30), "action": action(case, echo)}
            put = client.put(names.job_path(case.job), params=API, json={"properties": properties})
            assert put.status_code == 201, f"{case.job}: {put.text}"
            got = client.get(names.job_path(case.job), params=API)
            # A GET-modify-PUT round trip: the answer lacks the secret, the stored job keeps it.
            back = {"properties": {k: v for k, v in got.json()["properties"].items() if k != "status"}}
            again = client.put(names.job_path(case.job), params=API, json=back)
            assert again.status_code == 200, f"{case.job}: {again.text}"
            patched = client.patch(names.job_path(case.job), params=API, json={"properties": {"state": "Enabled"}})
            assert patched.status_code == 200, f"{case.job}: {patched.text}"
            classic = client.get(f"{classic_jobs}/{case.job}", params={"api-version": "2014-04-01"}, headers=CLASSIC)
            detail = client.get(f"{dashboard}/{case.job}")
            answers += [put, got, again, patched, classic, detail]
            for response in (classic, detail):
                assert response.status_code == 200, f"{case.job}: {response.text}"
            definition = detail.json()["definition"]
            slot_keys = (*case.place.keys, case.slot.payload, *case.slot.keys)
            assert _at(definition, slot_keys) == MASK, f"{case.job}: not masked on the dashboard"
            assert client.post(names.job_path(case.job) + "/run", params=API).status_code == 200
        answers += [
            client.get(names.collection_path + "/jobs", params=API),
            client.get(classic_jobs, params={"api-version": "2014-04-01"}, headers=CLASSIC),
            client.get(dashboard),
        ]
        for case in every:
            count = 2 if "errorAction" in case.place.keys else 1
            entries = wait_history(client, names.job_path(case.job), count, 60, server.log_tail)
            assert all(e["properties"]["status"] == "Failed" for e in entries), entries
            answers.append(client.get(names.job_path(case.job) + "/history", params=API))
            for kind in ("csv", "json"):  # the dashboard's history export
                answers.append(client.get(f"{dashboard}/{case.job}/export", params={"format": kind}))
        answers += [  # the dashboard's overview and search
            client.get("/_emulator/dashboard/overview"),
            client.get("/_emulator/dashboard/jobs", params={"q": names.collection}),
        ]
        for response in answers:
            assert response.status_code in (200, 201), response.text
            leaks += _absent(every, f"{response.request.method} {response.url.path}", response.content)
    # The echoing targets did get the secrets they are owed: the leak was offered, and scrubbed.
    oauth = next(c for c in every if c.slot.name == "secret" and c.action_type == "Http")
    history = client_history(server, names, oauth.job)
    assert "Body:" in history and "client_id=c" in history and "***" in history, history

    server.stop()
    leaks += _absent(every, "the log", server.log.encode())
    leaks += _absent(every, "the database", _database_bytes(own_database))
    assert not leaks, "\n".join(leaks)
    # Each secret is still stored (sealed), for its target, after the round trip.
    database = Database(own_database, SecretBox(TEST_SECRET_KEY.encode()))
    try:
        with database.session() as session:
            rows = session.execute(
                select(JobRow.name, JobRow.definition)
                .join(JobCollectionRow, JobRow.collection_id == JobCollectionRow.id)
                .where(JobCollectionRow.subscription_key == names.subscription.lower())
            )
            stored = {name: definition for name, definition in rows}
    finally:
        database.dispose()
    for case in every:
        assert _at(stored[case.job], (*case.place.keys, case.slot.payload, *case.slot.keys)) == case.value, case.job


def client_history(server: ServerProcess, names: Names, job: str) -> str:
    with server.client() as client:
        return client.get(names.job_path(job) + "/history", params=API).text


def _database_bytes(url: str) -> bytes:
    """Everything the store holds: the SQLite files' bytes, or PostgreSQL's job definitions as text."""
    if url.startswith("sqlite"):
        path = Path(url.removeprefix("sqlite:///"))
        return b"".join(p.read_bytes() for p in path.parent.iterdir() if p.name.startswith(path.name))
    with psycopg.connect(url) as connection:
        rows = connection.execute("SELECT definition::text FROM jobs").fetchall()
    return "".join(row[0] for row in rows).encode()
