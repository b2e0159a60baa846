"""End to end for ServiceBusQueue and ServiceBusTopic actions: the emulator runs as a separate process on
each store backend and sends with the official SDK to an AMQP 1.0 peer on loopback (``amqp_peer``), which
checks each SAS token's signature on its ``$cbs`` node and records what arrives on the wire.

The emulator maps two namespaces to the peer in both forms the option takes: ``ns-one=amqp://127.0.0.1:PORT``
and ``ns-two=127.0.0.1:PORT`` (plain TCP, the SDK's development-emulator mode). Every test uses entity
names of its own, so the peer's records tell the tests apart.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from azure.core.credentials import AzureNamedKeyCredential
from support.amqp_peer import AmqpPeer
from support.api_client import QUICK_DISPATCH, EmulatorApi
from support.names import Names
from support.times import days_ahead, parse
from support.waiting import unique, wait_until

from scheduler_emulator.dispatcher.actions import FireContext, Outcome
from scheduler_emulator.dispatcher.actions.service_bus import Endpoint, ServiceBusAction, resolve_endpoint
from scheduler_emulator.schemas.job import ServiceBusQueueMessage

KEY_NAME = "RootManageSharedAccessKey"
KEY = "c2NoZWR1bGVyLWVtdWxhdG9yLXRlc3Qta2V5LTAxMjM0NTY3ODk="
SEND_KEY_NAME = "SendOnly"
SEND_KEY = "c2VuZC1vbmx5LWtleS1mb3ItdGhlLXNlY29uZC1uYW1lc3BhY2U="
WRONG_KEY = "d3Jvbmcta2V5LXRoYXQtd2lsbC1ub3QtdmVyaWZ5LWF0LWFsbA=="
ACTION_TIMEOUT = 5.0
NO_RETRY = {"retryType": "None"}


class Emulator(EmulatorApi):
    """The emulator process of one backend, sending to the AMQP peer as two namespaces."""

    def __init__(self, database_url: str, data_dir: Path, peer: AmqpPeer) -> None:
        super().__init__(
            data_dir,
            "--servicebus-endpoint",
            f"ns-one={peer.url}",
            "--servicebus-endpoint",
            f"ns-two=127.0.0.1:{peer.port}",
            database_url=database_url,
            log_level="info",
            **QUICK_DISPATCH,
            action_timeout=ACTION_TIMEOUT,
        )

    def history(self, names: Names, job: str, **params: str) -> list[dict[str, Any]]:
        """History entries (``properties``), oldest first."""
        return list(reversed(super().history(names, job, **params)))

    def wait_history(self, names: Names, job: str, count: int, timeout: float | None = None) -> list[dict[str, Any]]:
        """:meth:`history` once it has at least ``count`` entries."""
        return list(reversed(super().wait_history(names, job, count, timeout)))


def queue_action(
    queue: str,
    namespace: str = "ns-one",
    key_name: str = KEY_NAME,
    key: str = KEY,
    retry: dict[str, Any] | None = None,
    **message: Any,
) -> dict[str, Any]:
    return {
        "type": "ServiceBusQueue",
        "serviceBusQueueMessage": {
            "namespace": namespace,
            "queueName": queue,
            "authentication": {"sasKeyName": key_name, "sasKey": key, "type": "SharedAccessKey"},
            **message,
        },
        "retryPolicy": retry or NO_RETRY,
    }


def later() -> str:
    """A start time far enough ahead that only POST /run fires the job."""
    return days_ahead(1)


def timestamp_ms(value: str) -> int:
    return int(parse(value).timestamp() * 1000)


# --- fixtures ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def peer() -> Iterator[AmqpPeer]:
    with AmqpPeer({KEY_NAME: KEY, SEND_KEY_NAME: SEND_KEY}) as running:
        yield running


@pytest.fixture(scope="module")
def emulator(own_database: str, peer: AmqpPeer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Emulator]:
    emulator = Emulator(own_database, tmp_path_factory.mktemp("servicebus-data"), peer).start()
    try:
        yield emulator
    finally:
        emulator.stop()
        assert emulator.process is not None
        assert KEY not in emulator.process.log and WRONG_KEY not in emulator.process.log, "a SAS key was logged"


@pytest.fixture
def names(emulator: Emulator) -> Names:
    names = Names()
    emulator.collection(names)
    return names


# --- tests -------------------------------------------------------------------------------------------


def test_queue_message_carries_body_application_and_brokered_properties(
    emulator: Emulator, peer: AmqpPeer, names: Names
) -> None:
    queue, job = unique("orders-"), unique("sbq-")
    scheduled = "2031-05-06T07:08:09Z"
    created = emulator.put_job(
        names,
        job,
        {
            "action": queue_action(
                queue,
                message='{"order": 42, "note": "ünïcode"}',
                customMessageProperties={"source": "scheduler", "tenant": "contoso"},
                brokeredMessageProperties={
                    "contentType": "application/json",
                    "correlationId": "corr-1",
                    "label": "new-order",
                    "messageId": "msg-1",
                    "partitionKey": "session-a",
                    "replyTo": "replies",
                    "replyToSessionId": "reply-session",
                    "scheduledEnqueueTimeUtc": scheduled,
                    "sessionId": "session-a",
                    "timeToLive": "PT1H",
                    "to": "fulfilment",
                    "forcePersistence": True,
                    "viaPartitionKey": "via-1",
                },
                transportType="AMQP",
            )
        },
    )
    assert "sasKey" not in created["properties"]["action"]["serviceBusQueueMessage"]["authentication"]

    [message] = peer.wait_messages(queue, 1, timeout=15)
    assert message.body == '{"order": 42, "note": "ünïcode"}'.encode()
    assert message.application_properties == {"source": "scheduler", "tenant": "contoso"}
    assert message.content_type == "application/json"
    assert message.correlation_id == "corr-1"
    assert message.subject == "new-order"
    assert message.message_id == "msg-1"
    assert message.annotations["x-opt-partition-key"] == "session-a"
    assert message.reply_to == "replies"
    assert message.reply_to_group_id == "reply-session"
    assert int(message.annotations["x-opt-scheduled-enqueue-time"]) == timestamp_ms(scheduled)
    assert message.group_id == "session-a"
    assert message.ttl_ms == 3_600_000
    assert message.to == "fulfilment"
    # forcePersistence and viaPartitionKey have no modern equivalent and are not sent
    assert "x-opt-via-partition-key" not in message.annotations
    assert "via-1" not in repr(message)

    [entry] = emulator.wait_history(names, job, 1)
    assert entry["status"] == "Completed", entry
    assert entry["actionName"] == "MainAction"
    assert entry["message"] == f"ServiceBusQueue Action - message sent to queue '{queue}' of namespace 'ns-one'"
    [token] = peer.tokens(queue)
    assert (token.key_name, token.status) == (KEY_NAME, 200)


def test_topic_message_over_the_host_port_mapping_with_timespan_ttl(
    emulator: Emulator, peer: AmqpPeer, names: Names
) -> None:
    topic, job = unique("events-"), unique("sbt-")
    emulator.put_job(
        names,
        job,
        {
            "action": {
                "type": "ServiceBusTopic",
                "serviceBusTopicMessage": {
                    "namespace": "NS-Two",  # namespace mappings are case-insensitive
                    "topicPath": topic,
                    "authentication": {"sasKeyName": SEND_KEY_NAME, "sasKey": SEND_KEY},
                    "message": "topic body",
                    "customMessageProperties": {"kind": "event"},
                    "brokeredMessageProperties": {
                        "label": "evt",
                        "partitionKey": "pk-7",
                        "timeToLive": "00:10:00",
                        "messageId": "evt-1",
                    },
                    "transportType": "NetMessaging",
                },
                "retryPolicy": NO_RETRY,
            }
        },
    )

    [message] = peer.wait_messages(topic, 1, timeout=15)
    assert message.text == "topic body"
    assert message.application_properties == {"kind": "event"}
    assert (message.subject, message.message_id) == ("evt", "evt-1")
    assert message.annotations["x-opt-partition-key"] == "pk-7"
    assert message.ttl_ms == 600_000
    assert message.group_id is None and message.to is None and message.correlation_id is None
    assert "x-opt-scheduled-enqueue-time" not in message.annotations

    [entry] = emulator.wait_history(names, job, 1)
    assert entry["status"] == "Completed", entry
    assert entry["message"] == f"ServiceBusTopic Action - message sent to topic '{topic}' of namespace 'NS-Two'"
    [token] = peer.tokens(topic)
    assert (token.key_name, token.status) == (SEND_KEY_NAME, 200)


def test_wrong_key_fails_each_attempt_then_runs_the_error_action(
    emulator: Emulator, peer: AmqpPeer, names: Names
) -> None:
    queue, errors, job = unique("payments-"), unique("errors-"), unique("sbwrong-")
    emulator.put_job(
        names,
        job,
        {
            "action": {
                **queue_action(
                    queue,
                    key=WRONG_KEY,
                    message="never delivered",
                    retry={"retryType": "Fixed", "retryCount": 1, "retryInterval": "PT1S"},
                ),
                "errorAction": queue_action(errors, message="the payment job failed"),
            }
        },
    )

    entries = emulator.wait_history(names, job, 3)
    main, retry, error = entries
    expected = f"ServiceBusQueue Action - could not authenticate to namespace 'ns-one' with key '{KEY_NAME}': "
    for attempt, entry in enumerate((main, retry)):
        assert (entry["actionName"], entry["status"], entry["retryCount"]) == ("MainAction", "Failed", attempt)
        assert entry["message"].startswith(expected), entry["message"]
        assert "401" in entry["message"] and "signature does not match" in entry["message"], entry["message"]
        assert WRONG_KEY not in entry["message"] and KEY not in entry["message"]
    assert (error["actionName"], error["status"]) == ("ErrorAction", "Completed"), error
    assert error["message"] == f"ServiceBusQueue Action - message sent to queue '{errors}' of namespace 'ns-one'"

    [sent] = peer.wait_messages(errors, 1, timeout=5)
    assert sent.text == "the payment job failed"
    assert peer.messages(queue) == []
    assert [t.status for t in peer.tokens(queue)] == [401, 401]
    assert all(link.entity != queue for link in peer.links()), "a sender attached without an accepted token"

    def faulted() -> dict[str, Any] | None:
        job_now = emulator.job(names, job)
        return job_now if job_now["properties"]["state"] == "faulted" else None

    status = wait_until(faulted, 10, lambda: f"job {job} to become Faulted")["properties"]["status"]
    assert (status["executionCount"], status["failureCount"], status["faultedCount"]) == (2, 2, 1)


def test_fires_reuse_one_sender_connection_cbs_and_link(emulator: Emulator, peer: AmqpPeer, names: Names) -> None:
    queue, job = unique("reuse-"), unique("sbreuse-")
    emulator.put_job(names, job, {"startTime": later(), "action": queue_action(queue, message="again")})
    for fire in (1, 2, 3):
        emulator.run(names, job)
        peer.wait_messages(queue, fire, timeout=15)
        emulator.wait_history(names, job, fire)

    messages = peer.messages(queue)
    assert len({m.connection for m in messages}) == 1, messages
    assert len(peer.tokens(queue)) == 1
    assert len(peer.links(queue)) == 1
    assert [e["status"] for e in emulator.history(names, job)] == ["Completed"] * 3


@pytest.mark.parametrize("abrupt", [False, True], ids=["amqp-close", "socket-reset"])
def test_a_dropped_connection_is_reopened_by_the_next_fire(
    emulator: Emulator, peer: AmqpPeer, names: Names, abrupt: bool
) -> None:
    queue, job = unique("drop-"), unique("sbdrop-")
    emulator.put_job(names, job, {"startTime": later(), "action": queue_action(queue, message="before and after")})
    emulator.run(names, job)
    [first] = peer.wait_messages(queue, 1, timeout=15)
    emulator.wait_history(names, job, 1)

    peer.drop_connections(abrupt=abrupt)
    wait_until(lambda: first.connection not in peer.open_connections(), 5, lambda: "the peer to drop the connection")

    emulator.run(names, job)
    first_again, second = peer.wait_messages(queue, 2, timeout=15)
    assert first_again == first
    assert second.connection != first.connection
    entries = emulator.wait_history(names, job, 2)
    assert [(e["status"], e["retryCount"]) for e in entries] == [("Completed", 0), ("Completed", 0)], entries
    assert len(peer.messages(queue)) == 2, "the message was delivered twice"
    assert len(peer.tokens(queue)) == 2 and len(peer.links(queue)) == 2


def _decoy() -> socket.socket:
    """A loopback listener that no credential may ever reach (never accepted from: a connection waits in its
    backlog, where ``accept`` on the non-blocking socket finds it)."""
    decoy = socket.socket()
    decoy.bind(("127.0.0.1", 0))
    decoy.listen()
    decoy.setblocking(False)
    return decoy


def _connected(decoy: socket.socket) -> bool:
    try:
        decoy.accept()[0].close()
    except BlockingIOError:
        return False
    return True


def test_credentials_reach_only_the_mapped_endpoint_whatever_the_key_holds(
    emulator: Emulator, peer: AmqpPeer, names: Names
) -> None:
    """A sasKey written to redirect a connection string (another Endpoint, plain TCP) is only a key: the token
    it signs goes to the namespace's mapped endpoint, which refuses it, and nothing reaches the other host."""
    with _decoy() as decoy:
        port = decoy.getsockname()[1]
        hostile = f"{KEY};Endpoint=sb://127.0.0.1:{port}/;UseDevelopmentEmulator=true;SharedAccessKeyName=x"
        queue, job = unique("redirect-"), unique("sbredirect-")
        emulator.put_job(names, job, {"startTime": later(), "action": queue_action(queue, key=hostile)})
        emulator.run(names, job)
        [entry] = emulator.wait_history(names, job, 1)
        assert entry["status"] == "Failed" and "could not authenticate" in entry["message"], entry
        assert "401" in entry["message"] and KEY not in entry["message"], entry["message"]
        assert [(t.key_name, t.status) for t in peer.tokens(queue)] == [(KEY_NAME, 401)]
        assert not _connected(decoy), "a job's credentials reached another host"


# Names with characters a URL escapes are left out: the SDK escapes a key name twice in the token (its
# generate_sas_token), which the peer, decoding once, would not match; the rule's ';' and '=' are 400s.
@pytest.mark.parametrize("key_name", ["Send.Only_~-1", "k" * 256], ids=["punctuation", "256-characters"])
def test_any_valid_key_name_and_any_key_authenticate_at_the_mapped_endpoint(key_name: str) -> None:
    """In process: the name and key reach the mapped peer intact (it verifies the token with them), and
    nothing else is connected to, whatever they hold."""
    with _decoy() as decoy:
        key = f"{KEY};Endpoint=sb://127.0.0.1:{decoy.getsockname()[1]};UseDevelopmentEmulator=false"
        with AmqpPeer({key_name: key}) as other:
            action = ServiceBusAction({"ns-one": other.url}, timeout=10)
            message = _queue_message("intact", authentication={"sasKeyName": key_name, "sasKey": key})

            async def run() -> Outcome:
                try:
                    return await action.execute(message, _context())
                finally:
                    await action.close()

            outcome = asyncio.run(run())
            assert outcome.succeeded, outcome.message
            assert [(t.key_name, t.status) for t in other.tokens("intact")] == [(key_name, 200)]
            assert len(other.messages("intact")) == 1
        assert not _connected(decoy)


def test_a_key_name_past_the_api_rule_still_reaches_only_the_mapped_endpoint() -> None:
    """In process, a message built without validation (as a job stored before the rule): a key name holding
    connection-string settings is only a name in the token, sent to the mapped peer, never a redirection."""
    with _decoy() as decoy, AmqpPeer({KEY_NAME: KEY}) as other:
        hostile = f"{KEY_NAME};Endpoint=sb://127.0.0.1:{decoy.getsockname()[1]}/;UseDevelopmentEmulator=true"
        valid = _queue_message("named")
        auth = valid.authentication.model_construct(sas_key_name=hostile, sas_key=KEY, type="SharedAccessKey")
        message = valid.model_copy(update={"authentication": auth})
        action = ServiceBusAction({"ns-one": other.url}, timeout=10)

        async def run() -> Outcome:
            try:
                return await action.execute(message, _context())
            finally:
                await action.close()

        outcome = asyncio.run(run())
        assert not outcome.succeeded and "could not authenticate" in outcome.message, outcome.message
        assert [t.status for t in other.tokens("named")] == [401]
        assert not _connected(decoy), "a key name redirected the connection"


# --- the action in process: endpoint forms and failures that need no scheduler around them --------------


def test_endpoint_mapping_forms() -> None:
    endpoints = {
        "local": "127.0.0.1:5673",
        "bare": "localhost",
        "plain": "amqp://10.0.0.5:6000",
        "tls": "amqps://other.servicebus.windows.net",
        "tls-port": "amqps://proxy.example:6001",
        "sb": "sb://x.example",
        "http": "http://x.example",
    }
    assert resolve_endpoint("Prod-1", endpoints) == Endpoint(
        "Prod-1.servicebus.windows.net", "sb://Prod-1.servicebus.windows.net", emulator=False
    )
    # An unmapped name is spliced into a host name only when it is a valid namespace name
    # (docs/reference/security.md#job-values-that-name-endpoints).
    with pytest.raises(ValueError, match="not a valid Service Bus namespace name"):
        resolve_endpoint("evil.example:1;UseDevelopmentEmulator=true;X=", endpoints)
    assert resolve_endpoint("LOCAL", endpoints) == Endpoint("127.0.0.1:5673", "sb://127.0.0.1:5673", emulator=True)
    assert resolve_endpoint("bare", endpoints) == Endpoint("localhost:5672", "sb://localhost:5672", emulator=True)
    assert resolve_endpoint("plain", endpoints) == Endpoint("10.0.0.5:6000", "sb://10.0.0.5:6000", emulator=True)
    assert resolve_endpoint("tls", endpoints) == Endpoint(
        "other.servicebus.windows.net", "sb://other.servicebus.windows.net", emulator=False
    )
    assert resolve_endpoint("tls-port", endpoints) == Endpoint(
        "proxy.example:6001", "sb://proxy.example", emulator=False, custom_endpoint_address="sb://proxy.example:6001"
    )
    assert resolve_endpoint("sb", endpoints).endpoint == "sb://x.example"
    with pytest.raises(ValueError, match="not amqp://, amqps:// or sb://"):
        resolve_endpoint("http", endpoints)
    # The SDK is given the endpoint and a credential object, never a connection string
    # (docs/reference/security.md#job-values-that-name-endpoints).
    credential = AzureNamedKeyCredential(KEY_NAME, KEY)
    assert resolve_endpoint("local", endpoints).client(credential).fully_qualified_namespace == "127.0.0.1:5673"
    assert resolve_endpoint("tls", endpoints).client(credential).fully_qualified_namespace == (
        "other.servicebus.windows.net"
    )


def _context() -> FireContext:
    return FireContext("tag", "request-id", datetime.now(UTC), "job", "collection", "West US")


def _queue_message(queue: str, namespace: str = "ns-one", **extra: Any) -> ServiceBusQueueMessage:
    return ServiceBusQueueMessage.model_validate(
        {
            "namespace": namespace,
            "queueName": queue,
            "message": "in process",
            "authentication": {"sasKeyName": KEY_NAME, "sasKey": KEY},
            **extra,
        }
    )


def test_action_failures_read_well() -> None:
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen()
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))  # bound, never listening: connections are refused
    port = closed.getsockname()[1]
    with AmqpPeer({KEY_NAME: KEY}, entities={"known"}) as peer, silent, closed:
        action = ServiceBusAction(
            {
                "ns-one": peer.url,
                "silent": f"127.0.0.1:{silent.getsockname()[1]}",
                "refused": f"amqp://127.0.0.1:{port}",
                "oddity": "https://x.example",
            },
            # Long enough for a first AMQP connection and its answer on a loaded machine (1.5 s was not, beside
            # two CPU hogs); only the silent endpoint waits it out.
            timeout=5,
        )

        async def run() -> list[Outcome]:
            try:
                return [
                    await action.execute(message, _context())
                    for message in (
                        _queue_message("missing"),
                        _queue_message("known", "refused"),
                        _queue_message("known", "silent"),
                        _queue_message("known", "oddity"),
                        _queue_message("known", brokeredMessageProperties={"sessionId": "a", "partitionKey": "b"}),
                        _queue_message("known", brokeredMessageProperties={"replyToSessionId": "r" * 200}),
                    )
                ]
            finally:
                await action.close()

        missing, refused, silent_out, odd, mismatch, too_long = asyncio.run(run())
    assert not any(o.succeeded for o in (missing, refused, silent_out, odd, mismatch, too_long))
    assert missing.message == (
        "ServiceBusQueue Action - queue 'missing' was not found in namespace 'ns-one': "
        "The messaging entity 'missing' could not be found."
    )
    assert refused.message.startswith(
        f"ServiceBusQueue Action - could not connect to namespace 'refused' at 127.0.0.1:{port}: connection refused"
    ), refused.message
    assert silent_out.message.startswith(
        "ServiceBusQueue Action - sending to queue 'known' of namespace 'silent' timed out after 5 seconds"
    ), silent_out.message
    assert odd.message == (
        "ServiceBusQueue Action - cannot reach namespace 'oddity': the endpoint 'https://x.example' "
        "mapped to it is not amqp://, amqps:// or sb://"
    )
    assert mismatch.message == (
        "ServiceBusQueue Action - the message for queue 'known' of namespace 'ns-one' is not valid: "
        "brokeredMessageProperties.partitionKey 'b' must equal sessionId 'a' when both are set"
    )
    assert "brokeredMessageProperties.replyToSessionId cannot be longer than 128" in too_long.message
    assert peer.messages() == []


def test_concurrent_fires_share_one_sender_and_close_closes_it() -> None:
    with AmqpPeer({KEY_NAME: KEY}) as peer:
        action = ServiceBusAction({"ns-one": peer.url}, timeout=10)

        async def run() -> list[Outcome]:
            outcomes = await asyncio.gather(*(action.execute(_queue_message("shared"), _context()) for _ in range(8)))
            await action.close()
            return list(outcomes)

        outcomes = asyncio.run(run())
        assert all(o.succeeded for o in outcomes), outcomes
        assert len(peer.messages("shared")) == 8
        assert len(peer.connections()) == 1 and len(peer.tokens("shared")) == 1 and len(peer.links("shared")) == 1
        peer.wait_for(lambda: not peer.open_connections(), 5, "close() to close the connection")
