"""StorageQueue actions end to end, against a real Azurite queue service (``tests/support/azurite.py``).

The emulator runs as a separate process on each store backend (SQLite, PostgreSQL; each with its own
fresh database, so that no other test's server can claim these jobs), with Azurite's account mapped by
``--storage-endpoint devstoreaccount1=http://127.0.0.1:<port>/devstoreaccount1`` and a second account
mapped to a loopback port where nothing listens. Queues and SAS tokens are made here with the
``azure-storage-queue`` SDK and the account key; the emulator only ever sees the SAS tokens.

The first tests check the envelope and the helpers without any server."""

from __future__ import annotations

import re
import time
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import pytest
from support.api_client import QUICK_DISPATCH, EmulatorApi
from support.azurite import ACCOUNT, Azurite, closed_port, start_azurite
from support.databases import fresh_database
from support.names import Names
from support.times import iso, parse, utcnow, whole_seconds_from_now
from support.waiting import unique

from scheduler_emulator.dispatcher.actions import FireContext
from scheduler_emulator.dispatcher.actions.storage_queue import (
    StorageQueueAction,
    envelope,
    expected_time_text,
    redact,
)

ACTION_TIMEOUT = 10.0
UNREACHABLE = "unreachable01"  # mapped to a loopback port where nothing listens
ENVELOPE_HEAD = (
    '<?xml version="1.0" encoding="utf-16"?>\r\n'
    '<StorageQueueMessage xmlns:xsd="http://www.w3.org/2001/XMLSchema" '
    'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">\r\n'
)
FIELDS = [
    "ExecutionTag",
    "ClientRequestId",
    "ExpectedExecutionTime",
    "SchedulerJobId",
    "SchedulerJobCollectionId",
    "Region",
    "Message",
]
TRICKY = 'Tricky <&> "quoted" \'single\' & <tag attr="x">text</tag>\nsecond line, ünïcødé ✓, CRLF\r\nend'
NO_RETRY = {"retryType": "None"}
ONE_RETRY = {"retryType": "Fixed", "retryCount": 1, "retryInterval": "PT1S"}


# --- the envelope and the helpers, without a server --------------------------------------------------


def test_envelope_is_the_xml_document_the_real_service_wrote() -> None:
    context = FireContext(
        execution_tag="e927cf76d24da9625608248ce654cfa7",
        client_request_id="3c4b84e2-aee5-43ac-913e-c05c8827ac41",
        expected_time=datetime(2015, 9, 10, tzinfo=UTC),
        job_name="rm-photopost-creditreports",
        collection_name="bdhcjobs",
        region="West Europe",
    )
    assert envelope("the message", context) == (
        '<?xml version="1.0" encoding="utf-16"?>\r\n'
        '<StorageQueueMessage xmlns:xsd="http://www.w3.org/2001/XMLSchema" '
        'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">\r\n'
        "  <ExecutionTag>e927cf76d24da9625608248ce654cfa7</ExecutionTag>\r\n"
        "  <ClientRequestId>3c4b84e2-aee5-43ac-913e-c05c8827ac41</ClientRequestId>\r\n"
        "  <ExpectedExecutionTime>2015-09-10T00:00:00</ExpectedExecutionTime>\r\n"
        "  <SchedulerJobId>rm-photopost-creditreports</SchedulerJobId>\r\n"
        "  <SchedulerJobCollectionId>bdhcjobs</SchedulerJobCollectionId>\r\n"
        "  <Region>West Europe</Region>\r\n"
        "  <Message>the message</Message>\r\n"
        "</StorageQueueMessage>"
    )
    tricky = envelope(TRICKY, context)
    assert "&lt;&amp;&gt;" in tricky and "&#xD;" in tricky
    assert parse_envelope(tricky)["Message"] == TRICKY
    assert "  <Message />" in envelope("", context)
    assert parse_envelope(envelope("", context))["Message"] == ""


def test_expected_execution_time_is_utc_without_zone_and_fraction_only_when_present() -> None:
    assert expected_time_text(datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)) == "2026-01-02T03:04:05"
    assert expected_time_text(datetime(2026, 1, 2, 3, 4, 5, 120000, tzinfo=UTC)) == "2026-01-02T03:04:05.12"
    from datetime import timezone

    plus_two = timezone(timedelta(hours=2))
    assert expected_time_text(datetime(2026, 1, 2, 5, 4, 5, tzinfo=plus_two)) == "2026-01-02T03:04:05"


def test_endpoints_are_the_operators_mapping_or_the_public_one() -> None:
    action = StorageQueueAction({"DevStoreAccount1": "http://127.0.0.1:10001/devstoreaccount1/"}, 60)
    assert action.endpoint_for("devstoreaccount1") == "http://127.0.0.1:10001/devstoreaccount1"
    assert action.endpoint_for("DEVSTOREACCOUNT1") == "http://127.0.0.1:10001/devstoreaccount1"
    assert action.endpoint_for("MyAccount") == "https://myaccount.queue.core.windows.net"
    assert action.endpoint_for("not/a-host") is None


def test_redact_removes_every_form_of_the_signature() -> None:
    sas = "?sv=2021-08-06&se=2030-01-01T00%3A00%3A00Z&sp=a&sig=ab%2Bcd%2Fef%3D123456"
    text = f"token {sas} raw ab+cd/ef=123456 encoded ab%2Bcd%2Fef%3D123456 other sig=zzzz&x=1"
    cleaned = redact(text, sas)
    for secret in ("ab+cd/ef=123456", "ab%2Bcd%2Fef%3D123456", "sig=zzzz"):
        assert secret not in cleaned, cleaned
    assert "sig=REDACTED" in cleaned


# --- helpers -----------------------------------------------------------------------------------------


def parse_envelope(text: str) -> dict[str, str]:
    """The envelope's children by name (``Message`` as the job's exact text)."""
    assert text.startswith(ENVELOPE_HEAD), text[:200]
    root = ET.fromstring(text)
    assert root.tag == "StorageQueueMessage"
    children = [child.tag for child in root]
    assert children == FIELDS, children
    return {child.tag: child.text or "" for child in root}


def signature(sas: str) -> str:
    """The ``sig`` value of a SAS token, as it appears in the token (URL-encoded)."""
    return parse_qs(sas.removeprefix("?"))["sig"][0]


def queue_action(
    queue: str, sas: str, message: str, account: str = ACCOUNT, retry: dict[str, Any] | None = None, **extra: Any
) -> dict[str, Any]:
    action: dict[str, Any] = {
        "type": "StorageQueue",
        "queueMessage": {"storageAccount": account, "queueName": queue, "sasToken": sas, "message": message},
        **extra,
    }
    if retry is not None:
        action["retryPolicy"] = retry
    return action


# --- the server under test ---------------------------------------------------------------------------


class Emulator(EmulatorApi):
    """The emulator of one backend, sending to Azurite and to a storage endpoint nothing listens on."""

    state_timeout = 15

    def __init__(self, backend: str, database_url: str, data_dir: Path, azurite: Azurite, dead_port: int) -> None:
        super().__init__(
            data_dir,
            "--storage-endpoint",
            f"{ACCOUNT}={azurite.endpoint}",
            "--storage-endpoint",
            f"{UNREACHABLE}=http://127.0.0.1:{dead_port}/{UNREACHABLE}",
            database_url=database_url,
            log_level="info",
            **QUICK_DISPATCH,
            action_timeout=ACTION_TIMEOUT,
        )
        self.backend = backend
        self.dead_port = dead_port
        self.signatures: set[str] = set()  # every SAS signature handed to this server


@pytest.fixture(scope="session")
def azurite() -> Iterator[Azurite]:
    server = start_azurite()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def emulator(
    request: pytest.FixtureRequest, azurite: Azurite, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Emulator]:
    dead_port = closed_port()
    with fresh_database(request.param, tmp_path_factory) as url:
        started = time.monotonic()
        emulator = Emulator(request.param, url, tmp_path_factory.mktemp("queue-data"), azurite, dead_port).start()
        try:
            yield emulator
        finally:
            emulator.stop()
            print(f"\n[{request.param}] storage queue suite ran {time.monotonic() - started:.1f} s on this backend")


def new_queue(azurite: Azurite) -> str:
    return azurite.create_queue(unique("q"))


# --- end to end --------------------------------------------------------------------------------------


def test_message_lands_on_the_queue_in_the_envelope(emulator: Emulator, azurite: Azurite) -> None:
    """A queue SAS without and with a leading '?', and an account SAS: each job's message arrives once,
    in the envelope, with the job's exact text."""
    names = Names()
    emulator.collection(names)
    targets = []
    for kind in ("plain", "question-mark", "account"):
        queue = new_queue(azurite)
        sas = {
            "plain": azurite.queue_sas(queue),
            "question-mark": "?" + azurite.queue_sas(queue),
            "account": azurite.account_sas(),
        }[kind]
        emulator.signatures.add(signature(sas))
        targets.append((kind, queue, sas))
    start = whole_seconds_from_now(2)
    jobs: dict[str, tuple[str, str]] = {}  # job → (queue, message)
    for kind, queue, sas in targets:
        job, message = unique(f"{kind}-"), f"{kind}: {TRICKY}"
        action = queue_action(queue, sas, message, retry=NO_RETRY)
        emulator.put_job(names, job, {"startTime": iso(start), "action": action})
        jobs[job] = (queue, message)

    for job, (queue, message) in jobs.items():
        [text] = azurite.wait_messages(queue, 1, timeout=(start - utcnow()).total_seconds() + 10)
        fields = parse_envelope(text)
        assert fields["Message"] == message
        assert "&lt;&amp;&gt;" in text, "the job's message is XML-escaped, not base64"
        assert re.fullmatch(r"[0-9a-f]{32}", fields["ExecutionTag"]), fields
        assert str(uuid.UUID(fields["ClientRequestId"])) == fields["ClientRequestId"]
        assert fields["ClientRequestId"] != fields["ExecutionTag"]
        assert fields["ExpectedExecutionTime"] == start.strftime("%Y-%m-%dT%H:%M:%S")
        assert fields["SchedulerJobId"] == job
        assert fields["SchedulerJobCollectionId"] == names.collection
        assert fields["Region"] == "West US"

        done = emulator.wait_state(names, job, "completed")
        status = done["properties"]["status"]
        assert (status["executionCount"], status["failureCount"], status["faultedCount"]) == (1, 0, 0)
        [entry] = emulator.history(names, job)
        assert (entry["actionName"], entry["status"], entry["retryCount"], entry["repeatCount"]) == (
            "MainAction",
            "Completed",
            0,
            1,
        )
        assert parse(entry["expectedExecutionTime"]) == start
        assert entry["message"].startswith(
            f"StorageQueue Action - message added to queue '{queue}' of account '{ACCOUNT}'"
        ), entry["message"]
    time.sleep(1)
    for queue, _ in jobs.values():
        assert azurite.messages(queue) == [], "one message per occurrence"


@pytest.mark.parametrize("failure", ["expired-sas", "sas-without-add", "missing-queue"])
def test_failed_attempt_is_retried_then_the_error_action_runs(
    emulator: Emulator, azurite: Azurite, failure: str
) -> None:
    names = Names()
    emulator.collection(names)
    queue, error_queue = new_queue(azurite), new_queue(azurite)
    if failure == "expired-sas":
        now = utcnow()
        sas = azurite.queue_sas(queue, expires_in=timedelta(hours=-1), start=now - timedelta(hours=2))
        expected = f"403 AuthenticationFailed from queue '{queue}' of account '{ACCOUNT}'"
    elif failure == "sas-without-add":
        sas = azurite.queue_sas(queue, add=False, read=True)
        expected = f"403 AuthorizationPermissionMismatch from queue '{queue}' of account '{ACCOUNT}'"
    else:
        queue = unique("missing")
        sas = azurite.account_sas()
        expected = f"404 QueueNotFound from queue '{queue}' of account '{ACCOUNT}'"
    error_sas = azurite.account_sas()
    emulator.signatures.update({signature(sas), signature(error_sas)})
    job = unique(f"{failure}-")
    emulator.put_job(
        names,
        job,
        {
            "action": {
                **queue_action(queue, sas, "main message", retry=ONE_RETRY),
                "errorAction": queue_action(error_queue, error_sas, f"error action of {job}", retry=NO_RETRY),
            }
        },
    )

    [text] = azurite.wait_messages(error_queue, 1, timeout=15)
    fields = parse_envelope(text)
    assert fields["Message"] == f"error action of {job}"
    assert fields["SchedulerJobId"] == job

    done = emulator.wait_state(names, job, "faulted")  # a one-time job whose only occurrence faulted
    status = done["properties"]["status"]
    assert (status["executionCount"], status["failureCount"], status["faultedCount"]) == (2, 2, 1)
    history = emulator.wait_history(names, job, 3)
    assert [(e["actionName"], e["status"], e["retryCount"]) for e in history] == [
        ("ErrorAction", "Completed", 0),
        ("MainAction", "Failed", 1),
        ("MainAction", "Failed", 0),
    ]
    assert parse(fields["ExpectedExecutionTime"] + "Z") == parse(history[0]["expectedExecutionTime"])
    for entry in history[1:]:
        assert entry["message"].startswith(f"StorageQueue Action - {expected}"), entry["message"]
    assert history[0]["message"].startswith(
        f"StorageQueue Action - message added to queue '{error_queue}' of account '{ACCOUNT}'"
    )
    for entry in history:
        assert signature(sas) not in entry["message"] and "sig=" not in entry["message"], entry["message"]
    if failure != "missing-queue":
        assert azurite.messages(queue) == [], "no failed attempt left a message"
    assert azurite.messages(error_queue) == [], "the error action ran once"


def test_failing_http_action_runs_a_storage_queue_error_action(emulator: Emulator, azurite: Azurite) -> None:
    names = Names()
    emulator.collection(names)
    error_queue = new_queue(azurite)
    sas = azurite.queue_sas(error_queue)
    emulator.signatures.add(signature(sas))
    job = unique("http-fails-")
    emulator.put_job(
        names,
        job,
        {
            "action": {
                "type": "Http",
                "request": {"uri": f"http://127.0.0.1:{closed_port()}/nothing-listens", "method": "POST", "body": "x"},
                "retryPolicy": NO_RETRY,
                "errorAction": queue_action(error_queue, "?" + sas, TRICKY),
            }
        },
    )

    [text] = azurite.wait_messages(error_queue, 1, timeout=15)
    fields = parse_envelope(text)
    assert fields["Message"] == TRICKY
    assert fields["SchedulerJobId"] == job
    assert fields["SchedulerJobCollectionId"] == names.collection
    done = emulator.wait_state(names, job, "faulted")
    status = done["properties"]["status"]
    assert (status["executionCount"], status["failureCount"], status["faultedCount"]) == (1, 1, 1)
    history = emulator.wait_history(names, job, 2)
    assert [(e["actionName"], e["status"]) for e in history] == [("ErrorAction", "Completed"), ("MainAction", "Failed")]
    assert "Http Action" in history[1]["message"] and "refused" in history[1]["message"], history[1]["message"]
    assert f"message added to queue '{error_queue}'" in history[0]["message"]


def test_unreachable_account_is_a_failed_attempt(emulator: Emulator) -> None:
    names = Names()
    emulator.collection(names)
    sas = "sv=2021-08-06&ss=q&srt=sco&sp=a&se=2099-01-01T00%3A00%3A00Z&sig=c2VjcmV0LXNpZ25hdHVyZQ%3D%3D"
    emulator.signatures.add(signature(sas))
    job = unique("unreachable-")
    emulator.put_job(names, job, {"action": queue_action("orders", sas, "hello", account=UNREACHABLE, retry=NO_RETRY)})

    emulator.wait_state(names, job, "faulted")
    [entry] = emulator.wait_history(names, job, 1)
    assert (entry["actionName"], entry["status"]) == ("MainAction", "Failed")
    assert entry["message"] == (
        f"StorageQueue Action - could not reach account '{UNREACHABLE}' at "
        f"http://127.0.0.1:{emulator.dead_port}/{UNREACHABLE}: connection refused"
    )


def test_no_sas_signature_reaches_the_log(emulator: Emulator) -> None:
    """Last: no token the tests above handed over appears in the server's output."""
    if not emulator.signatures:
        pytest.skip("run together with the tests above")
    assert emulator.process is not None
    log = emulator.process.log
    for sig in emulator.signatures:
        assert sig not in log
        assert sig.replace("%2B", "+").replace("%2F", "/").replace("%3D", "=") not in log


def test_an_operator_mapped_endpoint_is_not_checked_by_the_outbound_policy(azurite: Azurite, tmp_path: Path) -> None:
    """docs/reference/security.md#outbound-policy: endpoints the operator maps are the operator's choice. Here Azurite
    is mapped by the name ``localhost`` while every loopback address is denied to jobs: the message still lands, and an
    HTTP job aimed at the same name is blocked by the policy."""
    mapped = azurite.endpoint.replace("127.0.0.1", "localhost")
    emulator = EmulatorApi(
        tmp_path,
        "--storage-endpoint",
        f"{ACCOUNT}={mapped}",
        "--outbound-deny",
        "127.0.0.0/8,::1/128",
        log_level="info",
        **QUICK_DISPATCH,
    ).start()
    try:
        names = Names()
        emulator.collection(names)
        queue = new_queue(azurite)
        job = unique("mapped-")
        emulator.put_job(names, job, {"action": queue_action(queue, azurite.queue_sas(queue), "through the mapping")})
        [text] = azurite.wait_messages(queue, 1, timeout=15)
        assert parse_envelope(text)["Message"] == "through the mapping"
        blocked = unique("blocked-")
        port = azurite.endpoint.split(":")[2].split("/")[0]
        emulator.put_job(
            names,
            blocked,
            {
                "action": {
                    "type": "Http",
                    "request": {"uri": f"http://localhost:{port}/", "method": "GET"},
                    "retryPolicy": NO_RETRY,
                }
            },
        )
        [entry] = emulator.wait_history(names, blocked, 1)
        assert entry["status"] == "Failed" and "outbound policy" in entry["message"], entry["message"]
    finally:
        emulator.stop()
