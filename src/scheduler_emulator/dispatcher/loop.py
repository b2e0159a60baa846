"""The due-job loop: claim → spawn one task per occurrence (see occurrence.py) → sleep until the next due time
or a wake-up. Everything it asks of the database goes through the store port (store/dispatch_port.py)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from typing import TypeVar

from scheduler_emulator.config_groups import DispatchSettings
from scheduler_emulator.dispatcher.definitions import Claim, read_definition
from scheduler_emulator.dispatcher.firing import TIMER_RESOLUTION, ActionSender
from scheduler_emulator.dispatcher.occurrence import OccurrenceRunner, Released
from scheduler_emulator.dispatcher.recorder import GATHER_SECONDS, BatchRecorder, is_outage, patiently
from scheduler_emulator.domain.clock import Clock, WallClock
from scheduler_emulator.domain.states import JobState
from scheduler_emulator.faults import pause_point
from scheduler_emulator.metrics import Metrics
from scheduler_emulator.store.database import Database
from scheduler_emulator.store.dispatch_port import DispatchStore
from scheduler_emulator.store.dispatch_records import Abandon
from scheduler_emulator.store.wakeups import Wakeups

log = logging.getLogger("scheduler_emulator.dispatcher")
T = TypeVar("T")

CLAIM_BATCH = 200
# Seconds the loop waits before it looks again when due jobs exist but none could be claimed: their rows are
# locked by another transaction (another dispatcher's claim, an API write; a frozen process's until PostgreSQL
# ends its session). Without it the loop would spin, claiming nothing, for as long as the lock is held.
LOCKED_RETRY = 0.1
HEARTBEAT_RETRY = 0.25  # seconds between heartbeats while they fail
STATISTICS_INTERVAL = 10.0  # seconds (monotonic) between looks at the planner's statistics (store.refresh_statistics)
# Seconds before its time that an occurrence claimed ahead is started and its first attempt handed to the
# actions, which hold it until its time (FireContext.not_before, firing.hold_until): a fire then waits on a timer
# of its own rather than behind the loop's next claim, which may be late by the length of a claim or a garbage
# collection. The job is re-checked against API writes this much earlier than its time. Only on the wall clock.
HAND_OFF_LEAD = 0.05


@dataclass(frozen=True, slots=True, kw_only=True)
class Pacing:
    """When the dispatcher claims and how long it gathers its writes; decided once, when it is built (app.py)."""

    claims_on_schedule: bool = True
    """True: the loop claims what falls due by itself, as its clock reaches it. False: it claims only when asked
    (start_due); the loop keeps retention alone (how stepping.ClockStepper drives it)."""
    claim_ahead: float = 0.0
    """Seconds before their time that occurrences are claimed, then started on a timer (``--claim-ahead``)."""
    gather_seconds: float = GATHER_SECONDS
    """How long the batch recorder gathers small writes into one transaction (recorder.GATHER_SECONDS)."""

    @classmethod
    def of(cls, dispatch: DispatchSettings) -> Pacing:
        """The pacing of a dispatcher on its own schedule, as the operator's settings ask."""
        return cls(claims_on_schedule=True, claim_ahead=dispatch.claim_ahead, gather_seconds=GATHER_SECONDS)


class Dispatcher:
    """Fires every due occurrence once. Start with :meth:`start`, stop with :meth:`stop`; call
    :meth:`wake` after any change that may make a job due earlier. ``pacing`` (default: Pacing.of(dispatch))
    says whether it claims on its own schedule or only when asked (:meth:`start_due`)."""

    def __init__(
        self,
        database: Database,
        *,
        clock: Clock,
        dispatch: DispatchSettings,
        actions: ActionSender,
        metrics: Metrics,
        pacing: Pacing | None = None,
        watch_file: bool = False,
    ) -> None:
        self.metrics = metrics
        self.clock = clock
        self.settings = dispatch
        self.watch_file = watch_file  # a SQLite file's changes by other processes wake it (store/wakeups.py)
        self.pacing = pacing = pacing or Pacing.of(dispatch)
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"[:64]
        self.wall = WallClock()  # heartbeats and leases: real time whatever the scheduling clock
        self.store = DispatchStore(
            database,
            self.owner,
            read_definition=read_definition,
            clock=clock,
            wall=self.wall,
            history_max_entries=dispatch.history_max_entries,
        )
        self.recorder = BatchRecorder(
            self.store.write, gather=pacing.gather_seconds, on_batch=metrics.write_batches.inc
        )
        self._stopping = asyncio.Event()  # set: claim nothing more, start no new retry
        self.runner = OccurrenceRunner(
            recorder=self.recorder,
            clock=clock,
            dispatch=dispatch,
            actions=actions,
            metrics=metrics,
            stopping=self._stopping,
            on_attempt=self._count_attempt,
            still_held=self.still_held,
        )
        self._sleeping_until: datetime | None = None  # when the loop next looks for due work by itself
        self._noted: datetime | None = None  # the earliest ``not_before`` of wake-ups during the current cycle
        self._wakeups: Wakeups | None = None
        self.lease = timedelta(seconds=dispatch.lease_seconds)
        self._half_lease = dispatch.lease_seconds / 2
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._renewal: asyncio.Task[None] | None = None
        self._running: set[asyncio.Task[None]] = set()
        # Occurrences claimed ahead (``--claim-ahead``) and waiting for their time; an API write in the
        # meantime (``changed``) makes them re-check their job before they fire.
        self.ahead = timedelta(seconds=pacing.claim_ahead)
        # How early such an occurrence is started and handed over (HAND_OFF_LEAD): none on a clock the actions'
        # wall clock cannot follow (virtual, or a test's clock set apart from real time).
        self.lead = timedelta(seconds=min(HAND_OFF_LEAD, pacing.claim_ahead) if type(clock) is WallClock else 0)
        self._counts = {"occurrences": 0, "attempts": 0, "failed": 0}  # since start
        # By occurrence id: the timer that starts each one at its time (a timer, not a sleeping task: at
        # 3,000 fires/s a task, a sleep future and an extra task step per occurrence were ~3 % of the CPU).
        self._waiting: dict[int, tuple[asyncio.TimerHandle, Claim]] = {}
        self._generation = 0
        self._next_housekeeping: datetime | None = None
        self._next_statistics = 0.0  # time.monotonic() of the next look at the planner's statistics
        self._statistics: asyncio.Task[None] | None = None
        # Leases after a pause: when the last heartbeat that went through began (monotonic and wall time; either
        # may stand still through a frozen VM). Older than half a lease, the leases may have run out meanwhile
        # and been taken over: every claim is confirmed (``still_held``) before it fires again.
        self._beat_monotonic: float | None = None
        self._beat_wall: float | None = None
        self._confirming = asyncio.Lock()
        # After the database was away: every dispatcher's heartbeat ran out with it, and the first one back would
        # take over what the others still hold (and fire it twice) before their heartbeats go through again. So
        # once this one's goes through again, it takes nothing over for a lease (``_may_take_over``): the others
        # beat a third of a lease apart (0.25 s while they fail), so a dispatcher still stale after that is gone.
        self._store_away = False
        self._take_overs_from = 0.0  # time.monotonic() from which take-overs are allowed again
        self._lost: set[int] = set()  # occurrence ids taken over by another dispatcher: never fired here
        self._active: dict[int, Claim] = {}  # occurrences started here and not finished, by id

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name="dispatcher")
        # A process that serves the API wakes its dispatcher itself (api.context.wake_dispatcher); one that does
        # not learns of the API's changes on a SQLite file by watching it (store.wakeups.SqliteWakeups).
        self._wakeups = self.store.wakeups(self.wake, watch_file=self.watch_file)
        if self._wakeups is not None:
            self._wakeups.start()

    async def stop(self, grace: float = 0.0) -> None:
        """Stop claiming; let attempts in flight finish for up to ``grace`` seconds (no new retries start),
        then abandon the rest and hand their leases back at once, so the next start (or another
        dispatcher) resumes those occurrences."""
        self._stopping.set()  # interrupts retry waits
        if self._wakeups is not None:
            await self._wakeups.stop()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        not_started, self._waiting = list(self._waiting.values()), {}  # no claim is made after this point
        for timer, _ in not_started:
            timer.cancel()
        waiting = tuple(claim for _, claim in not_started)
        if waiting:  # not started: hand them back as never claimed, so a restart does not run them twice
            with contextlib.suppress(Exception):
                await self._db(lambda: self.store.abandon(waiting))
        if self._running:
            _, pending = await asyncio.wait(list(self._running), timeout=grace)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.gather(*pending, return_exceptions=True)
                log.info("released %d occurrence(s) still in flight at shutdown", len(pending))
        if self._renewal is not None:
            self._renewal.cancel()
        if self._statistics is not None:  # an ANALYZE in a worker thread cannot be cancelled: let it end
            await asyncio.wait([self._statistics])
        with contextlib.suppress(Exception):
            await self._db(self.store.sign_off)

    def wake(self, not_before: datetime | None = None) -> None:
        """Something changed (an API write, here or in another process): look for due work now, and make
        occurrences claimed ahead re-check their job before they fire. ``not_before``: the change only made
        jobs due at that time or later, none of them claimed (store.wakeups.earliest_noted): then nothing
        claimed re-checks, and a loop asleep until a time that leaves it enough claim-ahead for them sleeps
        on (creating jobs through the API woke it for a claim cycle per job)."""
        if not_before is None or not_before.tzinfo is None:
            self._generation += 1
        elif self._sleeping_until is None:  # mid-cycle: decided once the cycle has planned its next look
            self._noted = not_before if self._noted is None else min(self._noted, not_before)
            return
        elif not_before - self.ahead / 2 >= self._sleeping_until:
            return
        self._wake.set()

    # -- the loop ---------------------------------------------------------------------------------

    async def _db(self, work: Callable[[], T]) -> T:
        """Run a store port call in a worker thread (each opens its own transaction)."""
        return await asyncio.to_thread(work)

    async def _loop(self) -> None:
        poll = timedelta(seconds=self.settings.poll_interval)
        half_ahead = self.ahead / 2  # wake when the earliest job is this close: each cycle claims ~half a window
        # Registered (alive) before the first claim, so no other dispatcher takes our leases for abandoned.
        for attempt in range(1_000_000):
            try:
                await self._beat()
                break
            except Exception as exc:  # noqa: BLE001 - the database may not be up yet
                log.warning("registering the dispatcher failed (%s); retrying", str(exc).splitlines()[0])
                await asyncio.sleep(min(5.0, 0.5 * (attempt + 1)))
        self._renewal = asyncio.create_task(self._heartbeat(), name="heartbeat")
        while not self.pacing.claims_on_schedule:  # claims only when asked (start_due): retention alone runs here
            with contextlib.suppress(Exception):
                await self._housekeeping(self.clock.now())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=poll.total_seconds())
            self._wake.clear()
        while True:
            try:
                self._wake.clear()
                self._sleeping_until = None  # awake: any change may matter
                self._noted = None
                now = self.clock.now()
                generation = self._generation
                self.metrics.cycles.inc()
                claims = await self._db(
                    partial(self.store.claim_due, now, CLAIM_BATCH, now + self.ahead, take_over=self._may_take_over())
                )
                if claims:
                    pause_point("claimed")  # fault tests: frozen between a claim and its fires
                    _log_takeovers(claims)
                soon = self.clock.now()
                for claim in claims:
                    if claim.expected_time - self.lead > soon:  # claimed ahead: started at its time, less the lead
                        self._wait_for(claim, generation, soon)
                    else:
                        self._start(claim, generation, waited=claim.expected_time > soon)
                if len(claims) >= CLAIM_BATCH:
                    continue
                await self._housekeeping(now)
                self._keep_statistics()
                wake_at = await self._db(lambda: self.store.next_wake_time(self.clock.now(), half_ahead))
                delay = poll.total_seconds()
                if wake_at is not None:
                    delay = min(delay, max(0.0, (wake_at - self.clock.now()).total_seconds()))
                    if delay <= 0 and not claims:  # due but locked elsewhere: look again shortly, not at once
                        delay = min(poll.total_seconds(), LOCKED_RETRY)
                self._sleeping_until = self.clock.now() + timedelta(seconds=delay)
                if self._noted is not None and self._noted - half_ahead < self._sleeping_until:
                    delay = 0.0  # a job made due meanwhile needs a look before the one planned
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if is_outage(exc):
                    self._store_away = True
                    # The database went away, or ended this session (idle inside the claim's transaction past
                    # its bound while this process was frozen): nothing was claimed, nothing being committed.
                    log.warning("dispatcher cycle failed (%s); retrying", str(exc).splitlines()[0])
                else:
                    log.exception("dispatcher cycle failed; retrying")
                delay = min(poll.total_seconds(), 1.0)
            if delay > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), timeout=delay)

    # -- claims when asked (what stepping.ClockStepper calls) ---------------------------------------------

    def _count_attempt(self, succeeded: bool) -> None:
        self._counts["attempts"] += 1
        self._counts["failed"] += not succeeded

    @property
    def counts(self) -> Mapping[str, int]:
        """What ran here since start: ``occurrences`` started, ``attempts`` made, of which ``failed``."""
        return dict(self._counts)

    @property
    def running(self) -> frozenset[asyncio.Task[None]]:
        """The occurrences started here and not finished (running, or waiting to retry)."""
        return frozenset(self._running)

    async def next_due_time(self) -> datetime | None:
        """When the earliest occurrence or run request falls due (store.next_due_time); None: nothing."""
        return await self._db(self.store.next_due_time)

    async def start_due(self, moment: datetime) -> int:
        """Claim and start everything due at ``moment``; how many occurrences were claimed."""
        claimed = 0
        for _ in range(100_000):
            claims = await self._db(partial(self.store.claim_due, moment, CLAIM_BATCH, moment))
            for claim in claims:
                self._start(claim, self._generation, waited=False)
            claimed += len(claims)
            if len(claims) < CLAIM_BATCH:
                break
        return claimed

    # -- one occurrence ---------------------------------------------------------------------------

    def _wait_for(self, claim: Claim, generation: int, now: datetime, rounds: int = 0) -> None:
        """Start ``claim``'s occurrence at its expected time less the lead; until then it is in ``_waiting``."""
        delay = (claim.expected_time - self.lead - now).total_seconds()
        if rounds:
            # The timer went off early. uvloop counts timers in whole milliseconds from when the loop's
            # current iteration began, so a rest under half a millisecond would go off at once, again and again
            # (measured at 3,000 fires/s: ~4.6 extra wake-ups per fire, some spinning until the round limit).
            delay = max(delay, TIMER_RESOLUTION)
        timer = asyncio.get_running_loop().call_later(delay, self._on_time, claim, generation, rounds)
        self._waiting[claim.occurrence_id] = (timer, claim)

    def _on_time(self, claim: Claim, generation: int, rounds: int) -> None:
        if self._stopping.is_set():
            return  # stop() hands it back
        now = self.clock.now()
        # The loop's timers run on the monotonic clock, which drifts from UTC a little: wait the rest.
        if claim.expected_time - self.lead > now and rounds < 100:
            self._wait_for(claim, generation, now, rounds + 1)
            return
        self._waiting.pop(claim.occurrence_id, None)
        self._start(claim, generation, waited=True)

    def _start(self, claim: Claim, generation: int, waited: bool) -> None:
        task = asyncio.create_task(self._run_occurrence(claim, generation, waited))
        self._running.add(task)
        self._active[claim.occurrence_id] = claim
        task.add_done_callback(self._running.discard)
        task.add_done_callback(lambda _: self._finished(claim.occurrence_id))

    def _finished(self, occurrence_id: int) -> None:
        self._active.pop(occurrence_id, None)
        self._lost.discard(occurrence_id)

    async def _run_occurrence(self, claim: Claim, generation: int, waited: bool) -> None:
        """Run one occurrence due now (or within the lead: its first attempt waits for its time in the actions);
        ``waited``: it was claimed ahead, so its job may have changed since."""
        if not await self.still_held(claim):
            return  # taken over by another dispatcher while this process was frozen
        if waited and generation != self._generation and not await self._still_current(claim):
            return  # its job changed while it waited
        self.metrics.occurrences.inc()
        self._counts["occurrences"] += 1
        self.metrics.in_flight.inc()
        try:
            finish = await self.runner.run(claim, not_before=claim.expected_time.timestamp() if self.lead else None)
        except (asyncio.CancelledError, Released):
            pass  # stopping: the lease is handed back by stop(); or taken over by another dispatcher
        except Exception:
            log.exception("occurrence of job %s/%s failed unexpectedly", claim.collection_name, claim.job_name)
        else:
            if (
                finish is not None
                and finish.next_time is not None
                and (self._sleeping_until is None or finish.next_time - self.ahead / 2 < self._sleeping_until)
            ):
                self._wake.set()  # the job is due again before the loop planned to look
        finally:
            self.metrics.in_flight.dec()

    async def _still_current(self, claim: Claim) -> bool:
        """Whether an occurrence claimed ahead should still fire: an API write since the claim may have
        replaced, disabled or deleted its job (or disabled its collection). If not, it is given back."""
        try:
            status = await self._db(lambda: self.store.job_status(claim.job_id))
        except Exception:  # noqa: BLE001 - cannot tell: fire as claimed, as if the change came just after
            log.warning("could not re-check job %s/%s before firing", claim.collection_name, claim.job_name)
            return True
        enabled = (
            status is not None and status.state == JobState.Enabled and status.collection_state == JobState.Enabled
        )
        if status is not None and status.version == claim.version and (claim.manual or enabled):
            return True
        await patiently(lambda: self.recorder.submit(Abandon(claims=(claim,))), self._stopping)
        self._wake.set()  # its job may be due again (a new definition, a re-enabled collection)
        return False

    async def _beat(self) -> None:
        if self._beat_monotonic is not None and not self._leases_sure():
            async with self._confirming:  # a pause may have cost the leases: renewing them blindly would fire twice
                await self._confirm()
            return
        started, wall, now = time.monotonic(), time.time(), self.wall.now()
        await self._db(lambda: self.store.heartbeat(now, now + self.lease))
        self._beat_monotonic, self._beat_wall = started, wall
        self._back()

    def _back(self) -> None:
        """A heartbeat went through: if the database had been away, take nothing over for a lease from now."""
        if self._store_away:
            self._store_away = False
            self._take_overs_from = time.monotonic() + self.lease.total_seconds()
            log.info(
                "the database answers again; this dispatcher takes over no other's occurrences for %g s (a lease), "
                "while the others' heartbeats go through again",
                self.lease.total_seconds(),
            )

    def _may_take_over(self) -> bool:
        """Whether a claim may take over occurrences whose dispatcher's heartbeat ran out (see __init__)."""
        return not self._store_away and time.monotonic() >= self._take_overs_from

    def _leases_sure(self) -> bool:
        """Whether the last heartbeat is recent enough that no other dispatcher can have taken a lease over."""
        if self._beat_monotonic is None or self._beat_wall is None:
            return False
        age = max(time.monotonic() - self._beat_monotonic, time.time() - self._beat_wall)
        return age < self._half_lease

    async def still_held(self, claim: Claim) -> bool:
        """Whether ``claim`` may fire (or retry) now: always, unless this process missed its heartbeats (frozen,
        or cut off from the database) long enough for its leases to run out — then what it holds is confirmed
        in the database first, and an occurrence another dispatcher took over meanwhile is not fired here."""
        if claim.occurrence_id in self._lost:
            return False
        if not self._leases_sure():
            async with self._confirming:
                if not self._leases_sure():  # another occurrence's confirmation may have just been done
                    await self._confirm()
        return claim.occurrence_id not in self._lost

    async def _confirm(self) -> None:
        """Renew the heartbeat and find which of the occurrences waiting or running here are still this
        dispatcher's; the others are marked lost (skipped when their turn comes). If the database cannot
        answer, they fire as claimed (at-least-once), and the next one asks again."""
        held_here = {claim.occurrence_id for _, claim in self._waiting.values()} | set(self._active)
        started, wall, now = time.monotonic(), time.time(), self.wall.now()
        try:
            held = await self._db(lambda: self.store.confirm_held(sorted(held_here), now, now + self.lease))
        except Exception as exc:  # noqa: BLE001 - cannot tell: fire as claimed
            self._store_away = True
            log.warning("could not confirm this dispatcher's leases (%s)", str(exc).splitlines()[0])
            return
        lost = held_here - held
        if lost:
            paused = time.monotonic() - self._beat_monotonic if self._beat_monotonic is not None else 0.0
            log.warning(
                "this dispatcher missed its heartbeats for %.1f s (lease %g s): %d occurrence(s) it had claimed "
                "were taken over by another dispatcher meanwhile and are not fired here",
                paused,
                self.lease.total_seconds(),
                len(lost),
            )
        self._lost |= lost
        for occurrence_id in lost:  # not waiting any more: when their timer goes off, nothing is done
            waiting = self._waiting.pop(occurrence_id, None)
            if waiting is not None:
                waiting[0].cancel()
                self._lost.discard(occurrence_id)
        self._beat_monotonic, self._beat_wall = started, wall
        self._back()

    async def _heartbeat(self) -> None:
        """Keep this process registered as alive; that keeps every lease it holds, whatever their number,
        with one single-row UPDATE a third of a lease apart."""
        interval = self.lease.total_seconds() / 3
        pause = interval
        while True:
            await asyncio.sleep(pause)
            try:
                await self._beat()
                pause = interval
            except Exception as exc:  # noqa: BLE001 - the next beat tries again, soon
                self._store_away = True
                log.warning("dispatcher heartbeat failed: %s", str(exc).splitlines()[0])
                # The database is away (a restart, a failover): beat again as soon as it is back, not a third of
                # a lease later, or the leases could run out just after the outage while this process lives and
                # its occurrences in flight would be taken over and fired twice.
                pause = min(interval, HEARTBEAT_RETRY)

    # -- retention --------------------------------------------------------------------------------

    def _keep_statistics(self) -> None:
        """Every STATISTICS_INTERVAL, keep the database's planner statistics of the dispatcher's tables fresh
        (store.refresh_statistics), beside the loop: an ANALYZE takes a moment, and claims go on meanwhile."""
        if time.monotonic() < self._next_statistics or (self._statistics is not None and not self._statistics.done()):
            return
        self._next_statistics = time.monotonic() + STATISTICS_INTERVAL
        self._statistics = asyncio.create_task(self._refresh_statistics(), name="statistics")

    async def _refresh_statistics(self) -> None:
        try:
            analyzed = await self._db(self.store.refresh_statistics)
        except Exception as exc:  # noqa: BLE001 - plans may be slower; firing goes on
            log.warning("refreshing the planner's statistics failed (%s)", str(exc).splitlines()[0])
            return
        if analyzed:
            log.debug("analyzed %s: their planner statistics were missing or stale", ", ".join(analyzed))

    async def _housekeeping(self, now: datetime) -> None:
        if self._next_housekeeping is not None and now < self._next_housekeeping:
            return
        self._next_housekeeping = now + timedelta(seconds=self.settings.housekeeping_interval)
        settings = self.settings
        try:
            await self._db(
                lambda: self.store.prune(
                    history_max_entries=settings.history_max_entries,
                    history_before=now - timedelta(days=settings.history_max_age_days),
                    finished_before=now - timedelta(days=settings.finished_job_retention_days),
                    occurrences_before=now - timedelta(days=1),
                )
            )
        except Exception:
            log.exception("history clean-up failed")


def _log_takeovers(claims: Sequence[Claim]) -> None:
    """Say when a claim took occurrences over: handed back by a dispatcher that stopped (each resumes where it got,
    a pending retry at its time), or left unfinished by one whose heartbeat ran out — then one that dispatcher had
    already sent, but not yet recorded, is sent again (at-least-once), so an operator seeing a second request can
    tell why."""
    handed_back = [claim for claim in claims if claim.resumed is not None and claim.resumed.handed_back]
    taken = [claim for claim in claims if claim.resumed is not None and not claim.resumed.handed_back]
    if handed_back:
        log.info(
            "resumed %d occurrence(s) handed back by a dispatcher that stopped, each where it got (an attempt it "
            "cut off after its --shutdown-grace is sent again): %s",
            len(handed_back),
            _listed(handed_back),
        )
    if taken:
        log.warning(
            "took over %d occurrence(s) left unfinished by a dispatcher whose heartbeat ran out; any it had "
            "already sent but not yet recorded is sent again: %s",
            len(taken),
            _listed(taken),
        )


def _listed(claims: Sequence[Claim]) -> str:
    """The first few claims' occurrences, as collection/job@expected time."""
    return ", ".join(
        f"{claim.collection_name}/{claim.job_name}@{claim.expected_time.isoformat()}" for claim in claims[:5]
    )
