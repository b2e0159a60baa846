"""The dispatcher's store port: everything the dispatcher asks of the database, in one class whose methods
state their contracts (after APScheduler 4's ``abc.DataStore``). What the database can do is decided once, when
the store is built (its batch writer, store/dispatch_batches.py); the SQL itself lives there and in
store/dispatching.py, each statement defined once. A job's definition is parsed by the reader the dispatcher
gives the store (the store knows no wire model).

Terms used by the contracts:

- *due*: a job is due when it is Enabled, its collection is Enabled and its next execution time is at or
  before the given instant; a POST .../run makes a job due at once (a *manual* occurrence), whatever its state.
- *occurrence*: one run of a job at one expected time, recorded under a unique (job, expected time) key, so
  it cannot be recorded — nor fired — twice, by this process or another.
- *lease*: a claimed job carries its owner's name. An owner holds its leases for as long as it is alive, i.e.
  as long as its heartbeat is not older than its lease length; one heartbeat renews all its leases. A lease
  whose owner is no longer alive (or signed off) is *abandoned*: the next claim takes its occurrence over, and
  resumes it where it got (its *progress*, kept with each failed attempt that has more to come: the action whose
  attempt is next, its attempts so far, when the pending retry is due).
- *complete*: an occurrence's last attempt is in history, the job's counters moved, the occurrence closed, the
  job's schedule and state moved on (unless an API write changed the job meanwhile) and the lease released —
  in one transaction.

Every method is synchronous and opens its own transaction: the dispatcher runs them in a worker thread.
"""

from __future__ import annotations

import json
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Generic

from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session

from scheduler_emulator.domain import recurrence as rec
from scheduler_emulator.domain.clock import Clock, WallClock
from scheduler_emulator.domain.due import Skipped, due_occurrence
from scheduler_emulator.domain.occurrences import Finish, finish_occurrence, is_series_instant
from scheduler_emulator.domain.states import ActionName, JobState, OccurrenceOutcome
from scheduler_emulator.faults import pause_point
from scheduler_emulator.store import dispatching as sql
from scheduler_emulator.store.database import Database
from scheduler_emulator.store.dispatch_batches import batches_for
from scheduler_emulator.store.dispatch_records import (
    Abandon,
    AttemptRecord,
    Claim,
    Completion,
    D,
    DefinitionReader,
    JobFinish,
    JobMove,
    JobStatus,
    NewOccurrence,
    OccurrenceEnd,
    OccurrenceStep,
    Progress,
    Resumption,
    Write,
)
from scheduler_emulator.store.wakeups import PostgresWakeups, SqliteWakeups, Wakeups

__all__ = ["DispatchStore", "Finish"]

log = logging.getLogger("scheduler_emulator.dispatcher")

# A claim decides each due job in Python, in a worker thread, while the dispatcher's event loop fires on the same
# interpreter lock (the role's process: dispatcher/role.py). A thread running Python keeps that lock until another
# has waited for it a whole switch interval (5 ms), and the loop needs it back at each of its timers: fires due
# while a claim of 200 jobs ran woke 5-20 ms late. Every GIVE_WAY_EVERY jobs the claim sleeps GIVE_WAY_SECONDS,
# which hands the lock to a thread waiting for it (bench/README.md#claim-batches).
GIVE_WAY_EVERY = 8
GIVE_WAY_SECONDS = 0.0001


class DispatchStore(Generic[D]):
    """One dispatcher's view of the database, as ``owner``: the name its leases and heartbeat carry; job
    definitions parsed by ``read_definition`` (what its claims carry as ``properties``)."""

    def __init__(
        self,
        database: Database,
        owner: str,
        *,
        read_definition: DefinitionReader[D],
        clock: Clock | None = None,
        wall: Clock | None = None,
        history_max_entries: int = 1000,
        definitions_cache: int = 20_000,
    ) -> None:
        self.database = database
        self.owner = owner
        self.clock = clock or WallClock()  # scheduling time (virtual under --clock virtual)
        self.wall = wall or WallClock()  # real time: heartbeats and leases, which a virtual clock must not expire
        self.history_max_entries = history_max_entries
        self._definitions = _Definitions(read_definition, definitions_cache)
        self.batches = batches_for(database.dialect)  # the database's batch statements and capabilities, once

    # -- claiming -------------------------------------------------------------------------------------

    def claim_due(
        self, now: datetime, limit: int, until: datetime | None = None, *, take_over: bool = True
    ) -> list[Claim[D]]:
        """Lease up to ``limit`` jobs and record the occurrence each will run, earliest first, in one
        transaction committed before this returns (the caller fires after; no lock is held across network I/O).
        Claimed, in this order: occurrences abandoned by a dispatcher that is no longer alive (resumed where
        they got: ``Claim.resumed``), run
        requests (manual), and jobs due by ``until`` (default ``now``; later than ``now`` claims ahead — the
        caller waits for each claim's ``expected_time``). A job due for several instants since it last ran
        claims only the latest; the others are in ``Claim.skipped``. An occurrence already recorded (by another
        dispatcher) is not claimed again. ``take_over`` False: nothing is taken over (see Dispatcher._may_take_over)."""
        until = until or now
        with self.database.session() as session:
            rows = sql.due_jobs(
                session,
                now,
                limit,
                owner=self.owner,
                skip_locked=self.batches.locks_rows,
                until=until,
                alive_at=self.wall.now(),
                take_over=take_over,
            )
            if rows:
                pause_point("claim-locked")  # fault tests: frozen while holding the rows' locks
            decisions = self._decide_all(session, rows, now, until)
            inserted = self.batches.insert_occurrences(
                session,
                [NewOccurrence(d.row.id, d.expected, d.repeat) for d in decisions if d.occurrence_id is None],
                self.owner,
                now,
            )
            ids = [
                d.occurrence_id if d.occurrence_id is not None else inserted.get((d.row.id, d.expected))
                for d in decisions
            ]
            self.batches.move_jobs(
                session,
                [  # positional (job, next time, repeat count, run request, lease): a µs less per claim than keywords
                    JobMove(
                        d.row.id,
                        d.next_time,
                        d.repeat if not d.resumed else d.row.repeat_count,
                        d.run_requested_at,
                        self.owner if occurrence_id is not None else None,
                    )
                    for d, occurrence_id in zip(decisions, ids, strict=True)
                ],
            )
            collections: dict[str, dict[str, Any]] = {}  # properties by their JSON text: decoded once each
            return [
                d.claim(occurrence_id, _decoded(collections, d.row.collection_properties))
                for d, occurrence_id in zip(decisions, ids, strict=True)
                if occurrence_id is not None  # else: already recorded (fired) by another dispatcher
            ]

    def _decide_all(self, session: Session, rows: list[Any], now: datetime, until: datetime) -> list[_Decision[D]]:
        """What the claim does to each due job (see _decide), for those that have something to run."""
        decisions: list[_Decision[D]] = []
        set_aside: list[JobMove] = []
        for index, row in enumerate(rows, 1):
            if index % GIVE_WAY_EVERY == 0:
                time.sleep(GIVE_WAY_SECONDS)
            try:
                decision = self._decide(session, row, now, until)
            except ValueError as exc:  # pydantic's ValidationError included
                # A definition stored by an earlier version that today's stricter rules refuse (a Service
                # Bus namespace under 6 characters, a tab in a header...): it must not stop every other
                # job's claim. It is set aside (no next time, lease released) until a PUT replaces it.
                log.error(
                    "job %s is not fired: its stored definition no longer passes validation (%s); "
                    "replace it with a PUT to schedule it again",
                    row.name,
                    str(exc).replace("\n", " ")[:300],
                )
                set_aside.append(JobMove(row.id, None, row.repeat_count, None, None))
                continue
            if decision is not None:
                decisions.append(decision)
        self.batches.move_jobs(session, set_aside)
        return decisions

    def _decide(self, session: Session, row: Any, now: datetime, until: datetime) -> _Decision[D] | None:
        """Which occurrence the job runs now, and where its schedule moves; None when it has nothing to run."""
        properties, timing = self._definitions.get(row.id, row.version, row.definition)
        if row.lease_owner is not None:  # its dispatcher's heartbeat stopped: take over what it left running
            occurrence = sql.take_over_occurrence(session, row.id, self.owner, now)
            if occurrence is None:
                self.batches.move_jobs(
                    session, [JobMove(row.id, row.next_execution_time, row.repeat_count, row.run_requested_at, None)]
                )
                return None
            progress = None
            if occurrence.pending_action is not None:
                progress = Progress(
                    action_name=ActionName(occurrence.pending_action),
                    attempts_made=occurrence.attempts_made,
                    retry_at=occurrence.retry_at,
                )
            # A scheduled occurrence is an instant of the series (next_execution_time has moved past it
            # already); a POST .../run is not.
            return _Decision(
                row=row,
                properties=properties,
                timing=timing,
                expected=occurrence.expected_time,
                repeat=occurrence.repeat_count,
                skipped=Skipped(),
                manual=not is_series_instant(timing, row.series_origin, occurrence.expected_time),
                next_time=row.next_execution_time,
                run_requested_at=row.run_requested_at,
                occurrence_id=occurrence.id,
                resumed=Resumption(progress=progress, handed_back=bool(occurrence.handed_back)),
            )
        if (
            row.next_execution_time is not None
            and row.next_execution_time <= until
            and row.state == JobState.Enabled
            and row.collection_state == JobState.Enabled
        ):
            moment = max(now, row.next_execution_time)  # claimed ahead: the occurrence due then
            due = due_occurrence(timing, row.series_origin, row.next_execution_time, moment)
            return _Decision(
                row=row,
                properties=properties,
                timing=timing,
                expected=due.expected,
                repeat=row.repeat_count + 1,
                skipped=due.skipped,
                manual=False,
                next_time=due.following,
                run_requested_at=row.run_requested_at,
            )
        if row.run_requested_at is not None:
            return _Decision(
                row=row,
                properties=properties,
                timing=timing,
                expected=row.run_requested_at,
                repeat=row.repeat_count + 1,
                skipped=Skipped(),
                manual=True,
                next_time=row.next_execution_time,
                run_requested_at=None,
            )
        return None

    def job_status(self, job_id: int) -> JobStatus | None:
        """The job's definition version and states (its own, its collection's); None when it is gone. An
        occurrence claimed ahead fires only if its job is still the one claimed. Like the two queries below,
        it only reads: on SQLite it does so off the write lock (Database.read_session), so a fire about to start
        does not wait for an API write or another claim to commit."""
        with self.database.read_session() as session:
            row = sql.still_current(session, job_id)
        if row is None:
            return None
        return JobStatus(
            version=row.version, state=JobState(row.state), collection_state=JobState(row.collection_state)
        )

    # -- recording ------------------------------------------------------------------------------------

    def write(self, writes: Sequence[Write]) -> list[bool | Finish | None]:
        """Apply ``writes`` in one transaction and return each one's result, in order: for an AttemptRecord,
        whether its job still exists (a deleted job's attempt is not recorded); for a Completion, what
        :meth:`complete` returns; for an Abandon, None. Attempts and abandons apply in the order given,
        then the completions together."""
        results: list[bool | Finish | None] = [None] * len(writes)
        completions: list[int] = []
        steps: list[OccurrenceStep] = []  # how far the attempts' occurrences got: one statement for the batch
        with self.database.session() as session:
            for index, item in enumerate(writes):
                if isinstance(item, AttemptRecord):
                    recorded = results[index] = self._record_attempt(session, item)
                    if recorded and item.progress is not None and item.occurrence_id is not None:
                        progress = item.progress
                        steps.append(
                            OccurrenceStep(
                                item.occurrence_id, progress.action_name, progress.attempts_made, progress.retry_at
                            )
                        )
                elif isinstance(item, Abandon):
                    self._abandon(session, item.claims)
                else:
                    completions.append(index)
            self.batches.keep_progress(session, steps)
            if completions:
                finished = self._complete(session, [writes[i] for i in completions])  # type: ignore[misc]
                for index, finish in zip(completions, finished, strict=True):
                    results[index] = finish
        return results

    def record_attempt(self, attempt: AttemptRecord) -> bool:
        """Add one history entry and move its job's counters (see AttemptRecord); False when the job was
        deleted (nothing is recorded then)."""
        return bool(self.write([attempt])[0])

    def complete(self, completions: Sequence[Completion]) -> list[Finish | None]:
        """Complete occurrences (see the module's docstring): each one's last attempt recorded, occurrence
        closed as Completed or Faulted, instants that came due meanwhile skipped, the job moved to Completed or
        Faulted when its series is over, its lease released. The job's schedule is computed from the claim —
        unless an API write changed the job meanwhile, then that write stands. None for a job deleted
        meanwhile. A handful of statements for the whole batch."""
        with self.database.session() as session:
            return self._complete(session, completions)

    def abandon(self, claims: Sequence[Claim[Any]]) -> None:
        """Hand back occurrences claimed that will not run, as if they had never been claimed: the occurrence
        record goes, the lease is released and, when the definition is unchanged, the job is due at that
        instant again (a manual occurrence becomes a run request again)."""
        self.write([Abandon(claims=tuple(claims))])

    def _record_attempt(self, session: Session, attempt: AttemptRecord) -> bool:
        if not sql.count_attempt(session, attempt):
            return False
        self.batches.add_history(session, [attempt])
        return True

    def _abandon(self, session: Session, claims: Sequence[Claim[Any]]) -> None:
        if not claims:
            return
        # Only what is still this owner's: an occurrence another dispatcher took over (this one was frozen past
        # its lease) is that one's to finish, and its job's schedule is not moved back.
        held = sql.held_occurrences(
            session, self.owner, [c.occurrence_id for c in claims], lock=self.batches.locks_rows
        )
        claims = [c for c in claims if c.occurrence_id in held]
        if not claims:
            return
        sql.delete_occurrences(session, [c.occurrence_id for c in claims])
        jobs = self.batches.jobs_to_restore(session, [c.job_id for c in claims])
        restores = []
        for claim in claims:
            job = jobs.get(claim.job_id)
            if job is None:
                continue
            restore = JobMove(
                job_id=claim.job_id,
                next_time=job.next_execution_time,
                repeat_count=job.repeat_count,
                run_requested_at=job.run_requested_at,
                owner=None if job.lease_owner == self.owner else job.lease_owner,
            )
            if claim.manual:  # a run request again
                restore = restore._replace(run_requested_at=job.run_requested_at or claim.expected_time)
            elif job.version == claim.version and not claim.resumed:  # due at that instant again
                restore = restore._replace(next_time=claim.expected_time, repeat_count=claim.repeat_count - 1)
            restores.append(restore)
        self.batches.move_jobs(session, restores)

    def _complete(self, session: Session, completions: Sequence[Completion]) -> list[Finish | None]:
        now = self.clock.now()
        jobs = self.batches.jobs_to_finish(session, [c.claim.job_id for c in completions])
        self.batches.add_history(
            session, [c.attempt for c in completions if c.attempt is not None and c.claim.job_id in jobs]
        )
        self.batches.close_occurrences(
            session,
            [
                OccurrenceEnd(
                    c.claim.occurrence_id, OccurrenceOutcome.Faulted if c.faulted else OccurrenceOutcome.Completed, now
                )
                for c in completions
            ],
        )
        results: list[Finish | None] = []
        finishes: list[JobFinish] = []
        for completion in completions:
            claim = completion.claim
            job = jobs.get(claim.job_id)
            if job is None:
                results.append(None)
                continue
            finish = finish_occurrence(
                timing=claim.timing,
                origin=claim.origin,
                next_time=claim.next_time,
                now=now,
                repeat_count=claim.repeat_count,
                max_occurrences=completion.max_occurrences,
                manual=claim.manual,
                faulted=completion.faulted,
                still_current=job.version == claim.version and job.state == JobState.Enabled,
            )
            attempt = completion.attempt if completion.attempt and completion.attempt.counts_as_execution else None
            finishes.append(
                JobFinish(
                    job_id=claim.job_id,
                    owner=None if job.lease_owner == self.owner else job.lease_owner,
                    executions=int(attempt is not None),
                    failures=int(attempt is not None and attempt.failed),
                    faults=int(completion.count_fault),
                    last_execution_time=attempt.start_time if attempt is not None else None,
                    next_time=finish.next_time,
                    state=finish.state or job.state,
                    finished_at=now if finish.state is not None else None,
                    schedule_moves=finish.schedule_moves,
                )
            )
            results.append(finish)
            if claim.executions + 1 >= self.history_max_entries // 2:  # only long-lived jobs can outgrow it
                sql.prune_job_history(session, claim.job_id, self.history_max_entries)
        self.batches.finish_jobs(session, finishes)
        return results

    # -- liveness -------------------------------------------------------------------------------------

    def heartbeat(self, now: datetime, until: datetime) -> None:
        """Register this owner as alive until ``until`` (first call) or extend it: one single-row write that
        renews every lease the owner holds, whatever their number."""
        with self.database.session() as session:
            sql.heartbeat(session, self.owner, now, until)

    def confirm_held(self, occurrence_ids: Sequence[int], now: datetime, until: datetime) -> set[int]:
        """After this owner may have missed heartbeats (its process was frozen, or cut off from the database):
        register it as alive until ``until`` again and return which of ``occurrence_ids`` it still runs, in one
        transaction. The others were taken over by another dispatcher meanwhile (or finished by it): this one
        must not fire them, nor write anything for them."""
        with self.database.session() as session:
            sql.heartbeat(session, self.owner, now, until)
            return sql.held_occurrences(session, self.owner, occurrence_ids, lock=self.batches.locks_rows)

    def sign_off(self) -> None:
        """Forget this owner: the leases it still holds are abandoned at once (another dispatcher, or this
        one's next start, takes their occurrences over)."""
        with self.database.session() as session:
            sql.sign_off(session, self.owner)

    # -- sleeping and waking --------------------------------------------------------------------------

    def next_wake_time(self, now: datetime, ahead: timedelta = timedelta(0)) -> datetime | None:
        """The earliest instant at which a claim could find something: a job's next execution time less
        ``ahead``, a pending run request, or another owner's heartbeat running out. None: nothing scheduled."""
        with self.database.read_session() as session:
            return sql.next_wake_time(session, self.owner, now, ahead)

    def next_due_time(self) -> datetime | None:
        """The earliest scheduled time or run request of a job no dispatcher holds (leases ignored): where a
        virtual clock steps next. None: nothing scheduled."""
        with self.database.read_session() as session:
            return sql.next_due_time(session)

    def wakeups(self, on_wake: Callable[[datetime | None], None], *, watch_file: bool) -> Wakeups | None:
        """A watcher calling ``on_wake`` whenever another process announces a change: PostgreSQL's LISTEN; on a
        SQLite file, when ``watch_file`` (no API in this process wakes the dispatcher directly), a watch of the
        file (store.wakeups.SqliteWakeups); None otherwise."""
        if not self.batches.listens:
            if watch_file and self.database.dialect == "sqlite" and self.database.on_disk:
                return SqliteWakeups(str(make_url(self.database.url).database), on_wake)
            return None
        bounds = self.database.bounds
        parameters: dict[str, Any] = {}
        if bounds is not None:  # a listener cut off by a partition is noticed, and replaced, as fast as the rest
            given = make_url(self.database.url).query.get("options")  # the operator's (in the URL) win
            options = f"{bounds.server_options()} {given}" if isinstance(given, str) and given else None
            parameters = {**bounds.client_parameters(), "options": options or bounds.server_options()}
        return PostgresWakeups(self.database.url, on_wake, parameters)

    # -- housekeeping ---------------------------------------------------------------------------------

    def prune(
        self,
        *,
        history_max_entries: int,
        history_before: datetime,
        finished_before: datetime,
        occurrences_before: datetime,
    ) -> None:
        """Retention: history past the newest ``history_max_entries`` of each job or older than
        ``history_before`` goes; Completed and Faulted jobs that finished before ``finished_before`` go with
        their history; finished occurrence records claimed before ``occurrences_before`` go, and so do owners
        whose heartbeat ran out before then and who hold no lease."""
        with self.database.session() as session:
            sql.prune_history(session, history_max_entries, history_before)
            sql.prune_finished(session, finished_before, occurrences_before, self.wall.now() - timedelta(days=1))

    def refresh_statistics(self) -> list[str]:
        """PostgreSQL: ANALYZE the tables the claims and writes read whose planner statistics are missing or
        stale (dispatching.stale_statistics); the tables analyzed. Elsewhere nothing (SQLite plans its few
        queries well from its indexes alone)."""
        if self.database.dialect != "postgresql":
            return []
        with self.database.session() as session:
            stale = sql.stale_statistics(session)
        for table_name in stale:  # each in its own transaction: its locks are not held while the next one runs
            with self.database.session() as session:
                sql.analyze(session, table_name)
        return stale


def _decoded(cache: dict[str, dict[str, Any]], text: str) -> dict[str, Any]:
    """``text`` decoded as JSON, once per distinct text (``cache``: those decoded so far)."""
    value = cache.get(text)
    if value is None:
        value = cache[text] = json.loads(text)
    return value


@dataclass(slots=True, kw_only=True)  # not frozen: private to this module, and frozen costs µs per claim
class _Decision(Generic[D]):
    """What a claim does to one due job (see DispatchStore._decide)."""

    row: Any  # the job row joined with its collection (dispatching.due_jobs)
    properties: D
    timing: rec.Timing
    expected: datetime
    repeat: int
    skipped: Skipped
    manual: bool
    next_time: datetime | None
    run_requested_at: datetime | None
    occurrence_id: int | None = None  # set for a resumed occurrence; new ones get theirs on insert
    resumed: Resumption | None = None

    def claim(self, occurrence_id: int, collection_properties: dict[str, Any]) -> Claim[D]:
        """The claim of this decision's occurrence, recorded as ``occurrence_id``."""
        row = self.row
        return Claim(
            job_id=row.id,
            occurrence_id=occurrence_id,
            version=row.version,
            expected_time=self.expected,
            repeat_count=self.repeat,
            skipped=self.skipped,
            properties=self.properties,
            timing=self.timing,
            job_name=row.name,
            collection_name=row.collection_name,
            region=row.location,
            sku=row.sku,
            collection_properties=collection_properties,
            manual=self.manual,
            resumed=self.resumed,
            executions=row.execution_count,
            next_time=self.next_time,
            origin=row.series_origin,
        )


class _Definitions(Generic[D]):
    """Job definitions parsed by ``read``, and their schedules, by (job id, version): a recurring job's definition
    is parsed once, not at every fire; a one-time job's is parsed and not kept (it fires once). The stored
    definition is compared too: a job deleted and another created with the same id
    (SQLite reuses the highest) and version must not fire the old one's definition."""

    def __init__(self, read: DefinitionReader[D], size: int) -> None:
        self.read = read
        self.size = size
        self._parsed: OrderedDict[tuple[int, int], tuple[dict[str, Any], D, rec.Timing]] = OrderedDict()

    def get(self, job_id: int, version: int, definition: dict[str, Any]) -> tuple[D, rec.Timing]:
        key = (job_id, version)
        parsed = self._parsed.get(key)
        if parsed is None or parsed[0] != definition:
            properties = self.read(definition)
            timing = properties.timing()
            if timing.recurrence is None:
                return properties, timing  # a one-time job fires once: keeping it would only hold memory
            parsed = self._parsed[key] = (definition, properties, timing)
            if len(self._parsed) > self.size:
                self._parsed.popitem(last=False)
        return parsed[1], parsed[2]
