"""Building blocks of the wire models: case-insensitive enumerations, lenient lists, ARM field paths."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, TypeVar

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    ModelWrapValidatorHandler,
    PlainSerializer,
    PlainValidator,
    PrivateAttr,
    ValidationError,
    field_serializer,
    model_validator,
)
from pydantic.alias_generators import to_camel

from scheduler_emulator.domain.durations import parse_duration
from scheduler_emulator.domain.errors import FieldError

T = TypeVar("T")


class WireModel(BaseModel):
    """camelCase on the wire, unknown members ignored (ARM clients send read-only fields back)."""

    model_config = ConfigDict(alias_generator=to_camel, extra="ignore", frozen=True)


class TypeSpeltAsSent(WireModel):
    """A model whose ``type`` (a CaseInsensitive enumeration) is read in its canonical spelling but written as
    the client spelt it: the service answered an action's and an HTTP authentication's type so (recorded:
    tests/conformance/recordings/classic.test_get_job.json, "http")."""

    _type_as_sent: str | None = PrivateAttr(None)

    @model_validator(mode="wrap")
    @classmethod
    def _remember_type(cls, data: Any, handler: ModelWrapValidatorHandler[Any]) -> Any:
        model = handler(data)
        if isinstance(data, dict) and isinstance(data.get("type"), str):
            model._type_as_sent = data["type"]
        return model

    @field_serializer("type", check_fields=False)
    def _type_spelt_as_sent(self, value: str) -> str:
        return self._type_as_sent or value


def CaseInsensitive(*values: str) -> Any:  # noqa: N802 - reads as a type
    """A string enumeration matched case-insensitively; the validated value is the canonical spelling."""
    lookup = {value.lower(): value for value in values}

    def canonical(raw: object) -> str:
        if isinstance(raw, str) and raw.lower() in lookup:
            return lookup[raw.lower()]
        raise ValueError(f"'{raw}' is not one of: {', '.join(values)}")

    return Annotated[str, PlainValidator(canonical)]


def _as_list(raw: object) -> object:
    # Azure accepted a scalar where an array is expected ("minutes": 15).
    return raw if isinstance(raw, list) or raw is None else [raw]


LenientList = Annotated[list[T], BeforeValidator(_as_list)]


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
    return parsed


def _datetime_text(value: datetime) -> str:
    # the stored and answered text: ISO-8601 with the offset it was sent with, UTC written Z (as the service
    # answered a time sent without an offset: tests/conformance/recordings/classic.test_create_job.json)
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
