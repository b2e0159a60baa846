"""Prometheus metrics of one process (docs/reference/test-support.md#metrics), in a registry of its own so that apps
never share state. The dispatcher role's process that ``serve`` supervises (dispatcher/child.py) keeps its values in
prometheus_client's multiprocess files, which its parent reads into its own ``GET /metrics`` (``dispatcher_part``)."""

from __future__ import annotations

import contextlib
import glob
import os
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.multiprocess import MultiProcessCollector

LAG_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)


class _Part:
    """The families of ``registry`` whose being a dispatcher's is ``dispatcher`` (a collector, for
    generate_latest)."""

    def __init__(self, registry: CollectorRegistry | _WrittenFiles, dispatcher: bool) -> None:
        self.registry = registry
        self.dispatcher = dispatcher

    def collect(self) -> Iterator[Metric]:
        for family in self.registry.collect():
            if (family.name in Metrics.DISPATCHER_FAMILIES) == self.dispatcher:
                yield family


class Metrics:
    """Everything ``GET /metrics`` reports."""

    # The dispatcher's metrics: reported from the process that runs it (dispatcher/host.py's ``metrics``).
    DISPATCHER_FAMILIES = frozenset(
        {
            "scheduler_occurrences_fired",
            "scheduler_attempts",
            "scheduler_firing_lag_seconds",
            "scheduler_occurrences_in_flight",
            "scheduler_dispatcher_cycles",
            "scheduler_dispatcher_write_batches",
        }
    )

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.occurrences = Counter(
            "scheduler_occurrences_fired",
            "Occurrences the dispatcher started (scheduled or run on request).",
            registry=self.registry,
        )
        self.attempts = Counter(
            "scheduler_attempts",
            "Action attempts by action type, main or error action, and outcome.",
            ["action_type", "action", "outcome"],
            registry=self.registry,
        )
        self.lag = Histogram(
            "scheduler_firing_lag_seconds",
            "Delay between an occurrence's expected time and its first attempt.",
            buckets=LAG_BUCKETS,
            registry=self.registry,
        )
        self.in_flight = Gauge(
            "scheduler_occurrences_in_flight",
            "Occurrences executing or waiting to retry in this process.",
            registry=self.registry,
            multiprocess_mode="livesum",  # the dispatcher role's process's, while it lives (dispatcher_part)
        )
        self.backlog = Gauge(
            "scheduler_due_backlog",
            "Jobs due now but not yet claimed by a dispatcher (measured at scrape time).",
            registry=self.registry,
        )
        self.cycles = Counter(
            "scheduler_dispatcher_cycles",
            "Times the dispatcher looked for due work: woken by a change, by its timer or by its poll interval.",
            registry=self.registry,
        )
        self.write_batches = Counter(
            "scheduler_dispatcher_write_batches",
            "Transactions in which the dispatcher recorded attempts and completed occurrences (each holds a batch).",
            registry=self.registry,
        )
        self.requests = Counter(
            "scheduler_api_requests",
            "API requests by route template, method and status code.",
            ["route", "method", "status"],
            registry=self.registry,
        )
        self.request_seconds = Histogram(
            "scheduler_api_request_duration_seconds",
            "API request durations by route template.",
            ["route"],
            registry=self.registry,
        )

    def render(self, dispatcher: bool | None = None) -> bytes:
        """Prometheus text: every family; or only the dispatcher's (True) or only the others (False)."""
        if dispatcher is None:
            return generate_latest(self.registry)
        return generate_latest(_Part(self.registry, dispatcher))


class _WrittenFiles:
    """The metrics files the processes started with ``PROMETHEUS_MULTIPROC_DIR=directory`` have written (a
    collector, for generate_latest). A file another process is still creating has no header yet (fewer than 8
    bytes): it is left out until it has one, rather than failing the read (MultiProcessCollector.collect reads
    every ``*.db`` file of the directory)."""

    def __init__(self, directory: str) -> None:
        self.directory = directory

    def collect(self) -> list[Metric]:
        files = []
        for path in glob.glob(os.path.join(self.directory, "*.db")):
            with contextlib.suppress(OSError):  # an ended process's file, removed meanwhile
                if os.path.getsize(path) >= 8:
                    files.append(path)
        return MultiProcessCollector.merge(files, accumulate=True)  # type: ignore[no-untyped-call,no-any-return]


def cycles_counted(directory: str) -> float:
    """How many times the dispatchers started with ``PROMETHEUS_MULTIPROC_DIR=directory`` looked for due work
    (``scheduler_dispatcher_cycles_total``): above 0 once the first has registered and claimed."""
    families = _WrittenFiles(directory).collect()
    return sum(
        sample.value
        for family in families
        if family.name == "scheduler_dispatcher_cycles"
        for sample in family.samples
        if sample.name == "scheduler_dispatcher_cycles_total"
    )


def dispatcher_part(directory: str) -> bytes:
    """Prometheus text of the dispatcher's families (Metrics.DISPATCHER_FAMILIES) that the processes started with
    ``PROMETHEUS_MULTIPROC_DIR=directory`` recorded: counters summed over every such process that ran, gauges
    over those alive (prometheus_client.multiprocess.mark_process_dead forgets an ended one's)."""
    return generate_latest(_Part(_WrittenFiles(directory), dispatcher=True))
