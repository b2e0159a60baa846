"""Wire model of a job definition (``JobDefinition.properties``): shape, types, enumerations and the rules
that need nothing but the definition itself. Plan- and time-dependent rules live in domain.job_rules."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from pydantic import AliasChoices, Field, model_validator

from scheduler_emulator.domain import recurrence as rec
from scheduler_emulator.domain.errors import FieldError
from scheduler_emulator.schemas import job_shape as shape
from scheduler_emulator.schemas.common import CaseInsensitive, DateTime, Duration, Integer, LenientList, WireModel
from scheduler_emulator.schemas.job_shape import duration_fields as duration_fields  # re-exported
from scheduler_emulator.schemas.job_shape import strip_secrets as strip_secrets  # re-exported
from scheduler_emulator.schemas.strict_json import check_line

ACTION_TYPES = tuple(shape.PAYLOAD_OF)
HTTP_METHODS = ("GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "TRACE")
WEEK_DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
FREQUENCIES = ("Minute", "Hour", "Day", "Week", "Month")
MAX_INTERVAL = {"Minute": 1000, "Hour": 1000, "Day": 548, "Week": 78, "Month": 18}
MAX_HEADERS = 50
MAX_HEADERS_CHARS = 4096
MAX_BODY_CHARS = 8192
SERVICE_BUS_NAMESPACE = re.compile(r"[A-Za-z][A-Za-z0-9-]{4,48}[A-Za-z0-9]")


# A shared access policy (SAS key) name: 1-256 characters, none of them ';', '=' or a control character.
SAS_KEY_NAME = re.compile(r"[^;=\x00-\x1f\x7f-\x9f]{1,256}")
STORAGE_ACCOUNT = re.compile(r"[a-z0-9]{3,24}")


def is_service_bus_namespace(name: str) -> bool:
    """Azure's rule for a Service Bus namespace name (6–50 letters, digits, hyphens; letter first; no hyphen last)."""
    return SERVICE_BUS_NAMESPACE.fullmatch(name) is not None


def is_sas_key_name(name: str) -> bool:
    """Azure's rule for a shared access authorization rule's name (1–256 characters, no ';', '=' or controls)."""
    return SAS_KEY_NAME.fullmatch(name) is not None


def is_storage_account(name: str) -> bool:
    """Azure's rule for a storage account name (3–24 lower-case letters and digits)."""
    return STORAGE_ACCOUNT.fullmatch(name) is not None


WeekDay = CaseInsensitive(*WEEK_DAYS)


class HttpAuthentication(WireModel):
    type: CaseInsensitive("ClientCertificate", "ActiveDirectoryOAuth", "Basic", "NotSpecified")  # type: ignore[valid-type]
    username: str | None = None
    password: str | None = None
    pfx: str | None = None
    secret: str | None = None
    tenant: str | None = None
    audience: str | None = None
    client_id: str | None = None
    # What the service read from the pfx (set on write, service.jobs); clients send them back unchanged, under
    # either name of the expiry (the service's and the REST spec's: api/rendering.py answers both).
    certificate_thumbprint: str | None = None
    certificate_subject_name: str | None = None
    certificate_expiration_date: str | None = Field(
        None, validation_alias=AliasChoices("certificateExpirationDate", "certificateExpiration")
    )

    @model_validator(mode="after")
    def _required_for_type(self) -> HttpAuthentication:
        required = {
            "Basic": ("username", "password"),
            "ClientCertificate": ("pfx",),
            "ActiveDirectoryOAuth": ("tenant", "audience", "client_id", "secret"),
        }.get(self.type, ())
        for name in required:
            if not getattr(self, name):
                wire = "clientId" if name == "client_id" else name
                raise FieldError(wire, f"is required for {self.type} authentication")
        return self


class HttpRequest(WireModel):
    uri: str
    method: str
    body: str | None = None
    headers: dict[str, str] | None = None
    authentication: HttpAuthentication | None = None

    @model_validator(mode="after")
    def _check(self) -> HttpRequest:
        check_uri(self.uri, "uri")
        if self.method.upper() not in HTTP_METHODS:
            raise FieldError("method", f"'{self.method}' is not one of: {', '.join(HTTP_METHODS)}")
        if self.headers is not None:
            if len(self.headers) > MAX_HEADERS:
                raise FieldError("headers", f"has {len(self.headers)} headers; at most {MAX_HEADERS} are allowed")
            total = sum(len(k) + len(v) for k, v in self.headers.items())
            if total > MAX_HEADERS_CHARS:
                raise FieldError("headers", f"are {total} characters in total; at most {MAX_HEADERS_CHARS} are allowed")
            for name, value in self.headers.items():
                if not re.fullmatch(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+", name):
                    raise FieldError("headers", f"'{name[:60]}' is not a valid header name")
                check_line(value, f"headers.{name}")
        if self.body is not None and len(self.body) > MAX_BODY_CHARS:
            raise FieldError("body", f"is {len(self.body)} characters long; at most {MAX_BODY_CHARS} are allowed")
        return self


MAX_URI_LENGTH = 2048


# The common URI, accepted at once: a plain host name or IPv4 address, an optional port, then only printable
# ASCII. Everything this matches also passes the full check below (tests/domain/test_uri_check.py); a URI it
# does not match (user info, IPv6, non-ASCII, a space...) goes through the full check. The dispatcher
# validates each stored definition when it claims the job, so this is paid once per fire of a job not in its
# definition cache (the full check is ~5 µs, most of it urlsplit).
_PLAIN_URI = re.compile(
    r"https?://[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?(?::([1-9][0-9]{0,4}))?(?:[/?#][!-~]*)?", re.IGNORECASE
)


def check_uri(uri: str, path: str) -> None:
    """FieldError unless ``uri`` is an absolute http(s) URI on one line with a valid host and port."""
    plain = _PLAIN_URI.fullmatch(uri) if len(uri) <= MAX_URI_LENGTH else None
    if plain is not None and (plain.group(1) is None or int(plain.group(1)) <= 65535):
        return
    check_uri_fully(uri, path)


def check_uri_fully(uri: str, path: str) -> None:
    """check_uri without its shortcut for the common URI."""
    check_line(uri, path)
    if len(uri) > MAX_URI_LENGTH or " " in uri:
        raise FieldError(path, f"is not a valid URI (no spaces, at most {MAX_URI_LENGTH} characters)")
    try:
        parts = urlsplit(uri)
        port = parts.port  # ValueError for a port outside 0..65535
    except ValueError as exc:
        raise FieldError(path, f"'{uri[:100]}' is not a valid URI: {exc}") from None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise FieldError(path, f"'{uri[:100]}' is not an absolute http or https URI")
    if port == 0:
        raise FieldError(path, "port 0 cannot be reached")


class StorageQueueMessage(WireModel):
    storage_account: str = Field(min_length=1)
    queue_name: str = Field(min_length=1)
    sas_token: str = Field(min_length=1)
    message: str

    @model_validator(mode="after")
    def _account_rule(self) -> StorageQueueMessage:
        # Azure's rule; it also keeps anything but a host label out of the URL the name goes into
        # (docs/reference/security.md#job-values-that-name-endpoints).
        if not is_storage_account(self.storage_account):
            raise FieldError(
                "storageAccount",
                f"'{self.storage_account[:60]}' is not a valid storage account name: 3 to 24 lower-case letters "
                "and digits",
            )
        return self


class ServiceBusAuthentication(WireModel):
    sas_key: str | None = None
    sas_key_name: str | None = None
    type: CaseInsensitive("NotSpecified", "SharedAccessKey") | None = None  # type: ignore[valid-type]

    @model_validator(mode="after")
    def _required(self) -> ServiceBusAuthentication:
        for name, wire in (("sas_key_name", "sasKeyName"), ("sas_key", "sasKey")):
            if not getattr(self, name):
                raise FieldError(wire, "is required")
        if not is_sas_key_name(self.sas_key_name or ""):
            raise FieldError(
                "sasKeyName",
                "is not a valid shared access policy name: 1 to 256 characters, without ';', '=' or control characters",
            )
        return self


class BrokeredMessageProperties(WireModel):
    content_type: str | None = None
    correlation_id: str | None = None
    force_persistence: bool | None = None
    label: str | None = None
    message_id: str | None = None
    partition_key: str | None = None
    reply_to: str | None = None
    reply_to_session_id: str | None = None
    scheduled_enqueue_time_utc: DateTime | None = None
    session_id: str | None = None
    time_to_live: Duration | None = None
    to: str | None = None
    via_partition_key: str | None = None


class ServiceBusMessage(WireModel):
    authentication: ServiceBusAuthentication
    brokered_message_properties: BrokeredMessageProperties | None = None
    custom_message_properties: dict[str, str] | None = None
    message: str | None = None
    namespace: str = Field(min_length=1)
    transport_type: CaseInsensitive("NotSpecified", "NetMessaging", "AMQP") | None = None  # type: ignore[valid-type]

    @model_validator(mode="after")
    def _namespace_rule(self) -> ServiceBusMessage:
        # Azure's rule; it also keeps ';', '=', ':' and '/' out of the connection string the name goes into.
        if not is_service_bus_namespace(self.namespace):
            raise FieldError(
                "namespace",
                f"'{self.namespace[:60]}' is not a valid Service Bus namespace name: 6 to 50 letters, digits and "
                "hyphens, starting with a letter and ending with a letter or digit",
            )
        return self


class ServiceBusQueueMessage(ServiceBusMessage):
    queue_name: str = Field(min_length=1)


class ServiceBusTopicMessage(ServiceBusMessage):
    topic_path: str = Field(min_length=1)


class RetryPolicy(WireModel):
    retry_type: CaseInsensitive("None", "Fixed") | None = None  # type: ignore[valid-type]
    retry_interval: Duration | None = None
    retry_count: Integer | None = Field(None, ge=0, le=20)


class ActionBase(WireModel):
    type: CaseInsensitive(*ACTION_TYPES)  # type: ignore[valid-type]
    request: HttpRequest | None = None
    queue_message: StorageQueueMessage | None = None
    service_bus_queue_message: ServiceBusQueueMessage | None = None
    service_bus_topic_message: ServiceBusTopicMessage | None = None
    retry_policy: RetryPolicy | None = None

    @model_validator(mode="after")
    def _payload_matches_type(self) -> ActionBase:
        wanted = shape.PAYLOAD_OF[self.type]
        for payload in shape.PAYLOADS:
            present = getattr(self, payload.attribute) is not None
            if payload is wanted and not present:
                raise FieldError(payload.key, f"is required when the action type is '{self.type}'")
            if payload is not wanted and present:
                raise FieldError(
                    payload.key, f"cannot be used with action type '{self.type}' (it takes '{wanted.key}')"
                )
        if self.type == "Https" and self.request and urlsplit(self.request.uri).scheme.lower() != "https":
            raise FieldError("request.uri", "must be an https URI for an Https action")
        return self

    @property
    def authentication(self) -> HttpAuthentication | None:
        return self.request.authentication if self.request else None


class JobErrorAction(ActionBase):
    pass


class JobAction(ActionBase):
    error_action: JobErrorAction | None = None


class MonthlyOccurrence(WireModel):
    day: WeekDay  # type: ignore[valid-type]
    occurrence: Integer | None = Field(None, validation_alias=AliasChoices("occurrence", "Occurrence"))

    @model_validator(mode="after")
    def _range(self) -> MonthlyOccurrence:
        if self.occurrence is not None and not (1 <= abs(self.occurrence) <= 5):
            raise FieldError("occurrence", f"{self.occurrence} is outside 1..5 and -5..-1")
        return self


class Schedule(WireModel):
    week_days: LenientList[WeekDay] | None = None  # type: ignore[valid-type]
    hours: LenientList[Integer] | None = None
    minutes: LenientList[Integer] | None = None
    month_days: LenientList[Integer] | None = None
    monthly_occurrences: LenientList[MonthlyOccurrence] | None = None

    @model_validator(mode="after")
    def _ranges(self) -> Schedule:
        for wire, values, low, high in (("hours", self.hours, 0, 23), ("minutes", self.minutes, 0, 59)):
            for index, value in enumerate(values or ()):
                if not low <= value <= high:
                    raise FieldError(f"{wire}[{index}]", f"{value} is outside {low}..{high}")
        for index, day in enumerate(self.month_days or ()):
            if day == 0 or not -31 <= day <= 31:
                raise FieldError(f"monthDays[{index}]", f"{day} is outside 1..31 and -31..-1")
        return self


class Recurrence(WireModel):
    frequency: CaseInsensitive(*FREQUENCIES)  # type: ignore[valid-type]
    interval: Integer | None = None
    count: Integer | None = Field(None, ge=1, le=2**31 - 1)
    end_time: DateTime | None = None
    schedule: Schedule | None = None

    @model_validator(mode="after")
    def _rules(self) -> Recurrence:
        limit = MAX_INTERVAL[self.frequency]
        if self.interval is not None and not 1 <= self.interval <= limit:
            raise FieldError("interval", f"{self.interval} is outside 1..{limit} for frequency {self.frequency}")
        schedule = self.schedule
        if schedule is not None:
            if schedule.week_days and self.frequency != "Week":
                raise FieldError("schedule.weekDays", "can only be used with frequency Week")
            if schedule.month_days and self.frequency != "Month":
                raise FieldError("schedule.monthDays", "can only be used with frequency Month")
            if schedule.monthly_occurrences and self.frequency != "Month":
                raise FieldError("schedule.monthlyOccurrences", "can only be used with frequency Month")
        return self


class JobProperties(WireModel):
    start_time: DateTime | None = None
    action: JobAction
    recurrence: Recurrence | None = None
    state: CaseInsensitive("Enabled", "Disabled") | None = None  # type: ignore[valid-type]

    def timing(self) -> rec.Timing:
        """The schedule part of the definition, in the recurrence engine's terms."""
        return timing_of(self.start_time, self.recurrence)

    def canonical(self) -> dict[str, Any]:
        """The definition as it is stored and answered from: numbers as numbers, enumerations and times in one
        spelling, scalar schedule lists as lists, durations as read (api/client_dialects.py), members not of
        the model left out, omitted members absent (api/rendering.py writes the answer from it)."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class JobDefinitionIn(WireModel):
    properties: JobProperties


def timing_of(start_time: datetime | None, recurrence: Recurrence | None) -> rec.Timing:
    """A start time and wire recurrence in the recurrence engine's terms."""
    return rec.Timing(start_time=start_time, recurrence=_domain_recurrence(recurrence))


def _domain_recurrence(recurrence: Recurrence | None) -> rec.Recurrence | None:
    if recurrence is None:
        return None
    schedule = None
    if recurrence.schedule is not None:
        s = recurrence.schedule
        schedule = rec.Schedule(
            minutes=tuple(sorted(set(s.minutes or ()))),
            hours=tuple(sorted(set(s.hours or ()))),
            week_days=tuple(sorted({WEEK_DAYS.index(d) for d in s.week_days or ()})),
            month_days=tuple(sorted(set(s.month_days or ()))),
            # repeats are dropped: thousands of copies of one entry must not cost thousands of checks
            monthly_occurrences=tuple(
                dict.fromkeys(
                    rec.MonthlyOccurrence(day=WEEK_DAYS.index(o.day), occurrence=o.occurrence)
                    for o in s.monthly_occurrences or ()
                )
            ),
        )
    return rec.Recurrence(
        frequency=rec.Frequency(recurrence.frequency),
        interval=recurrence.interval or 1,
        count=recurrence.count,
        end_time=recurrence.end_time,
        schedule=schedule,
    )


# The spelling the service wrote each enumeration in its answers (docs/reference/arm-api.md#enumerations, recorded: a
# PUT with "Enabled", "Week", "Fixed" came back "enabled", "week", "fixed"); input is read in any case. Members not
# listed here (action.type, HTTP authentication.type) are answered as the client sent them, as the service did.
SERVICE_SPELLING = {
    value.lower(): value[0].lower() + value[1:]
    for value in (
        *("Enabled", "Disabled", "Completed", "Faulted"),
        *FREQUENCIES,
        *("Fixed", "None"),
        *WEEK_DAYS,
        *("NotSpecified", "NetMessaging", "SharedAccessKey"),
    )
} | {"amqp": "amqp"}


def service_spelling(value: object) -> object:
    """An enumeration value as the service wrote it (anything else unchanged)."""
    return SERVICE_SPELLING.get(value.lower(), value) if isinstance(value, str) else value
