"""Replays the real service's recorded traffic (recordings/, see SOURCES.md) against a started emulator and
compares what it answers with what Azure answered.

A recorded *session* is one test run of an official client: its exchanges are replayed in order, in a fresh
subscription (the recorded all-zero id is mapped to a new one and back), after ``POST /_emulator/reset``,
with the virtual clock moved to each exchange's recorded instant (its response ``Date``) before it is sent,
so that computed times (``nextExecutionTime``) compare. Sessions run oldest first: the clock only moves
forward.

Each exchange ends as one of:
- *match*: the same status, and the same body once the IGNORE rules have set aside what no two runs share
  (ids, etags, request ids, resources the recording's subscription already held);
- *explained*: different, and the same once a DIFFERENCE rule (a known, stated difference) is applied;
- *unexplained*: anything else; the suite fails on it.
Exchanges that are not Scheduler traffic are not replayed (SKIP rules).

Every rule is written once below, with its reason.
"""

from __future__ import annotations

import contextlib
import copy
import json
import re
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

from scheduler_emulator.domain.durations import parse_duration

RECORDINGS = Path(__file__).resolve().parents[1] / "conformance" / "recordings"
RECORDED_SUBSCRIPTION = "00000000-0000-0000-0000-000000000000"
CLASSIC_HOST = "management.core.windows.net"
ARM_HOST = "management.azure.com"


# --- the recordings ----------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Exchange:
    """One recorded request and the service's answer."""

    session: str
    index: int
    method: str
    uri: str
    request_headers: dict[str, str]
    request_body: str | None
    status: int
    response_headers: dict[str, str]
    response_body: str

    @property
    def surface(self) -> str:
        return "classic" if urlsplit(self.uri).hostname == CLASSIC_HOST else "arm"

    @property
    def instant(self) -> datetime:
        """When the service answered (its ``Date`` header, to the second)."""
        return parsedate_to_datetime(self.response_headers["Date"]).astimezone(UTC)

    @property
    def label(self) -> str:
        return f"{self.session}#{self.index} {self.method} {urlsplit(self.uri).path}"


@dataclass(frozen=True, kw_only=True)
class Session:
    name: str
    source: dict[str, str]
    exchanges: list[Exchange]


def load_sessions() -> list[Session]:
    """Every recorded session, oldest first."""
    sessions = []
    for path in sorted(RECORDINGS.glob("*.json")):
        document = json.loads(path.read_text())
        name = path.stem
        exchanges = [
            Exchange(
                session=name,
                index=index,
                method=item["request"]["method"],
                uri=item["request"]["uri"],
                request_headers=item["request"]["headers"],
                request_body=item["request"]["body"],
                status=item["response"]["status"],
                response_headers=item["response"]["headers"],
                response_body=item["response"]["body"] or "",
            )
            for index, item in enumerate(document["exchanges"])
        ]
        sessions.append(Session(name=name, source=document["source"], exchanges=exchanges))
    return sorted(sessions, key=lambda session: session.exchanges[0].instant)


# --- the rules ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Replayed:
    """An exchange and what the emulator answered, the bodies parsed (JSON → objects, XML → trees)."""

    exchange: Exchange
    status: int
    recorded: Any
    actual: Any
    created: frozenset[str]  # names of the resources this session's own requests created (lower case)


Transform = Callable[[Replayed, Any, Any], tuple[Any, Any]]


@dataclass(frozen=True, kw_only=True)
class Rule:
    name: str
    reason: str
    transform: Transform  # (replayed, recorded body, actual body) → the two bodies with the rule applied


def _skip_not_scheduler(exchange: Exchange) -> bool:
    path = urlsplit(exchange.uri).path.lower()
    return exchange.surface == "arm" and "/providers/microsoft.scheduler/" not in path


SKIP_RULES: list[tuple[str, str, Callable[[Exchange], bool]]] = [
    (
        "not-scheduler",
        "Resource-group PUTs (Microsoft.Resources) that the ARM tests made before their Scheduler calls are "
        "not Scheduler traffic; subscriptions and resource groups exist implicitly here "
        "(docs/reference/arm-api.md#paths-and-names).",
        _skip_not_scheduler,
    ),
]


def _walk_json(node: Any, visit: Callable[[dict[str, Any]], None]) -> None:
    if isinstance(node, dict):
        visit(node)
        for value in node.values():
            _walk_json(value, visit)
    elif isinstance(node, list):
        for value in node:
            _walk_json(value, visit)


def _is_xml(tree: Any) -> bool:
    return isinstance(tree, dict) and set(tree) == {"tag", "text", "children"}


def _xml_drop(tree: Any, tag: str, where: Callable[[dict[str, Any]], bool] = lambda _: True) -> Any:
    """A copy of an XML tree (see _xml_tree) without the elements named ``tag`` for which ``where`` holds."""
    if not _is_xml(tree):
        return tree
    kept = [child for child in tree["children"] if not (child["tag"] == tag and where(child))]
    children = [_xml_drop(child, tag, where) for child in kept]
    return {**tree, "children": children}


def _ignore_operation_id(replayed: Replayed, recorded: Any, actual: Any) -> tuple[Any, Any]:
    if _is_xml(recorded) and recorded["tag"] == "Operation":
        return _xml_drop(recorded, "ID"), _xml_drop(actual, "ID")
    return recorded, actual


def _ignore_etag(replayed: Replayed, recorded: Any, actual: Any) -> tuple[Any, Any]:
    return _xml_drop(recorded, "ETag"), _xml_drop(actual, "ETag")


def _child_text(tree: dict[str, Any], tag: str) -> str | None:
    for child in tree["children"]:
        if child["tag"] == tag:
            return child["text"]
    return None


def _ignore_preexisting(replayed: Replayed, recorded: Any, actual: Any) -> tuple[Any, Any]:
    if isinstance(recorded, dict) and isinstance(recorded.get("value"), list) and isinstance(actual, dict):

        def own(items: Any) -> Any:
            if not isinstance(items, list):
                return items
            return [i for i in items if str(i.get("name", "")).rsplit("/", 1)[-1].lower() in replayed.created]

        return {**recorded, "value": own(recorded["value"])}, {**actual, "value": own(actual.get("value"))}
    if not (_is_xml(recorded) and recorded["tag"] == "CloudServices"):
        return recorded, actual

    def foreign(child: dict[str, Any]) -> bool:
        return (_child_text(child, "Name") or "").lower() not in replayed.created

    return _xml_drop(recorded, "CloudService", foreign), _xml_drop(actual, "CloudService", foreign)


IGNORE_RULES: list[Rule] = [
    Rule(
        name="operation-id",
        reason="An operation's ID is the x-ms-request-id of the write it reports on (the service wrote it as a "
        "GUID); request ids differ on every run. The poll's path maps it; the body's copy is not compared.",
        transform=_ignore_operation_id,
    ),
    Rule(
        name="etag",
        reason="A classic ETag is opaque and new on every write.",
        transform=_ignore_etag,
    ),
    Rule(
        name="pre-existing",
        reason="A list in the recording also named resources the recording's subscription already held, left "
        "by earlier runs; only the ones this session created are compared.",
        transform=_ignore_preexisting,
    ),
]


def _null_next_link(replayed: Replayed, recorded: Any, actual: Any) -> tuple[Any, Any]:
    null_in_recorded = isinstance(recorded, dict) and "nextLink" in recorded and recorded["nextLink"] is None
    if null_in_recorded and isinstance(actual, dict) and "nextLink" not in actual:
        return {key: value for key, value in recorded.items() if key != "nextLink"}, actual
    return recorded, actual


def _completed_at_once(replayed: Replayed, recorded: Any, actual: Any) -> tuple[Any, Any]:
    if _is_xml(recorded) and recorded["tag"] == "Operation" and _child_text(recorded, "Status") == "InProgress":
        return _xml_drop(recorded, "Status"), _xml_drop(_xml_drop(actual, "Status"), "HttpStatusCode")
    return recorded, actual


def _retired(replayed: Replayed, recorded: Any, actual: Any) -> tuple[Any, Any]:
    if replayed.exchange.instant >= datetime(2022, 1, 31, tzinfo=UTC) and replayed.exchange.status == 404:
        return "retired", "retired"
    return recorded, actual


def _header_names(replayed: Replayed, recorded: Any, actual: Any) -> tuple[Any, Any]:
    def lower_headers(node: dict[str, Any]) -> None:
        request = node.get("request")
        if isinstance(request, dict) and isinstance(request.get("headers"), dict):
            request["headers"] = {key.lower(): value for key, value in request["headers"].items()}

    recorded, actual = copy.deepcopy(recorded), copy.deepcopy(actual)
    _walk_json(recorded, lower_headers)
    _walk_json(actual, lower_headers)
    return recorded, actual


_CLIENT_EXTRAS = {
    "Resource": ("Label", "Plan", "ResourceProviderNamespace"),
    "CloudService": ("GeoLocation",),
}


def _classic_extras(replayed: Replayed, recorded: Any, actual: Any) -> tuple[Any, Any]:
    if not (_is_xml(actual) and _is_xml(recorded)):
        return recorded, actual
    extras = {
        tag
        for tag in _CLIENT_EXTRAS.get(actual["tag"], ())
        if not any(child["tag"] == tag for child in recorded["children"])
    }
    if extras:  # top-level children only: IntrinsicSettings/Plan is compared
        actual = {**actual, "children": [child for child in actual["children"] if child["tag"] not in extras]}
    return recorded, actual


_TIME = re.compile(r"^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(\.\d+)?(Z|[+-]\d{2}:\d{2})?$")
_TIME_KEYS = {"startTime", "endTime", "nextExecutionTime", "lastExecutionTime", "expectedExecutionTime"}


def _instant(text: str) -> datetime | None:
    match = _TIME.match(text)
    if match is None:
        return None
    fraction = float(match.group(2) or "0")
    zone = match.group(3) or "Z"
    base = datetime.fromisoformat(match.group(1) + ("+00:00" if zone == "Z" else zone))
    return (base + timedelta(seconds=fraction)).astimezone(UTC)


def _as_instants(replayed: Replayed, recorded: Any, actual: Any) -> tuple[Any, Any]:
    """Time values → milliseconds since the epoch on both sides."""

    def convert(node: dict[str, Any]) -> None:
        for key in _TIME_KEYS & node.keys():
            if isinstance(node[key], str) and (moment := _instant(node[key])) is not None:
                node[key] = round(moment.timestamp() * 1000)

    recorded, actual = copy.deepcopy(recorded), copy.deepcopy(actual)
    _walk_json(recorded, convert)
    _walk_json(actual, convert)
    return recorded, actual


def _durations_as_lengths(replayed: Replayed, recorded: Any, actual: Any) -> tuple[Any, Any]:
    def convert(node: dict[str, Any]) -> None:
        for key in ("retryInterval", "timeToLive"):
            if isinstance(node.get(key), str):
                with contextlib.suppress(ValueError):
                    node[key] = parse_duration(node[key]).total_seconds()

    recorded, actual = copy.deepcopy(recorded), copy.deepcopy(actual)
    _walk_json(recorded, convert)
    _walk_json(actual, convert)
    return recorded, actual


def _status_of_unrun_job(replayed: Replayed, recorded: Any, actual: Any) -> tuple[Any, Any]:
    recorded_properties = recorded.get("properties") if isinstance(recorded, dict) else None
    actual_properties = actual.get("properties") if isinstance(actual, dict) else None
    if (
        isinstance(recorded_properties, dict)
        and isinstance(actual_properties, dict)
        and "status" not in recorded_properties
        and actual_properties.get("status") == {"executionCount": 0, "failureCount": 0, "faultedCount": 0}
    ):
        actual = copy.deepcopy(actual)
        del actual["properties"]["status"]
    return recorded, actual


DIFFERENCE_RULES: list[Rule] = [
    Rule(
        name="no-null-next-link",
        reason='The service wrote "nextLink": null on a list\'s last page; the emulator leaves the member out '
        "(docs/reference/arm-api.md#lists-and-paging: absent on the last page, no null noise), which every client "
        "reads the same way.",
        transform=_null_next_link,
    ),
    Rule(
        name="completes-at-once",
        reason="Classic writes finish before the emulator answers them "
        "(docs/reference/classic-api.md#asynchronous-operations): a poll the service answered InProgress is "
        "answered Succeeded, as the service's next poll was.",
        transform=_completed_at_once,
    ),
    Rule(
        name="retired",
        reason="Recorded after the service was retired (31 January 2022): Azure answered 404 InvalidRequestUri "
        "for every Scheduler path; the emulator is the service as it was before.",
        transform=_retired,
    ),
    Rule(
        name="times-as-instants",
        reason="The service rewrote the times it echoed in its own form (UTC with 'Z', .NET's 100 ns ticks, "
        "rounded: '...16.9049999999999999Z' came back '...16.905Z', '2015-07-01T00:00:32.104381' came back with "
        "a 'Z'); the emulator echoes startTime and endTime as sent (docs/reference/arm-api.md#times-and-durations) "
        "and keeps microseconds: times are compared as instants, to the millisecond.",
        transform=_as_instants,
    ),
    Rule(
        name="durations-as-lengths",
        reason="Durations are written in the format each client generation reads (api/client_dialects.py): the "
        "2017 recording's client called itself 1.1.2 (ISO-8601 only) yet sent 1.1.3's TimeSpan '30.00:00:00', "
        "which the service echoed; compared as lengths.",
        transform=_durations_as_lengths,
    ),
    Rule(
        name="classic-header-names",
        reason="The classic service camel-cased the first letter of the job's request header names on the way "
        "out ('Content-Type' came back 'content-Type'), a serialiser's artefact that would make clients send "
        "another header; the emulator answers them as sent. Header names compared case-insensitively.",
        transform=_header_names,
    ),
    Rule(
        name="classic-client-extras",
        reason="Elements the emulator adds for the classic clients that read them where this recording's "
        "service left them out (docs/reference/classic-api.md#job-collections): a job collection's Label, "
        "top-level Plan and ResourceProviderNamespace (npm), a cloud service's GeoLocation (npm's get).",
        transform=_classic_extras,
    ),
    Rule(
        name="status-of-unrun-job",
        reason="The service left 'status' out of a disabled job that had never run (2016 and 2017 recordings); "
        "the emulator always answers it (docs/reference/arm-api.md#jobs), here with its zero counters and no times.",
        transform=_status_of_unrun_job,
    ),
]


# --- bodies ------------------------------------------------------------------------------------------------


def _xml_tree(element: ET.Element) -> dict[str, Any]:
    """An element as a comparable value: local tag, stripped text (None for i:nil), attributes without
    namespace declarations, children in order."""
    nil = any(key.endswith("}nil") and value == "true" for key, value in element.attrib.items())
    text = None if nil else " ".join((element.text or "").split())
    return {
        "tag": element.tag.rsplit("}", 1)[-1],
        "text": text,
        "children": [_xml_tree(child) for child in element],
    }


def parse_body(text: str) -> Any:
    """JSON → its value, XML → a tree, empty → ''."""
    stripped = text.strip()
    if not stripped:
        return ""
    if stripped.startswith("<"):
        return _xml_tree(ET.fromstring(stripped))
    return json.loads(stripped)


def _sort_xml(tree: Any) -> Any:
    """Children in tag order: the service and the emulator agree on element sets, not always on order."""
    if not _is_xml(tree):
        return tree
    children = sorted((_sort_xml(child) for child in tree["children"]), key=lambda c: json.dumps(c, sort_keys=True))
    return {**tree, "children": children}


def same(recorded: Any, actual: Any) -> bool:
    return _sort_xml(recorded) == _sort_xml(actual)


# --- replaying ---------------------------------------------------------------------------------------------


@dataclass
class Outcome:
    exchange: Exchange
    verdict: str  # match | explained | unexplained
    rules: list[str] = field(default_factory=list)
    detail: str = ""


@dataclass
class Report:
    outcomes: list[Outcome] = field(default_factory=list)
    skipped: list[tuple[Exchange, str]] = field(default_factory=list)

    def count(self, surface: str | None, *verdicts: str) -> int:
        return sum(
            1
            for outcome in self.outcomes
            if outcome.verdict in verdicts and (surface is None or outcome.exchange.surface == surface)
        )

    def summary(self) -> str:
        def ratio(surface: str | None) -> str:
            return f"{self.count(surface, 'match')}/{self.count(surface, 'match', 'explained', 'unexplained')}"

        rules: dict[str, int] = {}
        for outcome in self.outcomes:
            for rule in outcome.rules:
                rules[rule] = rules.get(rule, 0) + 1
        explained = ", ".join(f"{name} {count}" for name, count in sorted(rules.items()))
        return (
            f"conformance: {ratio(None)} exchanges match (ARM {ratio('arm')}, classic {ratio('classic')}); "
            f"{self.count(None, 'explained')} explained by stated rules ({explained or 'none'}); "
            f"{self.count(None, 'unexplained')} unexplained; {len(self.skipped)} not Scheduler traffic, not replayed"
        )

    @property
    def unexplained(self) -> list[Outcome]:
        return [outcome for outcome in self.outcomes if outcome.verdict == "unexplained"]


class Replayer:
    """Replays sessions against one emulator (``client``: an httpx client on its base URL)."""

    def __init__(self, client: httpx.Client) -> None:
        self.client = client

    def run(self, sessions: list[Session]) -> Report:
        report = Report()
        for session in sessions:
            self._session(session, report)
        return report

    def _move_clock(self, instant: datetime) -> None:
        now = datetime.fromisoformat(self.client.get("/_emulator/clock").json()["now"].replace("Z", "+00:00"))
        if instant > now:
            answer = self.client.post("/_emulator/clock", json={"to": instant.strftime("%Y-%m-%dT%H:%M:%SZ")})
            assert answer.status_code == 200, answer.text
            # Nothing recorded may fire: its targets are real hosts (and the emulator may reach loopback only).
            assert answer.json()["attempts"] == 0, f"a recorded job ran at {instant}: {answer.text}"

    def _session(self, session: Session, report: Report) -> None:
        assert self.client.post("/_emulator/reset").status_code == 200
        subscription = str(uuid.uuid4())
        request_ids: dict[str, str] = {}  # recorded x-ms-request-id → the emulator's
        created: set[str] = set()
        for exchange in session.exchanges:
            skip = next((name for name, _, applies in SKIP_RULES if applies(exchange)), None)
            if skip is not None:
                report.skipped.append((exchange, skip))
                continue
            self._move_clock(exchange.instant)
            response = self._send(exchange, subscription, request_ids)
            recorded_id = exchange.response_headers.get("x-ms-request-id")
            if recorded_id:
                request_ids[recorded_id] = response.headers.get("x-ms-request-id", "")
            if exchange.method == "PUT":
                created.add(urlsplit(exchange.uri).path.rstrip("/").rsplit("/", 1)[-1].lower())
            actual_text = response.text.replace(subscription, RECORDED_SUBSCRIPTION)
            replayed = Replayed(
                exchange=exchange,
                status=response.status_code,
                recorded=parse_body(exchange.response_body),
                actual=parse_body(actual_text) if actual_text.strip() else "",
                created=frozenset(created),
            )
            report.outcomes.append(self._judge(replayed))

    def _send(self, exchange: Exchange, subscription: str, request_ids: dict[str, str]) -> httpx.Response:
        parts = urlsplit(exchange.uri)
        path = parts.path.replace(RECORDED_SUBSCRIPTION, subscription)
        if exchange.surface == "classic" and "/operations/" in path:
            head, _, recorded_id = path.rpartition("/")
            path = f"{head}/{request_ids.get(recorded_id, recorded_id)}"
        url = path + (f"?{parts.query}" if parts.query else "")
        headers = dict(exchange.request_headers)
        body = exchange.request_body.encode() if exchange.request_body is not None else None
        return self.client.request(exchange.method, url, headers=headers, content=body)

    def _judge(self, replayed: Replayed) -> Outcome:
        exchange = replayed.exchange
        recorded, actual = replayed.recorded, replayed.actual
        for rule in IGNORE_RULES:
            recorded, actual = rule.transform(replayed, recorded, actual)
        if replayed.status == exchange.status and same(recorded, actual):
            return Outcome(exchange, "match")
        if self._explained(replayed, recorded, actual, DIFFERENCE_RULES):
            needed = list(DIFFERENCE_RULES)
            for rule in DIFFERENCE_RULES:  # name only the rules the difference needs
                fewer = [other for other in needed if other is not rule]
                if self._explained(replayed, recorded, actual, fewer):
                    needed = fewer
            return Outcome(exchange, "explained", [rule.name for rule in needed])
        for rule in DIFFERENCE_RULES:
            recorded, actual = rule.transform(replayed, recorded, actual)
        detail = (
            f"status recorded {exchange.status}, emulator {replayed.status}\n"
            f"  recorded: {json.dumps(_sort_xml(recorded), sort_keys=True)[:1500]}\n"
            f"  emulator: {json.dumps(_sort_xml(actual), sort_keys=True)[:1500]}"
        )
        return Outcome(exchange, "unexplained", [], detail)

    @staticmethod
    def _explained(replayed: Replayed, recorded: Any, actual: Any, rules: list[Rule]) -> bool:
        """Whether ``rules`` (applied in order) make the answers the same; a status differs only when the
        ``retired`` rule is among them."""
        for rule in rules:
            recorded, actual = rule.transform(replayed, recorded, actual)
        statuses_agree = replayed.status == replayed.exchange.status or any(r.name == "retired" for r in rules)
        return statuses_agree and same(recorded, actual)


def rules_text() -> str:
    """Every rule with its reason, for the test's output."""
    lines = []
    for kind, rules in (("ignore", IGNORE_RULES), ("difference", DIFFERENCE_RULES)):
        lines += [f"  [{kind}] {rule.name}: {rule.reason}" for rule in rules]
    lines += [f"  [skip] {name}: {reason}" for name, reason, _ in SKIP_RULES]
    return "\n".join(lines)
