"""Action types behind one small interface: ``execute(action, context) -> Outcome``."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from scheduler_emulator.schemas.job import ActionBase

MAX_MESSAGE_BODY_BYTES = 2048


@dataclass(frozen=True)
class FireContext:
    """What identifies one attempt of one occurrence to the target."""

    execution_tag: str
    client_request_id: str
    expected_time: datetime
    job_name: str
    collection_name: str
    region: str


@dataclass(frozen=True)
class Outcome:
    succeeded: bool
    message: str


class ActionRunner(Protocol):
    async def execute(self, action: ActionBase, context: FireContext) -> Outcome: ...


def body_excerpt(content: bytes) -> str:
    """The first 2048 bytes of a response body, as text (SPEC §7). A NUL byte becomes U+FFFD, as bytes that are
    not UTF-8 do: PostgreSQL cannot store NUL in text, and a binary body must not stop its history entry."""
    return content[:MAX_MESSAGE_BODY_BYTES].decode("utf-8", errors="replace").replace("\x00", "\ufffd")
