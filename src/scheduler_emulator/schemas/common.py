"""Building blocks of the wire models: case-insensitive enumerations, lenient lists, ARM field paths."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, TypeVar

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    PlainSerializer,
    PlainValidator,
    SerializerFunctionWrapHandler,
    ValidationError,
    ValidatorFunctionWrapHandler,
    WrapSerializer,
    WrapValidator,
)
from pydantic.alias_generators import to_camel

from scheduler_emulator.domain.durations import parse_duration
from scheduler_emulator.domain.errors import FieldError

T = TypeVar("T")


class WireModel(BaseModel):
    """camelCase on the wire, unknown members ignored (ARM clients send read-only fields back)."""

    model_config = ConfigDict(alias_generator=to_camel, extra="ignore", frozen=True)


class Spelt(str):
    """A validated enumeration value: equal to its canonical spelling, remembering the spelling it was sent in,
    which is what is stored (JobProperties.canonical) and, where the service echoed it, answered
    (api/rendering.py writes the service's own spelling everywhere else)."""

    sent: str

    def __new__(cls, canonical: str, sent: str | None = None) -> Spelt:
        value = super().__new__(cls, canonical)
        value.sent = canonical if sent is None else sent
        return value

    def __reduce__(self) -> tuple[type[Spelt], tuple[str, str]]:
        return Spelt, (str(self), self.sent)


def _spelling_as_sent(value: str) -> str:
    return value.sent if isinstance(value, Spelt) else value


def CaseInsensitive(*values: str) -> Any:  # noqa: N802 - reads as a type
    """A string enumeration matched case-insensitively; the validated value is the canonical spelling, written
    (to JSON) in the spelling it was sent in (Spelt)."""
    lookup = {value.lower(): value for value in values}

    def canonical(raw: object) -> str:
        if isinstance(raw, str) and raw.lower() in lookup:
            return Spelt(lookup[raw.lower()], raw.sent if isinstance(raw, Spelt) else raw)
        raise ValueError(f"'{raw}' is not one of: {', '.join(values)}")

    return Annotated[str, PlainValidator(canonical), PlainSerializer(_spelling_as_sent, when_used="json")]


class SentAsScalar(list[Any]):
    """A list that was sent as its one element: Azure accepted a scalar where an array is expected
    ("minutes": 15) and answered it as sent (tests/api/test_jobs.py), so it is stored and written so."""


def _as_list(raw: object, handler: ValidatorFunctionWrapHandler) -> object:
    if raw is None or isinstance(raw, list):
        return handler(raw)
    return SentAsScalar(handler([raw]))


def _written_as_sent(value: list[Any], handler: SerializerFunctionWrapHandler) -> object:
    written = handler(value)
    return written[0] if isinstance(value, SentAsScalar) else written


LenientList = Annotated[list[T], WrapValidator(_as_list), WrapSerializer(_written_as_sent, when_used="json")]


def _no_boolean(raw: object) -> object:
    # JSON true/false is not a number (docs/reference/security.md#limits-on-input): pydantic's lax int would read it as
    # 1/0.
    if isinstance(raw, bool):
        raise ValueError(f"must be an integer, not {str(raw).lower()}")
    return raw


Integer = Annotated[int, BeforeValidator(_no_boolean)]
"""An integer field of the wire: a JSON number (or its text, as Azure read it), never a boolean."""


def _aware(value: datetime) -> datetime:
    # Times without an offset are UTC (docs/reference/recurrence-and-retries.md#time-zone).
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value


class SentTime(datetime):
    """A validated time remembering the text it was sent as: stored and answered as sent
    (docs/reference/arm-api.md#times-and-durations), compared and computed with as the instant it names."""

    sent: str


def _remembering(parsed: datetime, sent: str) -> SentTime:
    value = SentTime(
        parsed.year,
        parsed.month,
        parsed.day,
        parsed.hour,
        parsed.minute,
        parsed.second,
        parsed.microsecond,
        parsed.tzinfo,
        fold=parsed.fold,
    )
    value.sent = sent
    return value


def _parse_datetime(raw: object) -> datetime:
    if isinstance(raw, datetime):
        return _aware(raw)
    if not isinstance(raw, str):
        raise ValueError("must be an ISO-8601 date and time string")
    text = raw.strip()
    # ASCII digits only (docs/reference/security.md#limits-on-input), whatever the parser underneath accepts
    if not text.isascii():
        raise ValueError(f"'{raw[:60]}' is not an ISO-8601 date and time (ASCII characters only)")
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        parsed = _aware(datetime.fromisoformat(text))
    except ValueError:
        raise ValueError(f"'{raw[:60]}' is not an ISO-8601 date and time") from None
    try:
        # Every time is compared and stored in UTC: one that leaves years 1-9999 there cannot be.
        parsed.astimezone(UTC)
    except OverflowError:
        raise ValueError(f"'{raw[:60]}' is outside years 1-9999 once moved to UTC") from None
    return _remembering(parsed, raw)


def _datetime_text(value: datetime) -> str:
    # the stored and answered text: as sent; a time made here, ISO-8601 with its offset, UTC written Z
    sent = getattr(value, "sent", None)
    if isinstance(sent, str):
        return sent
    text = value.isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


DateTime = Annotated[datetime, PlainValidator(_parse_datetime), PlainSerializer(_datetime_text, when_used="json")]


def _check_duration(raw: object) -> str:
    if not isinstance(raw, str) or len(raw) > 100:
        raise ValueError("must be a duration string such as 'PT30S' or '00:00:30'")
    parse_duration(raw)
    return raw


Duration = Annotated[str, PlainValidator(_check_duration)]


def field_path(loc: tuple[int | str, ...]) -> str:
    """``('properties', 'recurrence', 'schedule', 'minutes', 2)`` → ``properties.recurrence.schedule.minutes[2]``."""
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else str(part)
    return path


def first_field_error(exc: ValidationError) -> FieldError:
    """The first problem of a validation failure, as a FieldError with its full ARM path."""
    error = exc.errors(include_url=False)[0]
    path = field_path(tuple(error["loc"]))
    cause = (error.get("ctx") or {}).get("error")
    if isinstance(cause, FieldError):
        return FieldError(f"{path}.{cause.path}" if path else cause.path, cause.problem)
    message = str(error["msg"]).removeprefix("Value error, ")
    if error["type"] == "missing":
        message = "is required"
    elif error["type"] == "model_type" or error["type"] == "dict_type":
        message = "must be a JSON object"
    elif error["type"] == "list_type":
        message = "must be a JSON array"
    return FieldError(path or "body", message)
