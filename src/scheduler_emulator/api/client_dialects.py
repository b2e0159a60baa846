"""Which duration format each generation of clients writes and can read, told apart by its ``User-Agent``
(or forced for every client with ``--duration-format``), and the two places that apply it: durations a
client sends are read as it meant them before anything validates them, and durations in a response are
written so that it can read them.

**Decision**: the stored text is always readable the standard way (``parse_duration`` without a day
factor), so it is the value and the text in one: the text as sent, except a TimeSpan with days from a
client that counts days in thirtieths, stored as the standard TimeSpan of the length it meant (2.0.0's
``60.00:00:00`` for 2 days is stored as ``2.00:00:00``). The store, the plan rules and the dispatcher read
one meaning without knowing who wrote it (no column or migration), and a client that is answered as sent
(curl, the JS SDK) sees the length the writer meant, in the format the writer used.

**Decision**: a client of the thirtieths generation that sends a days part that is not a multiple of 30
(its SDK never does; only hand-written text can) gets d/30 days exactly (``45.00:00:00`` = 1.5 days), the
inverse of what its SDK writes, rather than its reader's truncating ``int(d / 30)``.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from fastapi import Request

from scheduler_emulator.domain.durations import format_iso, format_timespan, is_timespan_with_days, parse_duration
from scheduler_emulator.schemas.job import duration_fields

# azure-mgmt-scheduler 1.1.3 and 2.0.0 (patch.py) write a day as 30 TimeSpan days and read them back so.
SDK_TIMESPAN_DAY_FACTOR = 30


class Style(StrEnum):
    """How durations are written into one response."""

    ECHO = "echo"  # the stored text: as the client sent it
    ISO = "iso"  # the shortest ISO-8601, as isodate writes it (PT30S, P2D, P1DT2H3M4S)
    SDK_TIMESPAN = "sdk-timespan"  # TimeSpan with two-digit hours, days ×30, whole seconds (00:00:30, 60.00:00:00)


@dataclass(frozen=True, kw_only=True)
class Dialect:
    """What one generation of clients needs."""

    name: str
    one_job: Style  # responses carrying one job: GET, PUT, PATCH
    job_list: Style  # pages of a job list
    timespan_day_factor: int = 1  # TimeSpan days per real day in what these clients send


ECHO = Dialect(name="echo", one_job=Style.ECHO, job_list=Style.ECHO)
ISO = Dialect(name="iso", one_job=Style.ISO, job_list=Style.ISO)
TIMESPAN = Dialect(
    name="timespan", one_job=Style.SDK_TIMESPAN, job_list=Style.ISO, timespan_day_factor=SDK_TIMESPAN_DAY_FACTOR
)
FORCED = {"echo": ECHO, "iso": ISO, "timespan": TIMESPAN}  # --duration-format values other than auto


def _token(pattern: str) -> re.Pattern[str]:
    """A product token of a User-Agent (space-separated; any case)."""
    return re.compile(rf"(?:^|\s){pattern}(?:\s|$)", re.IGNORECASE)


# User-Agent → dialect, first match wins. Every client that matches no row gets ECHO: raw HTTP, curl, ARM
# templates, and the JS SDK azure-arm-scheduler 1.2.0-preview (ms-rest 2.5.6 tags its User-Agent after the
# request has left, so it sends none; its moment.duration reads ISO-8601 and TimeSpan alike).
CLIENTS: tuple[tuple[re.Pattern[str], Dialect], ...] = (
    # azure-mgmt-scheduler 2.0.0 ("... msrest_azure/0.6.4 azure-mgmt-scheduler/2.0.0 Azure-SDK-For-Python"):
    # its patch.py replaces the client's duration (de)serialiser with a TimeSpan one that needs two-digit
    # hours (it crashes on PT30S or 0:00:30), writes a day as 30 TimeSpan days and reads d.hh:mm:ss as
    # d/30 days. Only get/create_or_update/patch use that patched deserialiser: list builds
    # JobDefinitionPaged over a fresh, unpatched msrest Deserializer, which parses ISO-8601 only
    # (azure-sdk-for-python#1358, the same failure against the real service).
    (_token(r"azure-mgmt-scheduler/2\.[0-9.a-z]+"), TIMESPAN),
    # azure-mgmt-scheduler 1.1.3 ("schedulermanagementclient/1.1.3"): the release that added patch.py
    # ("jobs.get function fails if custom retry policy is set"); same needs as 2.0.0.
    (_token(r"schedulermanagementclient/1\.1\.3"), TIMESPAN),
    # azure-mgmt-scheduler 1.0.0-1.1.2 ("schedulermanagementclient/1.1.2"): plain msrest, which writes and
    # reads ISO-8601 only (ISO8601Error on 00:00:30), on every operation.
    (_token(r"schedulermanagementclient/1\.(?:0\.[0-9]+|1\.[0-2])"), ISO),
    # azure-mgmt-scheduler 7.0.0 ("azsdk-python-mgmt-scheduler/7.0.0 Python/3.11 ..."): azure-core's
    # serialiser, isodate underneath: ISO-8601 only, on every operation.
    (_token(r"azsdk-python-mgmt-scheduler/[0-9.a-z]+"), ISO),
)


def dialect_of(user_agent: str | None, duration_format: str) -> Dialect:
    """The dialect for a client: forced by ``--duration-format``, else looked up by its User-Agent."""
    if duration_format in FORCED:
        return FORCED[duration_format]
    for pattern, dialect in CLIENTS:
        if user_agent and pattern.search(user_agent):
            return dialect
    return ECHO


def client_dialect(request: Request) -> Dialect:
    """The dialect of the client that sent ``request``."""
    return dialect_of(request.headers.get("user-agent"), request.app.state.settings.arm.duration_format)


def durations_as_meant(properties: dict[str, Any], dialect: Dialect) -> dict[str, Any]:
    """The ``properties`` a client sent (not changed), each duration the standard reading would get wrong
    rewritten in a new dict as the standard text of the length the client meant (see the module docstring);
    what the service parses (service.jobs)."""
    if dialect.timespan_day_factor == 1:
        return properties
    read = copy.deepcopy(properties)
    for holder, key in duration_fields(read):
        if is_timespan_with_days(holder[key]):
            try:
                meant = parse_duration(holder[key], timespan_day_factor=dialect.timespan_day_factor)
            except ValueError:
                continue  # left for validation to refuse with the field's path
            holder[key] = format_timespan(meant)
    return read


def rendered_duration(stored: str, style: Style) -> str:
    """A stored duration written in ``style``."""
    if style is Style.ECHO:
        return stored
    try:
        length = parse_duration(stored)
    except ValueError:
        return stored  # nothing unreadable is stored (validated on write); never fail a read over it
    if style is Style.ISO:
        return format_iso(length)
    return format_timespan(length, day_factor=SDK_TIMESPAN_DAY_FACTOR, fractions=False)
