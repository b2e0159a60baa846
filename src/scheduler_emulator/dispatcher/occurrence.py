"""Running one claimed occurrence: the main action's attempts with its retry policy, the error action when they
all fail, the Postponed entries for instants skipped, and the occurrence's completion — each written through
the store port's batched writes."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from scheduler_emulator.config_groups import DispatchSettings
from scheduler_emulator.dispatcher.actions import FireContext
from scheduler_emulator.dispatcher.definitions import Claim
from scheduler_emulator.dispatcher.firing import TIMER_RESOLUTION, ActionSender
from scheduler_emulator.dispatcher.recorder import BatchRecorder, patiently
from scheduler_emulator.domain.clock import Clock, isoformat_z
from scheduler_emulator.domain.due import Skipped
from scheduler_emulator.domain.history import history_id
from scheduler_emulator.domain.job_rules import RetryPlan, RetrySpec, effective_retry
from scheduler_emulator.domain.occurrences import Finish
from scheduler_emulator.domain.plans import Limits
from scheduler_emulator.domain.states import ActionName, AttemptStatus
from scheduler_emulator.metrics import Metrics
from scheduler_emulator.schemas.job import ActionBase, RetryPolicy
from scheduler_emulator.schemas.job_collection import stored_limits
from scheduler_emulator.store.dispatch_records import AttemptRecord, Completion, Progress

log = logging.getLogger("scheduler_emulator.dispatcher")

LIMITS_CACHE = 1000  # distinct (plan, quota) pairs kept; a process rarely sees more than a few
# How far an occurrence got once its main action faulted with an error action to follow: its first attempt, at once.
ERROR_ACTION_NEXT = Progress(action_name=ActionName.ErrorAction, attempts_made=0, retry_at=None)


class Released(Exception):
    """An occurrence given up by a stopping dispatcher (its lease is handed back for another to resume), or
    found taken over by another dispatcher (this one was frozen past its lease)."""


class OccurrenceRunner:
    """Runs claimed occurrences to their end (see :meth:`run`); ``stopping`` set means: start no new retry."""

    def __init__(
        self,
        *,
        recorder: BatchRecorder,
        clock: Clock,
        dispatch: DispatchSettings,
        actions: ActionSender,
        metrics: Metrics,
        stopping: asyncio.Event,
        on_attempt: Callable[[bool], None] | None = None,
        still_held: Callable[[Claim], Awaitable[bool]] | None = None,
    ) -> None:
        """``still_held(claim)``: whether the occurrence is still this dispatcher's, asked before each retry (a
        process frozen while it waited may have lost it to another dispatcher: it then stops, as Released)."""
        self.recorder = recorder
        self.clock = clock
        self.settings = dispatch
        self.actions = actions
        self.metrics = metrics
        self.stopping = stopping
        self.on_attempt = on_attempt
        self.still_held = still_held
        self._limits: dict[tuple[str, str], Limits] = {}
        self._attempt_counters: dict[tuple[str, str, str], Any] = {}

    async def run(self, claim: Claim, not_before: float | None = None) -> Finish | None:
        """Fire the occurrence: the main action, retried by its policy; if it fails for good, the error action
        (retried by its own policy, else the main one's); then complete it. Returns how its job moved on (None:
        the job was deleted meanwhile). Raises Released when the dispatcher stops before a retry. ``not_before``
        (wall-clock seconds since the epoch): the first attempt is held until then (FireContext.not_before)."""
        limits = self._limits_of(claim)
        execution_tag = os.urandom(16).hex()
        if claim.skipped.count:
            await self._postponed(claim, claim.skipped, downtime=True)
        action = claim.properties.action
        resume = claim.resumed.progress if claim.resumed is not None else None  # None: from the first attempt
        # Resumed in the error action's turn: the main action faulted before, and its fault was counted then.
        error_turn = resume is not None and resume.action_name == ActionName.ErrorAction
        faulted, last, count_fault = True, None, False
        if not error_turn:
            plan = effective_retry(_retry_spec(action.retry_policy), limits)
            succeeded, last = await self._attempts(
                claim, action, plan, ActionName.MainAction, execution_tag, not_before=not_before, resume=resume
            )
            faulted, resume = not succeeded, None  # the error action, if it runs, from its first attempt
            if faulted and action.error_action is not None and last is not None:
                # The main action's last attempt, the fault count and the error action's turn (kept with the
                # occurrence) share one transaction.
                await self._write(dataclasses.replace(last, add_fault=True, progress=ERROR_ACTION_NEXT))
                error_turn = True
            else:
                count_fault = faulted
        if error_turn and action.error_action is not None:
            error_policy = action.error_action.retry_policy or action.retry_policy
            error_plan = effective_retry(_retry_spec(error_policy), limits)
            _, last = await self._attempts(
                claim, action.error_action, error_plan, ActionName.ErrorAction, execution_tag, resume=resume
            )
        completion = Completion(
            claim=claim,
            attempt=last,
            count_fault=count_fault,
            faulted=faulted,
            max_occurrences=limits.max_job_occurrence,
        )
        # The last attempt's record, the fault count and the occurrence's end share one transaction, and
        # the batch's completions share a handful of statements.
        finish: Finish | None = await self._write(completion)
        if finish is not None and finish.postponed.count:
            await self._postponed(claim, finish.postponed, downtime=False)
        return finish

    async def _write(self, item: AttemptRecord | Completion) -> Any:
        return await patiently(lambda: self.recorder.submit(item), self.stopping)

    def _limits_of(self, claim: Claim) -> Limits:
        quota = claim.collection_properties.get("quota")  # the only part that matters, usually absent
        key = (claim.sku, json.dumps(quota, sort_keys=True) if quota else "")
        limits = self._limits.get(key)
        if limits is None:
            floor = timedelta(seconds=self.settings.min_retry_interval)
            limits = self._limits[key] = stored_limits(claim.sku, claim.collection_properties, floor)
            if len(self._limits) > LIMITS_CACHE:
                self._limits.clear()
        return limits

    async def _attempts(
        self,
        claim: Claim,
        action: ActionBase,
        plan: RetryPlan,
        action_name: ActionName,
        execution_tag: str,
        *,
        not_before: float | None = None,
        resume: Progress | None = None,
    ) -> tuple[bool, AttemptRecord | None]:
        """The first attempt (held until ``not_before``, if given) and up to ``plan.retries`` retries, stopping
        at the first success; ``resume``: how far an earlier run got, the attempts it made are not made again and
        the next waits for its time. Every attempt but the last is recorded here, with how far the occurrence got
        (kept with it); the last is returned unrecorded, for the caller to record with what follows (None when
        the job was deleted meanwhile)."""
        # A policy changed meanwhile to fewer retries still ends with an attempt (recorded with the occurrence's end).
        first = 0 if resume is None else min(resume.attempts_made, plan.retries)
        due = None if resume is None else resume.retry_at  # when the next attempt is due; None: at once
        for retry in range(first, plan.retries + 1):
            if due is not None:
                await self._wait_until(due)
                if self.still_held is not None and not await self.still_held(claim):
                    raise Released  # taken over meanwhile: the other dispatcher runs it from here
            context = FireContext(
                execution_tag=execution_tag,
                client_request_id=_request_id(),
                expected_time=claim.expected_time,
                job_name=claim.job_name,
                collection_name=claim.collection_name,
                region=claim.region,
                not_before=None if retry else not_before,
            )
            handed = self.clock.now()
            outcome = await self.actions.execute(action, context)
            # When it went out: as the actions report it when they held it, else when it was handed to them.
            # Never before its time: the wait ended at or after it by this clock, but a host's wall clock can
            # step back a little (NTP, a VM's clock source) between that reading and this one.
            sent = handed if outcome.started is None else datetime.fromtimestamp(outcome.started, UTC)
            started = max(sent, claim.expected_time)
            lateness = (started - claim.expected_time).total_seconds()
            if retry == 0 and action_name == ActionName.MainAction:
                self.metrics.lag.observe(max(0.0, lateness))
            ended = max(self.clock.now(), started)
            result = "succeeded" if outcome.succeeded else "failed"
            counter = self._attempt_counters.get((action.type, action_name, result))
            if counter is None:
                counter = self._attempt_counters[(action.type, action_name, result)] = self.metrics.attempts.labels(
                    action.type, action_name.value, result
                )
            counter.inc()
            if self.on_attempt is not None:
                self.on_attempt(outcome.succeeded)
            if log.isEnabledFor(logging.INFO):
                log.info(
                    "job %s/%s %s attempt %d %s",
                    claim.collection_name,
                    claim.job_name,
                    action_name.value,
                    retry,
                    result,
                    extra={
                        "fields": {
                            "collection": claim.collection_name,
                            "job": claim.job_name,
                            "action_type": action.type,
                            "action": action_name.value,
                            "retry": retry,
                            "repeat": claim.repeat_count,
                            "outcome": result,
                            "lateness_ms": round(lateness * 1000, 1),
                            "duration_ms": round((ended - started).total_seconds() * 1000, 1),
                        }
                    },
                )
            retries_left = not outcome.succeeded and retry < plan.retries
            due = ended + plan.interval if retries_left else None
            attempt = AttemptRecord(
                job_id=claim.job_id,
                history_id=history_id(ended),
                start_time=started,
                end_time=ended,
                expected_time=claim.expected_time,
                action_name=action_name,
                status=AttemptStatus.Completed if outcome.succeeded else AttemptStatus.Failed,
                message=outcome.message,
                retry_count=retry,
                repeat_count=claim.repeat_count,
                counts_as_execution=action_name == ActionName.MainAction,
                failed=not outcome.succeeded,
                occurrence_id=claim.occurrence_id,
                # Kept with the occurrence in this entry's transaction: a stop or a crash from here resumes there.
                progress=Progress(action_name=action_name, attempts_made=retry + 1, retry_at=due) if due else None,
            )
            if not retries_left:
                return outcome.succeeded, attempt
            if not await self._write(attempt):
                return True, None  # the job was deleted meanwhile: nothing more to do
        return False, None

    async def _wait_until(self, moment: datetime) -> None:
        """Sleep until this clock reads ``moment`` (virtual: until an advance reaches it); a stopping dispatcher
        does not start new retries (Released)."""
        for _ in range(100):  # the loop's timers count whole milliseconds: one may go off a little early
            rest = (moment - self.clock.now()).total_seconds()
            if rest <= 0 or self.stopping.is_set():
                break
            await self.clock.sleep(max(rest, TIMER_RESOLUTION), self.stopping)
        if self.stopping.is_set():
            raise Released

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
        await self._write(
            AttemptRecord(
                job_id=claim.job_id,
                history_id=history_id(now),
                start_time=now,
                end_time=now,
                expected_time=skipped.first,
                action_name=ActionName.MainAction,
                status=AttemptStatus.Postponed,
                message=message,
                retry_count=0,
                repeat_count=claim.repeat_count,
            )
        )


def _request_id() -> str:
    """A random (version 4) UUID string, as uuid.uuid4() gives, at a fraction of its cost."""
    h = os.urandom(16).hex()
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{'89ab'[int(h[16], 16) & 3]}{h[17:20]}-{h[20:]}"


def _retry_spec(policy: RetryPolicy | None) -> RetrySpec | None:
    if policy is None:
        return None
    return RetrySpec("", policy.retry_type, policy.retry_count, policy.retry_interval)
