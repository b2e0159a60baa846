"""The dispatcher in-process, on a clock the test sets (the ``Clock`` seam), a real store and a real HTTP
target: what fires, when it says it was due, and what history records — driven by moving the clock and waking
the dispatcher, not by waiting (its own poll is a minute away)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import select
from support.clocks import SetClock
from support.scratch_store import BACKENDS, T0, add_collection, add_job, scratch_database
from support.target_server import TargetServer

from scheduler_emulator.config import Settings
from scheduler_emulator.dispatcher.firing import Actions
from scheduler_emulator.dispatcher.loop import Dispatcher
from scheduler_emulator.metrics import Metrics
from scheduler_emulator.store.database import Database
from scheduler_emulator.store.models import JobHistoryRow, JobRow


@pytest.fixture(params=BACKENDS)
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Database]:
    with scratch_database(request.param, tmp_path) as scratch:
        yield scratch


def run(database: Database, clock: SetClock, moves: list[datetime], target: TargetServer, fires: int) -> None:
    """Start a dispatcher at the clock's time; for each instant in ``moves``, set the clock there and wake it;
    then wait (bounded) for ``fires`` requests at the target and stop, letting the occurrence finish."""
    settings = Settings(database_url=database.url, claim_ahead=0, poll_interval=60, shutdown_grace=10)

    async def scenario() -> None:
        actions = Actions(settings.outbound)
        dispatcher = Dispatcher(database, clock=clock, dispatch=settings.dispatch, actions=actions, metrics=Metrics())
        dispatcher.start()
        try:
            for moment in moves:
                clock.moment = moment
                dispatcher.wake()
            await asyncio.to_thread(target.wait_for, fires, 20)
        finally:
            await dispatcher.stop(grace=10)
            await actions.close()

    asyncio.run(scenario())


def history(database: Database, job_id: int) -> list[JobHistoryRow]:
    with database.session() as session:
        return list(
            session.scalars(select(JobHistoryRow).where(JobHistoryRow.job_id == job_id).order_by(JobHistoryRow.id))
        )


def job(database: Database, job_id: int) -> JobRow:
    with database.session() as session:
        return session.execute(select(JobRow).where(JobRow.id == job_id)).scalar_one()


def test_a_job_fires_when_the_clock_reaches_its_time(database: Database, target: TargetServer) -> None:
    due = T0 + timedelta(hours=5)
    job_id = add_job(database, add_collection(database), "later", due, uri=target.url("/later"))

    run(database, SetClock(T0), [due], target, fires=1)

    [request] = target.requests("/later")
    assert request.expected_time == due
    [entry] = history(database, job_id)
    assert (entry.status, entry.start_time, entry.expected_execution_time) == ("Completed", due, due)
    row = job(database, job_id)
    assert (row.state, row.execution_count, row.last_execution_time, row.finished_at) == ("Completed", 1, due, due)


class SteppingBackClock(SetClock):
    """A wall clock that steps back a little once the job's time is reached, as NTP or a VM's clock source can:
    the first reading at ``due`` says it is time, every later one reads ``step`` earlier."""

    def __init__(self, now: datetime, due: datetime, step: timedelta) -> None:
        super().__init__(now)
        self.due, self.step, self.reached = due, step, False

    def now(self) -> datetime:
        if self.moment >= self.due:
            if self.reached:
                return self.moment - self.step
            self.reached = True
        return self.moment


def test_a_clock_stepping_back_after_the_due_time_does_not_record_an_early_start(
    database: Database, target: TargetServer
) -> None:
    due = T0 + timedelta(minutes=5)
    job_id = add_job(database, add_collection(database), "stepped", due, uri=target.url("/stepped"))

    run(database, SteppingBackClock(T0, due, timedelta(microseconds=80)), [due], target, fires=1)

    [request] = target.requests("/stepped")
    assert request.expected_time == due
    [entry] = history(database, job_id)
    assert entry.start_time >= due, "the history says it started before its time"
    assert entry.end_time >= entry.start_time
    assert job(database, job_id).last_execution_time >= due, "lastExecutionTime before the job's time"


def test_instants_missed_while_stopped_run_once_and_are_reported(database: Database, target: TargetServer) -> None:
    recurrence = {"frequency": "Hour", "interval": 1}
    job_id = add_job(database, add_collection(database), "hourly", T0, uri=target.url("/hourly"), recurrence=recurrence)
    late = T0 + timedelta(hours=3, minutes=10)  # T0, +1h and +2h were missed; +3h is the latest

    run(database, SetClock(late), [], target, fires=1)

    [request] = target.requests("/hourly")
    assert request.expected_time == T0 + timedelta(hours=3)
    entries = history(database, job_id)
    assert [e.status for e in entries] == ["Postponed", "Completed"]
    assert "3 occurrence(s) from 2030-01-01T12:00:00Z to 2030-01-01T14:00:00Z were missed" in entries[0].message
    assert job(database, job_id).next_execution_time == T0 + timedelta(hours=4)
