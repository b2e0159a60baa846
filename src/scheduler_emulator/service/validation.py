"""Reading a wire body into a model, with the domain's error (not any surface's)."""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from scheduler_emulator.domain.errors import InvalidName
from scheduler_emulator.schemas.common import first_field_error

M = TypeVar("M", bound=BaseModel)
MAX_NAME_LENGTH = 100  # the store's name columns (subscription, resource group, collection, job)


def read_model(model: type[M], body: dict[str, Any]) -> M:
    """``body`` read into ``model``; FieldError naming the first offending field path otherwise."""
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        raise first_field_error(exc) from None


def check_name_length(kind: str, name: str) -> None:
    """InvalidName when a new resource's name (or a part of its path) is too long to store."""
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidName(
            f"The {kind} name '{name[:40]}...' is {len(name)} characters long; at most {MAX_NAME_LENGTH} are allowed."
        )
