"""The action process (dispatcher/action_process.py): a started emulator sends its actions from a second process
of its own, forked at start, and records what they answered as before. Seen from outside: the target's
connection belongs to the emulator's child process (read from /proc: the peer's port, the socket's inode, the
process holding it); the ``scheduler_action_process_up`` gauge; when the child is killed, the attempt it had in
flight fails with a message that says so and later fires go out from the emulator itself; the child ends with the
service. ``--action-process off`` sends from the emulator's own process. The dispatcher runs in the emulator's
process here (``--dispatcher-process off``); with a process of its own, that process forks the action process
(tests/e2e/test_dispatcher_process.py)."""

from __future__ import annotations

import marshal
import os
import signal
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
from support.api_client import API, create_job, wait_history
from support.names import Names
from support.processes import children_of, ended_or_killed, process_ended, socket_owner
from support.server import EmulatorPool, ServerProcess
from support.target_server import TargetServer
from support.waiting import wait_until

from scheduler_emulator.dispatcher.action_process import attempt_message, context_of
from scheduler_emulator.dispatcher.actions import FireContext
from scheduler_emulator.dispatcher.definitions import read_definition
from scheduler_emulator.schemas.job import ActionBase

PARAMS = {"api-version": API}
IN_PROCESS = ("--dispatcher-process", "off")  # the dispatcher in the emulator's process, which forks the action process


def gauge(server: ServerProcess) -> float:
    with server.client() as http:
        for line in http.get("/metrics").text.splitlines():
            if line.startswith("scheduler_action_process_up "):
                return float(line.split()[1])
    raise AssertionError("no scheduler_action_process_up in /metrics")


def fire_now(http: httpx.Client, names: Names, job: str, uri: str) -> None:
    create_job(http, names, job, {"type": "Http", "request": {"uri": uri, "method": "GET"}})


@pytest.mark.parametrize("mode", ["on", "off"])
def test_the_target_is_called_from_the_action_process_unless_it_is_off(
    mode: str, emulators: EmulatorPool, target: TargetServer, tmp_path: Path, names: Names
) -> None:
    server = emulators.start(tmp_path, *IN_PROCESS, "--action-process", mode)
    assert server.process is not None
    main = server.process.pid
    children = children_of(main)
    with server.client() as http:
        fire_now(http, names, "j1", target.url("/fired"))
        (fired,) = target.wait_for(1, 15, "/fired")
        owner = socket_owner(fired.client_port, [main, *children])
        entries = wait_history(http, names.job_path("j1"), 1, 15, lambda: server.log_tail())
    message = entries[0]["properties"]["message"]
    assert entries[0]["properties"]["status"] == "Completed", message
    assert message.startswith("Http Action - Response from host '127.0.0.1': 'OK'"), message
    if mode == "on":
        assert len(children) == 1, f"the emulator has children {children}"
        assert owner == children[0], f"the request came from pid {owner}, not the action process {children[0]}"
        assert gauge(server) == 1
        assert f"actions are sent from the action process (pid {children[0]})" in server.log
    else:
        assert children == []
        assert owner == main
        assert gauge(server) == 0


def test_a_killed_action_process_fails_its_attempt_in_flight_and_the_emulator_fires_on(
    emulators: EmulatorPool, target: TargetServer, tmp_path: Path, names: Names
) -> None:
    server = emulators.start(tmp_path, *IN_PROCESS, "--action-process", "on")
    assert server.process is not None
    main = server.process.pid
    (child,) = children_of(main)
    target.respond("/held", delay=10)  # recorded on arrival, answered later: in flight when the child is killed
    with server.client() as http:
        fire_now(http, names, "held", target.url("/held"))
        target.wait_for(1, 15, "/held")
        os.kill(child, signal.SIGKILL)
        entries = wait_history(http, names.job_path("held"), 1, 15, lambda: server.log_tail())
        held = entries[0]["properties"]
        assert held["status"] == "Failed"
        assert held["message"] == "Http Action - the outcome is unknown: the emulator's action process ended"
        wait_until(lambda: gauge(server) == 0, 10, "the gauge down")
        fire_now(http, names, "after", target.url("/after"))
        (after_request,) = target.wait_for(1, 15, "/after")
        assert socket_owner(after_request.client_port, [main]) == main  # sent by the emulator itself now
        after = wait_history(http, names.job_path("after"), 1, 15, lambda: server.log_tail())
        assert after[0]["properties"]["status"] == "Completed"
        with http.stream("GET", "/_emulator/health") as health:
            assert health.status_code == 200
    wait_until(lambda: process_ended(child), 10, f"the killed action process {child} collected")
    assert f"the action process (pid {child}) ended unexpectedly" in server.log
    assert not Path(f"/proc/{child}").exists(), "the emulator did not collect its killed child (a zombie)"


@pytest.mark.parametrize("how", ["SIGTERM", "SIGKILL"])
def test_the_action_process_ends_with_the_emulator(
    how: str, emulators: EmulatorPool, tmp_path: Path, names: Names
) -> None:
    """Stopped (SIGTERM: the service closes its socket at shutdown) or killed, the emulator leaves no action
    process behind. Killed, its action process is killed with it, not a moment later: by the time the emulator
    has been collected the kernel is ending the child, so no attempt the child held can still go out."""
    server = emulators.start(tmp_path, *IN_PROCESS, "--action-process", "on")
    assert server.process is not None
    (child,) = children_of(server.process.pid)
    server.process.send_signal(getattr(signal, how))
    server.wait_exit(30)
    if how == "SIGKILL":
        assert ended_or_killed(child), f"the action process {child} outlived the killed emulator"
    wait_until(lambda: process_ended(child), 15, f"the action process {child} ended")


@pytest.mark.parametrize(
    "action",
    [
        {"type": "Http", "request": {"uri": "http://h/x", "method": "GET"}},
        {
            "type": "Https",
            "request": {
                "uri": "https://h/x?q=1",
                "method": "POST",
                "body": "é\u0000☃",
                "headers": {"X-A": "1", "content-type": "text/plain"},
                "authentication": {"type": "Basic", "username": "u", "password": "p@ss"},
            },
            "retryPolicy": {"retryType": "Fixed", "retryInterval": "PT30S", "retryCount": 2},
        },
        {
            "type": "Http",
            "request": {
                "uri": "http://h/",
                "method": "PUT",
                "authentication": {
                    "type": "ActiveDirectoryOAuth",
                    "tenant": "t",
                    "audience": "https://a",
                    "clientId": "c",
                    "secret": "s",
                },
            },
        },
        {
            "type": "StorageQueue",
            "queueMessage": {"storageAccount": "acct", "queueName": "q", "sasToken": "sv=1&sig=x", "message": "m"},
        },
        {
            "type": "ServiceBusTopic",
            "serviceBusTopicMessage": {
                "namespace": "ns-test",
                "topicPath": "t",
                "message": "m",
                "transportType": "AMQP",
                "authentication": {"type": "SharedAccessKey", "sasKeyName": "k", "sasKey": "v"},
                "brokeredMessageProperties": {"contentType": "text/plain", "timeToLive": "PT1M"},
                "customMessageProperties": {"a": "b"},
            },
        },
    ],
)
def test_an_action_reaches_the_action_process_as_the_dispatcher_read_it(action: dict[str, object]) -> None:
    """What RemoteActions sends (the action's JSON, its error action left out) reads back as the same action."""
    properties = read_definition({"action": {**action, "errorAction": action}, "startTime": "2030-01-01T00:00:00Z"})
    context = FireContext(
        "tag", "request", datetime(2030, 1, 1, tzinfo=UTC), "job", "collection", "West US", 1_900_000_000.25
    )
    sent = marshal.loads(marshal.dumps(attempt_message(7, properties.action, context)))
    assert sent[0] == 7 and context_of(sent[2:]) == context
    received = ActionBase.model_validate_json(sent[1])
    assert received.model_dump() == properties.action.model_dump(exclude={"error_action"})
    assert received.model_dump(exclude_unset=True) == properties.action.model_dump(
        exclude_unset=True, exclude={"error_action"}
    )
