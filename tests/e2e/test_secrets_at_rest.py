"""Secrets at rest (docs/reference/security.md#secrets-at-rest): every kind of secret a job holds is stored encrypted,
never appears in a file under the data directory, in the log or in a response; the data directory is private; a database
written by an earlier version is encrypted once at start; processes sharing PostgreSQL share the key; a wrong key stops
start-up."""

from __future__ import annotations

import base64
import stat
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest
from alembic import command
from alembic.config import Config
from cryptography.fernet import Fernet
from sqlalchemy import insert
from support.api_client import API, create_job, wait_history
from support.certificates import pfx, self_signed
from support.databases import PostgresDatabase, require_postgres
from support.names import Names
from support.server import EmulatorPool
from support.store_rows import collection_row, job_row
from support.target_server import TargetServer
from support.times import days_ahead
from support.waiting import unique

from scheduler_emulator.store.database import Database, migrations_dir
from scheduler_emulator.store.models import JobCollectionRow

PARAMS = {"api-version": API}
# Far enough ahead that nothing fires unless asked.
START = days_ahead(30)


def secrets_by_kind() -> dict[str, str]:
    """One distinct plaintext per kind of secret."""
    key, cert = self_signed("At Rest", ca=True)
    tag = unique("")
    return {
        "basic password": f"basic-password-{tag}",
        "pfx password": f"pfx-password-{tag}",
        "pfx": pfx(key, cert, f"pfx-password-{tag}"),
        "oauth secret": f"oauth-secret-{tag}",
        "queue sasKey": f"sb-queue-key-{tag}",
        "topic sasKey": f"sb-topic-key-{tag}",
        "storage sasToken": f"sv=2020-08-04&sig=storage-sig-{tag}",
    }


def actions(secret: dict[str, str], target: str) -> dict[str, dict[str, Any]]:
    """A job action for each kind of secret (the error action holds the Service Bus topic)."""
    http = {"uri": target, "method": "POST", "body": "hello"}
    return {
        "basic": {
            "type": "Http",
            "request": {
                **http,
                "authentication": {"type": "Basic", "username": "u", "password": secret["basic password"]},
            },
            "retryPolicy": {"retryType": "None"},
        },
        "cert": {
            "type": "Https",
            "request": {
                **http,
                "uri": target.replace("http://", "https://"),
                "authentication": {
                    "type": "ClientCertificate",
                    "pfx": secret["pfx"],
                    "password": secret["pfx password"],
                },
            },
        },
        "oauth": {
            "type": "Http",
            "request": {
                **http,
                "authentication": {
                    "type": "ActiveDirectoryOAuth",
                    "tenant": "t",
                    "audience": "a",
                    "clientId": "c",
                    "secret": secret["oauth secret"],
                },
            },
        },
        "servicebus": {
            "type": "ServiceBusQueue",
            "serviceBusQueueMessage": {
                "namespace": "scheduler-test-ns",
                "queueName": "q",
                "message": "m",
                "authentication": {"type": "SharedAccessKey", "sasKeyName": "k", "sasKey": secret["queue sasKey"]},
            },
            "errorAction": {
                "type": "ServiceBusTopic",
                "serviceBusTopicMessage": {
                    "namespace": "scheduler-test-ns",
                    "topicPath": "t",
                    "message": "m",
                    "authentication": {"type": "SharedAccessKey", "sasKeyName": "k", "sasKey": secret["topic sasKey"]},
                },
            },
        },
        "storage": {
            "type": "StorageQueue",
            "queueMessage": {
                "storageAccount": "account1",
                "queueName": "q",
                "sasToken": secret["storage sasToken"],
                "message": "m",
            },
        },
    }


def traces(secret: dict[str, str]) -> dict[str, bytes]:
    """What must not be found: each plaintext, and the Basic credential as it goes on the wire."""
    found = {kind: value.encode() for kind, value in secret.items()}
    found["pfx"] = secret["pfx"][:64].encode()  # any stretch of the base64 would do
    found["basic header"] = base64.b64encode(f"u:{secret['basic password']}".encode())
    return found


def assert_absent(secret: dict[str, str], where: str, content: bytes) -> None:
    """No secret in ``content``."""
    for kind, value in traces(secret).items():
        assert value not in content, f"the {kind} is in {where} in plaintext"


def files_under(directory: Path) -> Iterator[Path]:
    return (path for path in directory.rglob("*") if path.is_file())


def test_no_secret_in_files_logs_or_responses(emulators: EmulatorPool, tmp_path: Path, target: TargetServer) -> None:
    data_dir = tmp_path / "data"
    process = emulators.start(data_dir, https=True, log_level="debug", poll_interval=1)
    secret = secrets_by_kind()
    names = Names()
    try:
        with process.client() as client:
            for name, action in actions(secret, target.url("/hook")).items():
                create_job(client, names, name, action, startTime=START)
            # The Basic job runs once: its password goes on the wire to the target, and nowhere else.
            assert client.post(names.job_path("basic") + "/run", params=PARAMS).status_code == 200
            [entry] = wait_history(client, names.job_path("basic"), 1, 30)
            assert entry["properties"]["status"] == "Completed", entry
            received = target.wait_for(1, 10, "/hook")[0]
            assert received.header("authorization") == "Basic " + traces(secret)["basic header"].decode()
            # A PATCH that leaves the secrets alone keeps them (the run after it still authenticates).
            patched = client.patch(names.job_path("basic"), params=PARAMS, json={"properties": {"state": "Enabled"}})
            assert patched.status_code == 200, patched.text
            assert client.post(names.job_path("basic") + "/run", params=PARAMS).status_code == 200
            wait_history(client, names.job_path("basic"), 2, 30)
            assert [r.header("authorization") for r in target.requests("/hook")] == [
                received.header("authorization")
            ] * 2
            responses = [
                client.get(names.collection_path + "/jobs", params=PARAMS),
                *(client.get(names.job_path(name), params=PARAMS) for name in actions(secret, "http://x")),
                client.get(names.job_path("basic") + "/history", params=PARAMS),
                client.get("/metrics"),
            ]
            for response in responses:
                assert response.status_code == 200, response.text
                assert_absent(secret, f"GET {response.url.path}", response.content)
            storage = client.get(names.job_path("storage"), params=PARAMS).json()
            # write-only (docs/reference/arm-api.md#write-only-secrets)
            assert "sasToken" not in storage["properties"]["action"]["queueMessage"]
    finally:
        process.stop()
    assert_absent(secret, "the log", process.log.encode())
    files = list(files_under(data_dir))
    assert any(path.name == "scheduler.db" for path in files)
    for path in files:
        assert_absent(secret, str(path), path.read_bytes())


def test_data_directory_is_private(emulators: EmulatorPool, tmp_path: Path) -> None:
    """Everything the service creates is 0600 (directories 0700); a directory an earlier version left
    readable is tightened at start."""
    data_dir = tmp_path / "data"
    data_dir.mkdir(mode=0o755)
    data_dir.chmod(0o755)
    (data_dir / "tls").mkdir(mode=0o755)
    old = data_dir / "tls" / "key.pem"  # left readable by an earlier version: a new certificate is made
    old.write_text("x")
    old.chmod(0o644)
    theirs = data_dir / "notes.txt"  # not the service's: left alone
    theirs.write_text("x")
    theirs.chmod(0o644)
    process = emulators.start(data_dir, https=True)
    try:
        with process.client() as client:
            names = Names()
            create_job(client, names, "j", actions(secrets_by_kind(), "http://127.0.0.1:9/x")["basic"], startTime=START)
    finally:
        process.stop()
    names_found = {path.name for path in files_under(data_dir)}
    assert {"scheduler.db", "secret.key", "cert.pem", "key.pem"} <= names_found, names_found
    assert stat.S_IMODE(data_dir.stat().st_mode) == 0o700
    assert stat.S_IMODE(theirs.stat().st_mode) == 0o644
    theirs.unlink()
    for path in data_dir.rglob("*"):
        wanted = 0o700 if path.is_dir() else 0o600
        assert stat.S_IMODE(path.stat().st_mode) == wanted, f"{path} is {oct(path.stat().st_mode)}"


def test_wrong_key_refuses_to_start(emulators: EmulatorPool, tmp_path: Path) -> None:
    database = f"sqlite:///{tmp_path / 'db' / 'scheduler.db'}"
    first = emulators.start(
        tmp_path, "--no-dispatcher", database_url=database, env={"SCHEDULER_SECRET_KEY": Fernet.generate_key().decode()}
    )
    try:
        with first.client() as client:
            create_job(
                client, Names(), "j", actions(secrets_by_kind(), "http://127.0.0.1:9/x")["basic"], startTime=START
            )
    finally:
        first.stop()
    second = emulators.prepare(
        tmp_path, "--no-dispatcher", database_url=database, env={"SCHEDULER_SECRET_KEY": Fernet.generate_key().decode()}
    )
    with pytest.raises(RuntimeError, match="does not decrypt the secrets stored"):
        second.start()
    assert second.wait_exit() == 2
    # Without the environment variable the key file in the data directory is used: another key again.
    third = emulators.prepare(tmp_path, "--no-dispatcher", database_url=database)
    with pytest.raises(RuntimeError, match="does not decrypt"):
        third.start()
    assert third.wait_exit() == 2
    # A key that is no key at all.
    (tmp_path / "bad.key").write_text("not-a-fernet-key")
    fourth = emulators.prepare(
        tmp_path, "--no-dispatcher", "--secret-key-file", str(tmp_path / "bad.key"), database_url=database
    )
    with pytest.raises(RuntimeError, match="not a valid key"):
        fourth.start()
    assert fourth.wait_exit() == 2


def _write_as_previous_version(url: str, secret: dict[str, str], target: str) -> Names:
    """A database at the previous schema head (0006) holding jobs with plaintext secrets, as main wrote them."""
    database = Database(url)  # no key: the definition column passes secrets through as they are
    config = Config()
    config.set_main_option("script_location", str(migrations_dir()))
    with database.engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "0006")
    names = Names()
    now = datetime.now(UTC)
    with database.session() as session:
        collection = collection_row(names, now, "westus", "Standard", state="Enabled")
        # Only the columns the 0006 schema has (the ORM row would also write later ones, e.g. 0008's label)
        table = JobCollectionRow.__table__
        columns = {c.name: getattr(collection, c.name) for c in table.columns if c.name not in ("id", "label")}
        collection.id = session.execute(insert(table).values(columns).returning(table.c.id)).scalar_one()
        for name, action in actions(secret, target).items():
            session.add(job_row(collection, name, {"startTime": START, "action": action, "state": "Enabled"}, now))
    database.dispose()
    return names


@pytest.mark.parametrize("store", ["sqlite", "postgresql"])
def test_plaintext_secrets_of_an_earlier_version_are_encrypted_once(
    store: str, emulators: EmulatorPool, tmp_path: Path, target: TargetServer
) -> None:
    pg = None
    if store == "postgresql":
        require_postgres()
        pg = PostgresDatabase().create()
        url = pg.url
    else:
        url = f"sqlite:///{tmp_path / 'data' / 'scheduler.db'}"
    secret = secrets_by_kind()
    try:
        names = _write_as_previous_version(url, secret, target.url("/migrated"))
        if store == "sqlite":  # the plaintext is really there before
            assert secret["basic password"].encode() in b"".join(p.read_bytes() for p in files_under(tmp_path / "data"))
        for attempt in (1, 2):  # the second start finds nothing to encrypt and changes nothing
            process = emulators.start(tmp_path / "data", database_url=url, poll_interval=1)
            try:
                with process.client() as client:
                    assert client.post(names.job_path("basic") + "/run", params=PARAMS).status_code == 200
                    wait_history(client, names.job_path("basic"), attempt, 30)
            finally:
                process.stop()
        expected = "Basic " + traces(secret)["basic header"].decode()
        assert [r.header("authorization") for r in target.requests("/migrated")] == [expected, expected]
        if store == "sqlite":
            for path in files_under(tmp_path / "data"):
                assert_absent(secret, str(path), path.read_bytes())
        else:
            with psycopg.connect(url) as connection:
                stored = "".join(row[0] for row in connection.execute("SELECT definition::text FROM jobs"))
            assert_absent(secret, "the jobs table", stored.encode())
            assert stored.count("enc:v1:") == len(secret)  # each kind once
    finally:
        if pg is not None:
            pg.drop()


def test_processes_sharing_postgresql_share_the_key(
    emulators: EmulatorPool, tmp_path: Path, target: TargetServer
) -> None:
    require_postgres()
    database = PostgresDatabase().create()
    key = Fernet.generate_key().decode()
    common = {"database_url": database.url, "poll_interval": 1}
    api = dispatcher = None
    try:
        api = emulators.start(tmp_path / "a", "--no-dispatcher", env={"SCHEDULER_SECRET_KEY": key}, **common)
        dispatcher = emulators.start(tmp_path / "b", "--no-api", env={"SCHEDULER_SECRET_KEY": key}, **common)
        secret = secrets_by_kind()
        names = Names()
        with api.client() as client:
            create_job(client, names, "basic", actions(secret, target.url("/shared"))["basic"])  # due now
            [entry] = wait_history(client, names.job_path("basic"), 1, 30)
        assert entry["properties"]["status"] == "Completed", entry
        [received] = target.requests("/shared")
        assert received.header("authorization") == "Basic " + traces(secret)["basic header"].decode()
        # A third process with its own key (its data directory's key file) refuses to start.
        stranger = emulators.prepare(tmp_path / "c", "--no-dispatcher", **common)
        with pytest.raises(RuntimeError, match="every process sharing a database must use the same key"):
            stranger.start()
        assert stranger.wait_exit() == 2
    finally:
        for process in (api, dispatcher):
            if process is not None:
                process.stop()
        database.drop()
