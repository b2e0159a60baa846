"""Action types behind one small interface: ``execute(payload, context) -> Outcome`` (see firing.py)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, TypeVar

MAX_MESSAGE_BODY_BYTES = 2048
P = TypeVar("P", contravariant=True)


@dataclass(frozen=True)
class FireContext:
    """What identifies one attempt of one occurrence to the target."""

    execution_tag: str
    client_request_id: str
    expected_time: datetime
    job_name: str
    collection_name: str
    region: str
    not_before: float | None = None
    """Wall-clock time (seconds since the epoch) before which the attempt must not go out: the dispatcher hands
    an occurrence over a little before its time (loop.HAND_OFF_LEAD), and the attempt waits for it here, on a
    loop that nothing else holds up. None: at once."""


@dataclass(frozen=True)
class Outcome:
    succeeded: bool
    message: str
    started: float | None = None
    """When the attempt went out (wall-clock seconds since the epoch), if it was held (``FireContext.not_before``);
    otherwise None, and the dispatcher takes the time it handed the attempt over."""


class ActionRunner(Protocol[P]):
    """What every action type offers: run one attempt with the action's payload (``P``: HttpRequest,
    StorageQueueMessage, a Service Bus message), and close its clients at shutdown."""

    async def execute(self, payload: P, context: FireContext) -> Outcome: ...

    async def close(self) -> None: ...


def body_excerpt(content: bytes) -> str:
    """The first 2048 bytes of a response body, as text (docs/reference/arm-api.md#history). A NUL byte becomes U+FFFD,
    as bytes that are not UTF-8 do: PostgreSQL cannot store NUL in text, and a binary body must not stop its history
    entry."""
    return content[:MAX_MESSAGE_BODY_BYTES].decode("utf-8", errors="replace").replace("\x00", "\ufffd")
