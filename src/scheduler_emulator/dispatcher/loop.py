"""The due-job loop: claim → fire (with retries and the error action) → record → release."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, TypeVar

from sqlalchemy.exc import OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.orm import Session

from scheduler_emulator.config import Settings
from scheduler_emulator.dispatcher.actions import FireContext
from scheduler_emulator.dispatcher.claims import (
    Claim,
    Completion,
    Definitions,
    Finish,
    abandon_occurrences,
    claim_due_jobs,
    complete_occurrences,
)
from scheduler_emulator.dispatcher.firing import Actions
from scheduler_emulator.dispatcher.recorder import BatchRecorder
from scheduler_emulator.dispatcher.wakeups import PostgresWakeups
from scheduler_emulator.domain.clock import Clock, isoformat_z
from scheduler_emulator.domain.due import Skipped
from scheduler_emulator.domain.history import history_id
from scheduler_emulator.domain.job_rules import RetryPlan, RetrySpec, effective_retry
from scheduler_emulator.domain.plans import Limits
from scheduler_emulator.metrics import Metrics
from scheduler_emulator.schemas.job import ActionBase, RetryPolicy
from scheduler_emulator.schemas.job_collection import stored_limits
from scheduler_emulator.store import dispatching as store
from scheduler_emulator.store.database import Database

log = logging.getLogger("scheduler_emulator.dispatcher")
T = TypeVar("T")

CLAIM_BATCH = 200
OUTAGE_PATIENCE = 300.0  # seconds an occurrence waits for the database to come back before giving up


class Dispatcher:
    """Fires every due occurrence once. Start with :meth:`start`, stop with :meth:`stop`; call
    :meth:`wake` after any change that may make a job due earlier."""

    def __init__(
        self, database: Database, clock: Clock, settings: Settings, actions: Actions, metrics: Metrics
    ) -> None:
        self.database = database
        self.metrics = metrics
        self.recorder = BatchRecorder(database)
        self.definitions = Definitions()
        self._complete = self._complete_batch  # one object, so a batch's completions group together
        self._limits: dict[tuple[str, str], Limits] = {}
        self._attempt_counters: dict[tuple[str, str, str], Any] = {}
        self._stopping = False
        self._stopped = asyncio.Event()
        self._sleeping_until: datetime | None = None  # when the loop next looks for due work by itself
        self._wakeups: PostgresWakeups | None = None
        self.clock = clock
        self.settings = settings
        self.actions = actions
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"[:64]
        self.lease = timedelta(seconds=settings.lease_seconds)
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._renewal: asyncio.Task[None] | None = None
        self._running: set[asyncio.Task[None]] = set()
        # Occurrences claimed ahead (``--claim-ahead``) and waiting for their time; an API write in the
        # meantime (``changed``) makes them re-check their job before they fire.
        self.ahead = timedelta(seconds=settings.claim_ahead)
        self._waiting: dict[int, tuple[asyncio.Task[None], Claim]] = {}  # by occurrence id
        self._generation = 0
        self._next_housekeeping: datetime | None = None

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name="dispatcher")
        if self.database.dialect == "postgresql":
            self._wakeups = PostgresWakeups(self.database.url, self.wake)
            self._wakeups.start()

    async def stop(self, grace: float = 0.0) -> None:
        """Stop claiming; let attempts in flight finish for up to ``grace`` seconds (no new retries start),
        then abandon the rest and hand their leases back at once, so the next start (or another
        dispatcher) resumes those occurrences."""
        self._stopping = True
        self._stopped.set()  # interrupts retry waits
        if self._wakeups is not None:
            await self._wakeups.stop()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        not_started, self._waiting = list(self._waiting.values()), {}  # no claim is made after this point
        for task, _ in not_started:
            task.cancel()
        waiting = [claim for _, claim in not_started]
        if waiting:  # not started: hand them back as never claimed, so a restart does not run them twice
            with contextlib.suppress(Exception):
                await self._db(lambda s: abandon_occurrences(s, waiting, self.owner))
        if self._running:
            _, pending = await asyncio.wait(list(self._running), timeout=grace)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.gather(*pending, return_exceptions=True)
                log.info("released %d occurrence(s) still in flight at shutdown", len(pending))
        if self._renewal is not None:
            self._renewal.cancel()
        with contextlib.suppress(Exception):
            await self._db(lambda s: store.sign_off(s, self.owner))

    def wake(self) -> None:
        """Something changed (an API write, here or in another process): look for due work now, and make
        occurrences claimed ahead re-check their job before they fire."""
        self._generation += 1
        self._wake.set()

    @property
    def in_flight(self) -> int:
        return len(self._running) - len(self._waiting)

    # -- the loop ---------------------------------------------------------------------------------

    async def _db(self, work: Callable[[Session], T]) -> T:
        def run() -> T:
            with self.database.session() as session:
                return work(session)

        return await asyncio.to_thread(run)

    async def _db_patiently(self, work: Callable[[Session], T]) -> T:
        """Run ``work`` in a batched transaction (see recorder.py), patiently (see ``_patiently``)."""
        return await self._patiently(lambda: self.recorder.submit(work))

    async def _patiently(self, write: Callable[[], Awaitable[T]]) -> T:
        """Perform ``write``, riding out a database outage (restart, failover) for up to
        ``OUTAGE_PATIENCE``: what an attempt did must be recorded, not lost."""
        pause, waited = 0.25, 0.0
        while True:
            try:
                return await write()
            except (OperationalError, PoolTimeout):
                if waited >= OUTAGE_PATIENCE or self._stopping:
                    raise
                log.warning("database unavailable while recording; retrying in %.1f s", pause)
                await asyncio.sleep(pause)
                waited += pause
                pause = min(pause * 2, 5.0)

    async def _loop(self) -> None:
        poll = timedelta(seconds=self.settings.poll_interval)
        half_ahead = self.ahead / 2  # wake when the earliest job is this close: each cycle claims ~half a window
        skip_locked = self.database.dialect == "postgresql"
        # Registered (alive) before the first claim, so no other dispatcher takes our leases for abandoned.
        for attempt in range(1_000_000):
            try:
                await self._beat()
                break
            except Exception as exc:  # noqa: BLE001 - the database may not be up yet
                log.warning("registering the dispatcher failed (%s); retrying", str(exc).splitlines()[0])
                await asyncio.sleep(min(5.0, 0.5 * (attempt + 1)))
        self._renewal = asyncio.create_task(self._heartbeat(), name="heartbeat")
        while True:
            try:
                self._wake.clear()
                self._sleeping_until = None  # awake: any change may matter
                now = self.clock.now()
                generation = self._generation

                def claim_batch(session: Session, now: datetime = now) -> list[Claim]:
                    return claim_due_jobs(
                        session, self.owner, now, CLAIM_BATCH, skip_locked, self.definitions, now + self.ahead
                    )

                claims = await self._db(claim_batch)
                soon = self.clock.now()
                for claim in claims:
                    task = asyncio.create_task(self._run_occurrence(claim, generation))
                    self._running.add(task)
                    task.add_done_callback(self._running.discard)
                    if claim.expected_time > soon:
                        self._waiting[claim.occurrence_id] = (task, claim)
                if len(claims) >= CLAIM_BATCH:
                    continue
                await self._housekeeping(now)
                wake_at = await self._db(lambda s: store.next_wake_time(s, self.owner, self.clock.now(), half_ahead))
                delay = poll.total_seconds()
                if wake_at is not None:
                    delay = min(delay, max(0.0, (wake_at - self.clock.now()).total_seconds()))
                self._sleeping_until = self.clock.now() + timedelta(seconds=delay)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("dispatcher cycle failed; retrying")
                delay = min(poll.total_seconds(), 1.0)
            if delay > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), timeout=delay)

    # -- one occurrence ---------------------------------------------------------------------------

    async def _run_occurrence(self, claim: Claim, generation: int) -> None:
        delay = (claim.expected_time - self.clock.now()).total_seconds()
        if delay > 0:  # claimed ahead: wait for its time (listed in _waiting by the loop)
            for _ in range(100):  # the loop's timers run on the monotonic clock, which drifts from UTC a little
                await asyncio.sleep(delay)
                delay = (claim.expected_time - self.clock.now()).total_seconds()
                if delay <= 0:
                    break
            if self._stopping:
                return  # stop() hands it back
        waited = self._waiting.pop(claim.occurrence_id, None) is not None
        if waited and generation != self._generation and not await self._still_current(claim):
            return  # its job changed while it waited
        self.metrics.occurrences.inc()
        self.metrics.in_flight.inc()
        try:
            await self._fire(claim)
        except (asyncio.CancelledError, _Released):
            pass  # stopping: the lease is handed back by stop()
        except Exception:
            log.exception("occurrence of job %s/%s failed unexpectedly", claim.collection_name, claim.job_name)
        finally:
            self.metrics.in_flight.dec()

    async def _still_current(self, claim: Claim) -> bool:
        """Whether an occurrence claimed ahead should still fire: an API write since the claim may have
        replaced, disabled or deleted its job (or disabled its collection). If not, it is given back."""
        try:
            row = await self._db(lambda s: store.still_current(s, claim.job_id))
        except Exception:  # noqa: BLE001 - cannot tell: fire as claimed, as if the change came just after
            log.warning("could not re-check job %s/%s before firing", claim.collection_name, claim.job_name)
            return True
        enabled = row is not None and row.state == "Enabled" and row.collection_state == "Enabled"
        if row is not None and row.version == claim.version and (claim.manual or enabled):
            return True
        await self._db_patiently(lambda s: abandon_occurrences(s, [claim], self.owner))
        self._wake.set()  # its job may be due again (a new definition, a re-enabled collection)
        return False

    async def _beat(self) -> None:
        now = self.clock.now()
        await self._db(lambda s: store.heartbeat(s, self.owner, now, now + self.lease))

    async def _heartbeat(self) -> None:
        """Keep this process registered as alive; that keeps every lease it holds, whatever their number,
        with one single-row UPDATE a third of a lease apart."""
        interval = self.lease.total_seconds() / 3
        while True:
            await asyncio.sleep(interval)
            try:
                await self._beat()
            except Exception as exc:  # noqa: BLE001 - the next beat tries again
                log.warning("dispatcher heartbeat failed: %s", str(exc).splitlines()[0])

    def _limits_of(self, claim: Claim) -> Limits:
        quota = claim.collection_properties.get("quota")  # the only part that matters, usually absent
        key = (claim.sku, json.dumps(quota, sort_keys=True) if quota else "")
        limits = self._limits.get(key)
        if limits is None:
            floor = timedelta(seconds=self.settings.min_retry_interval)
            limits = self._limits[key] = stored_limits(claim.sku, claim.collection_properties, floor)
            if len(self._limits) > 1000:
                self._limits.clear()
        return limits

    async def _fire(self, claim: Claim) -> None:
        limits = self._limits_of(claim)
        execution_tag = os.urandom(16).hex()
        if claim.skipped.count:
            await self._postponed(claim, claim.skipped, downtime=True)
        action = claim.properties.action
        plan = effective_retry(_retry_spec(action.retry_policy), limits)
        succeeded, last = await self._attempts(claim, action, plan, "MainAction", execution_tag)
        faulted = not succeeded
        if faulted and action.error_action is not None and last is not None:
            main_last = last

            def record_main(session: Session) -> None:
                main_last.record(session)
                store.add_faulted(session, claim.job_id)

            await self._db_patiently(record_main)
            error_policy = action.error_action.retry_policy or action.retry_policy
            error_plan = effective_retry(_retry_spec(error_policy), limits)
            _, last = await self._attempts(claim, action.error_action, error_plan, "ErrorAction", execution_tag)
            count_fault = False
        else:
            count_fault = faulted
        completion = Completion(
            claim=claim,
            attempt=last.entry if last is not None else None,
            counts_as_execution=last.counts_as_execution if last is not None else False,
            failed=last.failed if last is not None else False,
            count_fault=count_fault,
            faulted=faulted,
            max_occurrences=limits.max_job_occurrence,
        )
        # The last attempt's record, the fault count and the occurrence's end share one transaction, and
        # the batch's completions share a handful of executemany statements.
        finish = await self._patiently(lambda: self.recorder.submit_grouped(self._complete, completion))
        if finish is not None and finish.postponed.count:
            await self._postponed(claim, finish.postponed, downtime=False)
        if (
            finish is not None
            and finish.next_time is not None
            and (self._sleeping_until is None or finish.next_time - self.ahead / 2 < self._sleeping_until)
        ):
            self._wake.set()  # the job is due again before the loop planned to look

    def _complete_batch(self, session: Session, completions: Sequence[Completion]) -> list[Finish | None]:
        return complete_occurrences(
            session, completions, self.owner, self.clock.now(), self.settings.history_max_entries
        )

    async def _attempts(
        self, claim: Claim, action: ActionBase, plan: RetryPlan, action_name: str, execution_tag: str
    ) -> tuple[bool, _Attempt | None]:
        """The first attempt and up to ``plan.retries`` retries, stopping at the first success. Every
        attempt but the last is recorded here; the last is returned unrecorded, for the caller to record
        with what follows (None when the job was deleted meanwhile)."""
        for retry in range(plan.retries + 1):
            if retry:
                await self._wait_to_retry(plan.interval.total_seconds())
            context = FireContext(
                execution_tag=execution_tag,
                client_request_id=_request_id(),
                expected_time=claim.expected_time,
                job_name=claim.job_name,
                collection_name=claim.collection_name,
                region=claim.region,
            )
            started = self.clock.now()
            lateness = (started - claim.expected_time).total_seconds()
            if retry == 0 and action_name == "MainAction":
                self.metrics.lag.observe(max(0.0, lateness))
            outcome = await self.actions.execute(action, context)
            ended = self.clock.now()
            result = "succeeded" if outcome.succeeded else "failed"
            counter = self._attempt_counters.get((action.type, action_name, result))
            if counter is None:
                counter = self._attempt_counters[(action.type, action_name, result)] = self.metrics.attempts.labels(
                    action.type, action_name, result
                )
            counter.inc()
            if log.isEnabledFor(logging.INFO):
                log.info(
                    "job %s/%s %s attempt %d %s",
                    claim.collection_name,
                    claim.job_name,
                    action_name,
                    retry,
                    result,
                    extra={
                        "fields": {
                            "collection": claim.collection_name,
                            "job": claim.job_name,
                            "action_type": action.type,
                            "action": action_name,
                            "retry": retry,
                            "repeat": claim.repeat_count,
                            "outcome": result,
                            "lateness_ms": round(lateness * 1000, 1),
                            "duration_ms": round((ended - started).total_seconds() * 1000, 1),
                        }
                    },
                )
            attempt = _Attempt(
                claim.job_id,
                action_name == "MainAction",
                not outcome.succeeded,
                {
                    "history_id": history_id(ended),
                    "start_time": started,
                    "end_time": ended,
                    "expected_execution_time": claim.expected_time,
                    "action_name": action_name,
                    "status": result.replace("succeeded", "Completed").replace("failed", "Failed"),
                    "message": outcome.message,
                    "retry_count": retry,
                    "repeat_count": claim.repeat_count,
                },
            )
            if outcome.succeeded or retry == plan.retries:
                return outcome.succeeded, attempt
            if not await self._db_patiently(attempt.record):
                return True, None  # the job was deleted meanwhile: nothing more to do
        return False, None

    async def _wait_to_retry(self, seconds: float) -> None:
        """Sleep until the retry is due; a stopping dispatcher does not start new retries."""
        if not self._stopping:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopped.wait(), timeout=seconds)
        if self._stopping:
            raise _Released

    async def _postponed(self, claim: Claim, skipped: Skipped, downtime: bool) -> None:
        now = self.clock.now()
        count = f"more than {skipped.count}" if skipped.more else str(skipped.count)
        span = f"from {isoformat_z(skipped.first)}" if skipped.first else ""
        if skipped.last and skipped.last != skipped.first:
            span += f" to {isoformat_z(skipped.last)}"
        if downtime:
            message = (
                f"{count} occurrence(s) {span} were missed while the scheduler was not running; "
                f"only the latest, due at {isoformat_z(claim.expected_time)}, runs (late)."
            )
        else:
            message = (
                f"{count} occurrence(s) {span} came due while the previous occurrence was still executing "
                "or waiting to retry, and were skipped."
            )
        entry = {
            "history_id": history_id(now),
            "start_time": now,
            "end_time": now,
            "expected_execution_time": skipped.first,
            "action_name": "MainAction",
            "status": "Postponed",
            "message": message,
            "retry_count": 0,
            "repeat_count": claim.repeat_count,
        }
        await self._db_patiently(lambda s: store.record_attempt(s, claim.job_id, entry, False, False))

    # -- retention --------------------------------------------------------------------------------

    async def _housekeeping(self, now: datetime) -> None:
        if self._next_housekeeping is not None and now < self._next_housekeeping:
            return
        self._next_housekeeping = now + timedelta(seconds=self.settings.housekeeping_interval)
        settings = self.settings

        def work(session: Session) -> None:
            store.prune_history(
                session, settings.history_max_entries, now - timedelta(days=settings.history_max_age_days)
            )
            store.prune_finished(
                session, now - timedelta(days=settings.finished_job_retention_days), now - timedelta(days=1)
            )

        try:
            await self._db(work)
        except Exception:
            log.exception("history clean-up failed")


@dataclass(frozen=True)
class _Attempt:
    """One attempt's history entry (JobHistoryRow's columns) and how it moves the counters."""

    job_id: int
    counts_as_execution: bool
    failed: bool
    entry: dict[str, Any]

    def record(self, session: Session) -> bool:
        return store.record_attempt(session, self.job_id, self.entry, self.counts_as_execution, self.failed)


def _request_id() -> str:
    """A random (version 4) UUID string, as uuid.uuid4() gives, at a fraction of its cost."""
    h = os.urandom(16).hex()
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{'89ab'[int(h[16], 16) & 3]}{h[17:20]}-{h[20:]}"


class _Released(Exception):
    """An occurrence given up by a stopping dispatcher (its lease is handed back for another to resume)."""


def _retry_spec(policy: RetryPolicy | None) -> RetrySpec | None:
    if policy is None:
        return None
    return RetrySpec("", policy.retry_type, policy.retry_count, policy.retry_interval)
