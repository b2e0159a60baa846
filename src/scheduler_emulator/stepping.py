"""What serves ``POST /_emulator/clock`` (docs/reference/test-support.md#virtual-clock): the virtual clock moved in
steps, each to the next instant something is due (a scheduled time, a run request, a retry), running it there through
the dispatcher's public calls, in time order. The dispatcher itself knows nothing of the virtual clock: it is built with
this module's ``PACING`` (it claims nothing on its own schedule) and this module decides when it claims."""

from __future__ import annotations

import asyncio
from datetime import datetime

from scheduler_emulator.dispatcher.loop import Dispatcher, Pacing
from scheduler_emulator.virtual_clock import VirtualClock

# How the dispatcher a stepper drives is built (app.py): it claims only when a step asks (start_due), exactly
# what is due at the step's instant (nothing ahead: the clock stands still until the next step); and every step
# waits for its occurrences' writes, so they gather for 5 ms rather than the 20 ms of a dispatcher on its own
# schedule (recorder.GATHER_SECONDS).
PACING = Pacing(claims_on_schedule=False, claim_ahead=0.0, gather_seconds=0.005)
MAX_STEPS = 10_000_000  # bound of one advance: each step runs at least one occurrence or retry, or it ends
SETTLE_POLL = 0.002  # seconds between looks at the occurrences still running


class ClockStepper:
    """Moves ``clock`` and has ``dispatcher`` (built with ``PACING``) run what falls due on the way. Hold ``lock``
    around an advance and whatever decided its target: one advance at a time per process."""

    def __init__(self, clock: VirtualClock, dispatcher: Dispatcher) -> None:
        self.clock = clock
        self.dispatcher = dispatcher
        self.lock = asyncio.Lock()

    async def advance(self, target: datetime, step_timeout: float = 120.0) -> dict[str, int]:
        """Move the clock to ``target``, stepping to each instant something is due and running it there;
        returns what ran (occurrences, attempts, failed). TimeoutError when a step's occurrences are still
        running after ``step_timeout`` seconds."""
        clock, dispatcher = self.clock, self.dispatcher
        before = dict(dispatcher.counts)
        for _ in range(MAX_STEPS):
            await self._settle(step_timeout)
            due = await dispatcher.next_due_time()
            timer = clock.next_timer()
            candidates = [t for t in (due, timer) if t is not None]
            if not candidates or min(candidates) > target:
                break
            moment = max(min(candidates), clock.now())
            await clock.set(moment)  # stores it (one small write) and releases the retries due by then
            claimed = await dispatcher.start_due(moment)
            if not claimed and (timer is None or timer > moment) and due is not None and due <= moment:
                break  # due, but held by another dispatcher: nothing more this process can run
        await clock.set(target)
        await self._settle(step_timeout)
        return {key: dispatcher.counts[key] - before[key] for key in dispatcher.counts}

    async def _settle(self, timeout: float) -> None:
        """Wait until every occurrence running here has finished or waits for a later virtual instant."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while any(not task.done() and task not in self.clock.sleeping for task in self.dispatcher.running):
            if loop.time() > deadline:
                raise TimeoutError(f"occurrences still running after {timeout:.0f} s")
            await asyncio.sleep(SETTLE_POLL)
        await asyncio.sleep(0)
