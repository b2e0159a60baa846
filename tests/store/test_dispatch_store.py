"""The dispatcher's store port (store/dispatch_port.py: DispatchStore), driven directly: the same contract on
SQLite and on PostgreSQL. Time is passed in (and a fixed clock object for completions): no sleeps."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import delete, select, update
from support.clocks import SetClock
from support.held_write import HeldWrite
from support.scratch_store import BACKENDS, T0, add_collection, add_job, scratch_database

from scheduler_emulator.dispatcher.definitions import Claim, read_definition
from scheduler_emulator.domain.states import ActionName, AttemptStatus, JobState
from scheduler_emulator.schemas.job import JobProperties
from scheduler_emulator.store.database import Database
from scheduler_emulator.store.dispatch_port import DispatchStore
from scheduler_emulator.store.dispatch_records import AttemptRecord, Completion, NewOccurrence, Progress, Resumption
from scheduler_emulator.store.models import JobCollectionRow, JobHistoryRow, JobRow, OccurrenceRow

LEASE = timedelta(seconds=30)


@dataclass
class World:
    database: Database
    clock: SetClock

    def store(self, owner: str) -> DispatchStore[JobProperties]:
        store = DispatchStore(
            self.database,
            owner,
            read_definition=read_definition,
            clock=self.clock,
            wall=self.clock,
            history_max_entries=10,
        )
        store.heartbeat(self.clock.now(), self.clock.now() + LEASE)
        return store

    def collection(self, state: str = "Enabled") -> int:
        return add_collection(self.database, f"c{state}", state)

    def job(
        self, collection_id: int, name: str, due: datetime | None, every_minute: bool = False, **columns: Any
    ) -> int:
        recurrence = {"frequency": "Minute", "interval": 1} if every_minute else None
        return add_job(self.database, collection_id, name, due, recurrence=recurrence, **columns)

    def read(self, job_id: int) -> Any:
        with self.database.session() as session:
            return session.execute(select(JobRow).where(JobRow.id == job_id)).scalar_one_or_none()

    def history(self, job_id: int) -> list[Any]:
        with self.database.session() as session:
            return list(session.scalars(select(JobHistoryRow).where(JobHistoryRow.job_id == job_id)))

    def occurrence(self, occurrence_id: int) -> tuple[str | None, int, datetime | None]:
        """How far the occurrence got, as stored: (pending action, attempts made, retry due at)."""
        with self.database.session() as session:
            row = session.execute(
                select(OccurrenceRow.pending_action, OccurrenceRow.attempts_made, OccurrenceRow.retry_at).where(
                    OccurrenceRow.id == occurrence_id
                )
            ).one()
            return row.pending_action, row.attempts_made, row.retry_at

    def update(self, job_id: int, **values: Any) -> None:
        with self.database.session() as session:
            session.execute(update(JobRow).where(JobRow.id == job_id).values(**values))


@pytest.fixture(params=BACKENDS)
def world(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[World]:
    with scratch_database(request.param, tmp_path) as database:
        yield World(database, SetClock(T0))


def attempt_for(claim: Claim, moment: datetime, succeeded: bool = True) -> AttemptRecord:
    return AttemptRecord(
        job_id=claim.job_id,
        history_id=f"h{claim.occurrence_id}",
        start_time=moment,
        end_time=moment,
        expected_time=claim.expected_time,
        action_name=ActionName.MainAction,
        status=AttemptStatus.Completed if succeeded else AttemptStatus.Failed,
        message="ok" if succeeded else "failed",
        retry_count=0,
        repeat_count=claim.repeat_count,
        counts_as_execution=True,
        failed=not succeeded,
    )


def completion_for(claim: Claim, moment: datetime, succeeded: bool = True) -> Completion:
    return Completion(
        claim=claim,
        attempt=attempt_for(claim, moment, succeeded),
        count_fault=not succeeded,
        faulted=not succeeded,
        max_occurrences=None,
    )


def test_claim_due_takes_only_enabled_jobs_due_by_now(world: World) -> None:
    enabled, disabled = world.collection(), world.collection("Disabled")
    due = world.job(enabled, "due", T0 - timedelta(seconds=5))
    world.job(enabled, "later", T0 + timedelta(minutes=5))
    world.job(enabled, "off", T0 - timedelta(seconds=5), state="Disabled")
    world.job(disabled, "in-disabled-collection", T0 - timedelta(seconds=5))
    world.job(enabled, "done", None, state="Completed")

    claims = world.store("a").claim_due(T0, limit=10)

    assert [c.job_id for c in claims] == [due]
    claim = claims[0]
    assert claim.expected_time == T0 - timedelta(seconds=5)
    assert claim.repeat_count == 1 and not claim.manual and not claim.resumed
    assert world.read(due).lease_owner == "a"


def test_claim_ahead_takes_jobs_due_by_until(world: World) -> None:
    job = world.job(world.collection(), "soon", T0 + timedelta(seconds=2))
    store = world.store("a")
    assert store.claim_due(T0, limit=10) == []
    claims = store.claim_due(T0, limit=10, until=T0 + timedelta(seconds=3))
    assert [(c.job_id, c.expected_time) for c in claims] == [(job, T0 + timedelta(seconds=2))]


def test_a_claimed_occurrence_is_not_claimed_twice(world: World) -> None:
    world.job(world.collection(), "once", T0 - timedelta(seconds=1))
    first, second = world.store("a"), world.store("b")
    assert len(first.claim_due(T0, limit=10)) == 1
    assert first.claim_due(T0, limit=10) == []
    assert second.claim_due(T0 + timedelta(seconds=1), limit=10) == []  # "a" is alive: its lease holds


def test_an_expired_lease_lets_another_owner_take_the_occurrence_over(world: World) -> None:
    job = world.job(world.collection(), "taken-over", T0 - timedelta(seconds=1))
    (claim,) = world.store("a").claim_due(T0, limit=10)
    later = T0 + LEASE + timedelta(seconds=1)  # "a" sent no heartbeat since
    world.clock.moment = later
    taker = world.store("b")

    (resumed,) = taker.claim_due(later, limit=10)

    assert resumed.occurrence_id == claim.occurrence_id and resumed.resumed
    assert resumed.resumed == Resumption(progress=None, handed_back=False)  # nothing recorded; "a" did not stop
    assert resumed.expected_time == claim.expected_time
    assert world.read(job).lease_owner == "b"


def test_sign_off_abandons_leases_at_once(world: World) -> None:
    world.job(world.collection(), "signed-off", T0 - timedelta(seconds=1))
    first, second = world.store("a"), world.store("b")
    (claim,) = first.claim_due(T0, limit=10)
    first.sign_off()
    (resumed,) = second.claim_due(T0, limit=10)
    assert resumed.occurrence_id == claim.occurrence_id


def test_a_failed_attempt_keeps_how_far_its_occurrence_got_for_whoever_resumes_it(world: World) -> None:
    job = world.job(world.collection(), "retrying", T0 - timedelta(seconds=1))
    first, second = world.store("a"), world.store("b")
    (claim,) = first.claim_due(T0, limit=10)
    retry_at = T0 + timedelta(seconds=20)
    progress = Progress(action_name=ActionName.MainAction, attempts_made=1, retry_at=retry_at)
    failed = dataclasses.replace(attempt_for(claim, T0, succeeded=False), occurrence_id=claim.occurrence_id)
    assert first.write([dataclasses.replace(failed, progress=progress)]) == [True]
    first.sign_off()  # a graceful stop hands it back

    (resumed,) = second.claim_due(T0 + timedelta(seconds=1), limit=10)

    assert resumed.occurrence_id == claim.occurrence_id
    assert resumed.resumed == Resumption(progress=progress, handed_back=True)
    error_turn = Progress(action_name=ActionName.ErrorAction, attempts_made=0, retry_at=None)
    assert second.write([dataclasses.replace(failed, history_id="h2", progress=error_turn)]) == [True]
    assert world.occurrence(claim.occurrence_id) == ("ErrorAction", 0, None)
    assert second.write([dataclasses.replace(failed, history_id="h3", progress=progress)]) == [True]
    assert world.occurrence(claim.occurrence_id) == ("MainAction", 1, retry_at)
    second.complete([completion_for(resumed, T0 + timedelta(seconds=21), succeeded=False)])
    assert world.occurrence(claim.occurrence_id)[2] is None  # no retry pending once it ended
    assert [entry.retry_count for entry in world.history(job)] == [0, 0, 0, 0]


def test_one_batch_keeps_the_progress_of_several_occurrences(world: World) -> None:
    collection = world.collection()
    world.job(collection, "one", T0 - timedelta(seconds=1))
    world.job(collection, "two", T0 - timedelta(seconds=1))
    store = world.store("a")
    claims = store.claim_due(T0, limit=10)
    steps = [
        Progress(action_name=ActionName.MainAction, attempts_made=3, retry_at=T0 + timedelta(seconds=9)),
        Progress(action_name=ActionName.ErrorAction, attempts_made=0, retry_at=None),
    ]
    writes = [
        dataclasses.replace(attempt_for(claim, T0, succeeded=False), occurrence_id=claim.occurrence_id, progress=step)
        for claim, step in zip(claims, steps, strict=True)
    ]
    assert store.write(writes) == [True, True]  # one transaction, the progress of both in one statement
    assert [world.occurrence(claim.occurrence_id) for claim in claims] == [
        ("MainAction", 3, T0 + timedelta(seconds=9)),
        ("ErrorAction", 0, None),
    ]


def test_complete_records_history_counters_and_final_state(world: World) -> None:
    job = world.job(world.collection(), "one-time", T0 - timedelta(seconds=1))
    store = world.store("a")
    (claim,) = store.claim_due(T0, limit=10)
    world.clock.moment = T0 + timedelta(seconds=1)

    (finish,) = store.complete([completion_for(claim, T0)])

    assert finish is not None and finish.state == JobState.Completed and finish.next_time is None
    row = world.read(job)
    assert (row.state, row.execution_count, row.failure_count, row.lease_owner) == ("Completed", 1, 0, None)
    assert row.last_execution_time == T0 and row.finished_at == T0 + timedelta(seconds=1)
    [entry] = world.history(job)
    assert (entry.status, entry.action_name, entry.expected_execution_time) == (
        "Completed",
        "MainAction",
        claim.expected_time,
    )
    with world.database.session() as session:
        occurrence = session.execute(select(OccurrenceRow).where(OccurrenceRow.id == claim.occurrence_id)).scalar_one()
    assert occurrence.outcome == "Completed" and occurrence.finished_at == T0 + timedelta(seconds=1)


def test_a_failed_one_time_job_faults(world: World) -> None:
    job = world.job(world.collection(), "fails", T0 - timedelta(seconds=1))
    store = world.store("a")
    (claim,) = store.claim_due(T0, limit=10)
    (finish,) = store.complete([completion_for(claim, T0, succeeded=False)])
    assert finish is not None and finish.state == JobState.Faulted
    row = world.read(job)
    assert (row.state, row.execution_count, row.failure_count, row.faulted_count) == ("Faulted", 1, 1, 1)


def test_complete_moves_a_recurring_job_on_and_skips_what_came_due_meanwhile(world: World) -> None:
    job = world.job(world.collection(), "every-minute", T0, every_minute=True)
    store = world.store("a")
    (claim,) = store.claim_due(T0, limit=10)
    assert claim.next_time == T0 + timedelta(minutes=1)
    world.clock.moment = T0 + timedelta(minutes=2, seconds=30)  # the occurrence ran long

    (finish,) = store.complete([completion_for(claim, T0)])

    assert finish is not None and finish.state is None
    assert finish.next_time == T0 + timedelta(minutes=3)
    assert finish.postponed.count == 2 and finish.postponed.first == T0 + timedelta(minutes=1)
    row = world.read(job)
    assert (row.state, row.next_execution_time, row.lease_owner) == ("Enabled", T0 + timedelta(minutes=3), None)


def test_an_api_write_during_the_occurrence_stands(world: World) -> None:
    job = world.job(world.collection(), "patched", T0, every_minute=True)
    store = world.store("a")
    (claim,) = store.claim_due(T0, limit=10)
    world.update(job, version=2, next_execution_time=T0 + timedelta(hours=1))
    (finish,) = store.complete([completion_for(claim, T0)])
    assert finish is not None and not finish.schedule_moves
    row = world.read(job)
    assert (row.next_execution_time, row.execution_count, row.lease_owner) == (T0 + timedelta(hours=1), 1, None)


def test_complete_of_a_deleted_job_is_none(world: World) -> None:
    job = world.job(world.collection(), "deleted", T0)
    store = world.store("a")
    (claim,) = store.claim_due(T0, limit=10)
    with world.database.session() as session:
        session.execute(delete(OccurrenceRow).where(OccurrenceRow.job_id == job))
        session.execute(delete(JobRow).where(JobRow.id == job))
    assert store.complete([completion_for(claim, T0)]) == [None]
    assert store.record_attempt(attempt_for(claim, T0)) is False


def test_record_attempt_adds_history_and_moves_counters(world: World) -> None:
    job = world.job(world.collection(), "retried", T0)
    store = world.store("a")
    (claim,) = store.claim_due(T0, limit=10)
    assert store.record_attempt(attempt_for(claim, T0, succeeded=False)) is True
    row = world.read(job)
    assert (row.execution_count, row.failure_count, row.lease_owner) == (1, 1, "a")
    assert [h.status for h in world.history(job)] == ["Failed"]


def test_abandon_hands_the_occurrence_back_as_never_claimed(world: World) -> None:
    job = world.job(world.collection(), "handed-back", T0 + timedelta(seconds=2))
    store = world.store("a")
    (claim,) = store.claim_due(T0, limit=10, until=T0 + timedelta(seconds=3))

    store.abandon([claim])

    row = world.read(job)
    assert (row.next_execution_time, row.repeat_count, row.lease_owner) == (T0 + timedelta(seconds=2), 0, None)
    (again,) = world.store("b").claim_due(T0 + timedelta(seconds=2), limit=10)
    assert again.expected_time == claim.expected_time and again.repeat_count == 1


def test_abandoning_a_manual_run_makes_it_a_run_request_again(world: World) -> None:
    job = world.job(world.collection(), "run-now", None, run_requested_at=T0)
    store = world.store("a")
    (claim,) = store.claim_due(T0, limit=10)
    assert claim.manual and world.read(job).run_requested_at is None
    store.abandon([claim])
    assert world.read(job).run_requested_at == T0


def test_job_status_sees_changes_and_deletion(world: World) -> None:
    job = world.job(world.collection(), "status", T0)
    store = world.store("a")
    status = store.job_status(job)
    assert status is not None and (status.version, status.state, status.collection_state) == (
        1,
        JobState.Enabled,
        JobState.Enabled,
    )
    world.update(job, state="Disabled")
    status = store.job_status(job)
    assert status is not None and status.state == JobState.Disabled
    assert store.job_status(job + 1000) is None


def test_next_wake_time(world: World) -> None:
    collection = world.collection()
    store = world.store("a")
    assert store.next_wake_time(T0) is None
    world.job(collection, "later", T0 + timedelta(minutes=5))
    world.job(collection, "off", T0 + timedelta(minutes=1), state="Disabled")
    assert store.next_wake_time(T0) == T0 + timedelta(minutes=5)
    assert store.next_wake_time(T0, ahead=timedelta(seconds=10)) == T0 + timedelta(minutes=4, seconds=50)
    world.job(collection, "run-now", None, run_requested_at=T0 + timedelta(seconds=3))
    assert store.next_wake_time(T0) == T0 + timedelta(seconds=3)


def test_next_wake_time_includes_another_owners_heartbeat_running_out(world: World) -> None:
    world.store("other")  # alive until T0 + LEASE
    assert world.store("a").next_wake_time(T0) == T0 + LEASE


def test_prune_drops_old_history_and_long_finished_jobs(world: World) -> None:
    collection = world.collection()
    old = world.job(collection, "old", None, state="Completed", finished_at=T0 - timedelta(days=10))
    recent = world.job(collection, "recent", None, state="Completed", finished_at=T0 - timedelta(hours=1))
    busy = world.job(collection, "busy", T0 + timedelta(days=1))
    with world.database.session() as session:
        for job_id, count in ((old, 1), (recent, 1), (busy, 5)):
            for i in range(count):
                moment = T0 - timedelta(days=40 if i == 0 and job_id == busy else 0, minutes=count - i)
                session.add(
                    JobHistoryRow(
                        job_id=job_id,
                        history_id=f"h{job_id}-{i}",
                        start_time=moment,
                        end_time=moment,
                        action_name="MainAction",
                        status="Completed",
                    )
                )

    world.store("a").prune(
        history_max_entries=3,
        history_before=T0 - timedelta(days=30),
        finished_before=T0 - timedelta(days=1),
        occurrences_before=T0 - timedelta(days=1),
    )

    assert world.read(old) is None and world.read(recent) is not None
    assert world.history(old) == [] and len(world.history(recent)) == 1
    assert sorted(h.history_id for h in world.history(busy)) == [f"h{busy}-{i}" for i in (2, 3, 4)]


def test_a_stored_definition_that_no_longer_validates_is_set_aside_and_others_still_claimed(world: World) -> None:
    """A row an earlier version stored and today's rules refuse (here a URI whose port cannot exist) must not
    stop the claim of every other due job: it is set aside (no next time, no lease), the others are claimed."""
    collection = world.collection()
    bad = world.job(collection, "old-bad", T0)
    good = world.job(collection, "good", T0)
    with world.database.session() as session:
        row = session.execute(select(JobRow).where(JobRow.id == bad)).scalar_one()
        row.definition = {
            **row.definition,
            "action": {"type": "Http", "request": {"uri": "http://h:99999/", "method": "GET"}},
        }
    store = world.store("a")
    claims = store.claim_due(T0, 10)
    assert [c.job_id for c in claims] == [good]
    stored = world.read(bad)
    assert stored.next_execution_time is None and stored.lease_owner is None
    assert store.claim_due(T0 + timedelta(minutes=1), 10) == []  # not claimed again and again


def test_claims_carry_their_own_collections_properties(world: World) -> None:
    first, second = world.collection(), add_collection(world.database, "quota'd")
    quota = {"maxJobCount": 7, "maxRecurrence": {"frequency": "Hour", "interval": 1}, "note": 'a "quoted" é'}
    with world.database.session() as session:
        session.execute(
            update(JobCollectionRow)
            .where(JobCollectionRow.id == second)
            .values(properties={"state": "Enabled", "quota": quota})
        )
    jobs = [
        world.job(collection, f"j{index}", T0 - timedelta(seconds=index))
        for index, collection in enumerate([first, second, first, second])
    ]

    claims = {claim.job_id: claim for claim in world.store("a").claim_due(T0, limit=10)}

    assert sorted(claims) == sorted(jobs)
    assert [claims[job].collection_properties for job in jobs] == [
        {"state": "Enabled"},
        {"state": "Enabled", "quota": quota},
        {"state": "Enabled"},
        {"state": "Enabled", "quota": quota},
    ]


def test_insert_occurrences_returns_the_new_ones_and_skips_those_already_recorded(world: World) -> None:
    collection = world.collection()
    jobs = [world.job(collection, f"j{index}", T0) for index in range(3)]
    moments = [T0 + timedelta(seconds=index, microseconds=index * 7 + 1) for index in range(200)]
    # 600: more than one statement's rows
    first = [NewOccurrence(job, moment, 1) for job in jobs for moment in moments]
    batches = world.store("a").batches

    with world.database.session() as session:
        inserted = batches.insert_occurrences(session, first, "a", T0)
    with world.database.session() as session:
        again = [
            *first[::60],
            NewOccurrence(jobs[0], T0 - timedelta(minutes=1), 1),
            NewOccurrence(jobs[2], T0 - timedelta(minutes=2), 1),
        ]
        added = batches.insert_occurrences(session, again, "b", T0)

    assert sorted(inserted) == sorted((job, moment) for job, moment, _ in first)
    assert len(set(inserted.values())) == 600
    assert sorted(added) == [(jobs[0], T0 - timedelta(minutes=1)), (jobs[2], T0 - timedelta(minutes=2))]
    with world.database.session() as session:
        stored = session.execute(select(OccurrenceRow.id, OccurrenceRow.job_id, OccurrenceRow.expected_time)).all()
    assert {(job, expected): row_id for row_id, job, expected in stored} == inserted | added


def test_the_read_only_queries_answer_while_a_write_transaction_is_held(world: World) -> None:
    """``job_status``, ``next_wake_time`` and ``next_due_time`` only read: on SQLite they take no turn on the
    process's write lock (Database.read_session), so a fire's last check and the loop's sleep do not wait for
    an API write or a claim to commit, and they see what was committed, not the held write."""
    store = world.store("reader")
    collection = world.collection()
    due = T0 + timedelta(minutes=5)
    job = world.job(collection, "j", due)
    answers: list[Any] = []
    reader = threading.Thread(
        target=lambda: answers.extend([store.job_status(job), store.next_wake_time(T0), store.next_due_time()]),
        daemon=True,
    )
    with HeldWrite(world.database, update(JobRow).where(JobRow.id == job).values(next_execution_time=T0, version=99)):
        reader.start()
        reader.join(30)
        if world.database.dialect == "sqlite":
            assert answers, "the read-only queries waited for the held write transaction"
    reader.join(30)
    status, wake, next_due = answers
    assert status is not None and status.version != 99, "an uncommitted write was read"
    assert wake == due and next_due == due
