"""RemoteActions (dispatcher/action_process.py) against a peer that never answers: the far end of its socket pair,
held by the test, and a real child process standing for the action process. An attempt left unanswered past
``patience`` fails with a message that says so (a stopped action process must not hold an occurrence for ever);
when the peer's socket closes, the attempts in flight fail and later ones run in this process; closing kills and
collects a child that does not end by itself."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import marshal
import os
import signal
import socket
import struct
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from support.target_server import TargetServer

from scheduler_emulator.config import Settings
from scheduler_emulator.dispatcher.action_process import ActionProcess, RemoteActions, _Child, attempt_message
from scheduler_emulator.dispatcher.actions import FireContext
from scheduler_emulator.dispatcher.definitions import read_definition
from scheduler_emulator.dispatcher.firing import Actions, Deferred

CONTEXT = FireContext("tag", "request", datetime(2030, 1, 1, tzinfo=UTC), "job", "collection", "West US")


def http_action(uri: str):  # type: ignore[no-untyped-def]
    return read_definition({"action": {"type": "Http", "request": {"uri": uri, "method": "GET"}}}).action


def silent_child() -> subprocess.Popen[bytes]:
    """A child that never ends by itself (standing for an action process that has stopped answering)."""
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])


def test_an_unanswered_attempt_fails_after_patience_and_close_collects_the_child(tmp_path: Path) -> None:
    async def scenario() -> tuple[list[str], int | None]:
        ours, peer = socket.socketpair()
        child = silent_child()
        remote = RemoteActions(ActionProcess(child.pid, ours), Actions(Settings(data_dir=tmp_path)), patience=0.3)
        await remote.start()
        outcome = await asyncio.wait_for(remote.execute(http_action("http://127.0.0.1:9/x"), CONTEXT), 10)
        received = peer.recv(65536)
        await remote.close()
        peer.close()
        return [outcome.message, str(outcome.succeeded), received.decode("latin-1")], child.poll()

    (message, succeeded, received), status = asyncio.run(scenario())
    assert succeeded == "False"
    assert message == (
        "Http Action - the outcome is unknown: the emulator's action process did not answer within 0.3 s"
    )
    assert "http://127.0.0.1:9/x" in received  # the attempt was sent to the peer
    assert status is not None  # killed and collected by close()


def test_when_the_peer_closes_the_attempt_in_flight_fails_and_later_ones_run_here(
    tmp_path: Path, target: TargetServer
) -> None:
    async def scenario() -> tuple[str, str, bool, float]:
        ours, peer = socket.socketpair()
        child = silent_child()
        gauge: list[float] = []  # what the gauge is set to (the app passes the gauge's setter)
        local = Actions(Settings(data_dir=tmp_path))
        remote = RemoteActions(ActionProcess(child.pid, ours), local, up=gauge.append, patience=60)
        await remote.start()
        in_flight = asyncio.create_task(remote.execute(http_action(target.url("/never")), CONTEXT))
        await asyncio.sleep(0.2)
        peer.close()  # the action process's end goes away
        first = await asyncio.wait_for(in_flight, 10)
        later = await asyncio.wait_for(remote.execute(http_action(target.url("/later")), CONTEXT), 10)
        child.kill()
        await remote.close()
        return first.message, later.message, later.succeeded, gauge[-1]

    first, later, later_succeeded, gauge = asyncio.run(scenario())
    assert first == "Http Action - the outcome is unknown: the emulator's action process ended"
    assert later_succeeded, later
    assert target.requests("/later") and not target.requests("/never")
    assert gauge == 0


def test_an_action_the_action_process_cannot_read_fails_and_its_secrets_are_not_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The action process's side (``_Child``) over a real socket pair: an action that does not read back (a bug
    if it happens: the dispatcher read it) is a failed attempt, and the log says where, not what."""

    async def scenario() -> tuple[Any, ...]:
        ours, theirs = socket.socketpair()
        child = _Child(Actions(Settings(data_dir=tmp_path)))
        serving = asyncio.create_task(child.serve(theirs))
        reader, writer = await asyncio.open_unix_connection(sock=ours)
        secret = {"type": "Basic", "password": "s3cret"}
        bad = json.dumps({"type": "Http", "request": {"uri": "not a uri", "authentication": secret}})
        payload = marshal.dumps((5, bad, *attempt_message(0, http_action("http://h/"), CONTEXT)[2:]))
        writer.write(struct.pack("!I", len(payload)) + payload)
        length = struct.unpack("!I", await asyncio.wait_for(reader.readexactly(4), 10))[0]
        answer = marshal.loads(await reader.readexactly(length))
        writer.close()
        await asyncio.wait_for(serving, 10)
        return answer

    with caplog.at_level(logging.ERROR, logger="scheduler_emulator.dispatcher"):
        answer = asyncio.run(scenario())
    assert answer == (5, False, "Action - the emulator's action process could not read the action", None)
    assert "could not read an action (at request" in caplog.text
    assert "s3cret" not in caplog.text


def test_an_attempt_held_until_its_time_goes_out_then_and_says_when(tmp_path: Path, target: TargetServer) -> None:
    """An attempt handed over before its time (``not_before``, as the dispatcher does for occurrences claimed
    ahead) is held by the action process's side until then, never sent early; the answer says when it went."""

    async def scenario() -> tuple[float, Any]:
        ours, theirs = socket.socketpair()
        child = silent_child()  # stands for the action process's pid; _Child serves on this loop
        settings = Settings(data_dir=tmp_path)
        serving = asyncio.create_task(_Child(Actions(settings)).serve(theirs))
        remote = RemoteActions(ActionProcess(child.pid, ours), Actions(settings), patience=60)
        await remote.start()
        not_before = time.time() + 0.3
        context = dataclasses.replace(CONTEXT, not_before=not_before)
        outcome = await asyncio.wait_for(remote.execute(http_action(target.url("/held")), context), 10)
        await remote.close()
        await asyncio.wait_for(serving, 10)
        return not_before, outcome

    not_before, outcome = asyncio.run(scenario())
    assert outcome.succeeded, outcome.message
    (arrived,) = target.requests("/held")
    assert outcome.started is not None and not_before <= outcome.started <= arrived.wall.timestamp()


def test_once_the_emulators_process_is_gone_the_action_process_sends_nothing_more(
    tmp_path: Path, target: TargetServer
) -> None:
    """An attempt held until its time, in an action process whose parent has gone (here: told another pid),
    is not sent: the dispatcher that handed it over cannot record it, and another one takes it over (a kill -9 of
    the emulator's process must not leave requests going out after it)."""

    async def scenario() -> int:
        ours, theirs = socket.socketpair()
        child = _Child(Actions(Settings(data_dir=tmp_path)), parent=-1)
        serving = asyncio.create_task(child.serve(theirs))
        _, writer = await asyncio.open_unix_connection(sock=ours)
        context = dataclasses.replace(CONTEXT, not_before=time.time() + 0.1)
        payload = marshal.dumps(attempt_message(3, http_action(target.url("/orphaned")), context))
        writer.write(struct.pack("!I", len(payload)) + payload)
        await writer.drain()
        started = 0
        for _ in range(200):  # until the attempt has been received and has ended
            started = started or len(child.running)
            if started and not child.running:
                break
            await asyncio.sleep(0.05)
        writer.close()
        await asyncio.wait_for(serving, 10)
        return started

    assert asyncio.run(scenario()) == 1
    assert target.requests("/orphaned") == []


def test_an_attempt_held_while_the_emulators_process_is_stopped_comes_back_unsent(
    tmp_path: Path, target: TargetServer
) -> None:
    """The emulator's process stopped (SIGSTOP) when a held attempt falls due: the attempt is not sent (the
    stopped dispatcher could not record it, and may lose it to another meanwhile) and comes back Deferred; once
    the process runs again, the next attempt goes out."""
    stopped = silent_child()  # stands for the emulator's process
    os.kill(stopped.pid, signal.SIGSTOP)

    async def scenario() -> tuple[bool, bool]:
        ours, theirs = socket.socketpair()
        settings = Settings(data_dir=tmp_path)
        child = _Child(Actions(settings), parent=stopped.pid, own_parent=lambda: stopped.pid)
        serving = asyncio.create_task(child.serve(theirs))
        remote = RemoteActions(ActionProcess(silent_child().pid, ours), Actions(settings), patience=60)
        await remote.start()
        context = dataclasses.replace(CONTEXT, not_before=time.time() + 0.1)
        try:
            await asyncio.wait_for(remote.execute(http_action(target.url("/while-stopped")), context), 10)
            deferred = False
        except Deferred:
            deferred = True
        os.kill(stopped.pid, signal.SIGCONT)
        context = dataclasses.replace(CONTEXT, not_before=time.time() + 0.1)
        outcome = await asyncio.wait_for(remote.execute(http_action(target.url("/running")), context), 10)
        await remote.close()
        await asyncio.wait_for(serving, 10)
        return deferred, outcome.succeeded

    try:
        assert asyncio.run(scenario()) == (True, True)
    finally:
        stopped.kill()
        stopped.wait(10)
    assert target.requests("/while-stopped") == []
    assert len(target.requests("/running")) == 1
