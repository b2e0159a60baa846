"""The dispatcher's write-behind batches (dispatcher/recorder.py): what callers submit together is written as one
batch, each caller gets its own item's result (a bad item fails alone), and once the batch is written its callers
resume a few at a time, so other work on the event loop (a request that arrived meanwhile) gets a turn between
them instead of waiting for all of them."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from scheduler_emulator.dispatcher.recorder import RESUME_AT_ONCE, BatchRecorder

CALLERS = 3 * RESUME_AT_ONCE


class Refused(Exception):
    pass


def test_a_batch_is_written_once_and_each_caller_gets_its_own_result() -> None:
    batches: list[list[object]] = []

    def write(items: Sequence[object]) -> list[object]:
        batches.append(list(items))
        if "bad" in items:
            raise Refused("one bad item")
        return [f"wrote {item}" for item in items]

    async def scenario() -> list[object]:
        recorder = BatchRecorder(write, gather=0.05)  # type: ignore[arg-type]
        items: list[object] = [*range(CALLERS), "bad"]
        return await asyncio.gather(*(recorder.submit(item) for item in items), return_exceptions=True)  # type: ignore[arg-type]

    results = asyncio.run(scenario())
    assert results[:CALLERS] == [f"wrote {i}" for i in range(CALLERS)]
    assert isinstance(results[-1], Refused)
    assert len(batches[0]) == CALLERS + 1  # all of them gathered into one batch first; then each alone
    assert all(len(batch) == 1 for batch in batches[1:])


def test_once_a_batch_is_written_the_loop_gets_turns_between_its_callers() -> None:
    """The first caller to resume asks the loop for a turn (call_soon, as a socket's data would be read): that
    turn comes before the batch's last callers resume, not after all of them."""
    order: list[str] = []

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        recorder = BatchRecorder(lambda items: list(items), gather=0.05)  # type: ignore[arg-type, return-value]

        async def caller(k: int) -> None:
            await recorder.submit(k)  # type: ignore[arg-type]
            if not order:
                loop.call_soon(order.append, "other work")
            order.append(f"caller {k}")

        await asyncio.gather(*(caller(k) for k in range(CALLERS)))

    asyncio.run(scenario())
    assert sorted(order) == sorted(["other work", *(f"caller {k}" for k in range(CALLERS))])
    turn = order.index("other work")
    assert turn <= RESUME_AT_ONCE, f"the loop's other work waited for {turn} of {CALLERS} callers to resume"


@pytest.mark.parametrize("count", [1, RESUME_AT_ONCE, RESUME_AT_ONCE + 1])
def test_every_caller_resumes_whatever_the_batch_size(count: int) -> None:
    async def scenario() -> list[object]:
        recorder = BatchRecorder(lambda items: [2 * i for i in items], gather=0.01)  # type: ignore[arg-type, misc]
        return await asyncio.gather(*(recorder.submit(k) for k in range(count)))  # type: ignore[arg-type]

    assert asyncio.run(scenario()) == [2 * k for k in range(count)]


def test_callers_of_a_written_batch_hear_of_it_even_if_the_recorder_is_stopped_while_resuming_them() -> None:
    """The batch is written; the recorder's task is cancelled while it resumes the callers in turns: every caller
    still gets its result instead of waiting for ever."""

    async def scenario() -> list[object]:
        recorder = BatchRecorder(lambda items: list(items), gather=0.05)  # type: ignore[arg-type, return-value]
        stopped: list[bool] = []

        async def caller(k: int) -> object:
            result = await recorder.submit(k)  # type: ignore[arg-type]
            if not stopped:  # the first to resume stops the recorder mid-way through the batch
                stopped.append(True)
                assert recorder._drainer is not None
                recorder._drainer.cancel()
            return result

        return await asyncio.wait_for(asyncio.gather(*(caller(k) for k in range(CALLERS))), timeout=30)

    assert asyncio.run(scenario()) == list(range(CALLERS))
