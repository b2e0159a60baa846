"""Member names matched case-insensitively, as the service (Json.NET) matched them
(docs/reference/arm-api.md#request-bodies): a 2015 docs template writes ``"Frequency"``. Bodies are rewritten to the
wire models' own spelling before anything reads or stores them, so every later reader (validation, the secret slots, the
dispatcher) sees one spelling."""

from __future__ import annotations

import types
from functools import cache
from typing import Any, Union, get_args, get_origin

from pydantic import AliasChoices, BaseModel


@cache
def _members(model: type[BaseModel]) -> dict[str, tuple[str, frozenset[str], tuple[type[BaseModel], ...]]]:
    """lower-case wire name → (the model's spelling, every spelling it accepts as is, the models its value may
    hold)."""
    members: dict[str, tuple[str, frozenset[str], tuple[type[BaseModel], ...]]] = {}
    for name, info in model.model_fields.items():
        spellings = [info.alias or name]
        if isinstance(info.validation_alias, AliasChoices):
            spellings += [c for c in info.validation_alias.choices if isinstance(c, str)]
        entry = (spellings[0], frozenset(spellings), tuple(_models_in(info.annotation)))
        for spelling in spellings:
            members.setdefault(spelling.lower(), entry)
    return members


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    origin = get_origin(annotation)
    if origin in (Union, types.UnionType, list) or origin is not None:
        found: list[type[BaseModel]] = []
        for arg in get_args(annotation):
            found += _models_in(arg)
        return found
    return []


def canonical_names(value: Any, model: type[BaseModel]) -> Any:
    """A copy of ``value`` with each member name that matches one of ``model``'s (recursively) in another case
    renamed to the model's spelling; a member already spelled exactly wins over a differently cased twin."""
    if isinstance(value, list):
        return [canonical_names(item, model) for item in value]
    if not isinstance(value, dict):
        return value
    members = _members(model)
    result: dict[str, Any] = {}
    for key, item in value.items():
        known = members.get(key.lower()) if isinstance(key, str) else None
        if known is None:
            result.setdefault(key, item)
            continue
        primary, accepted, nested = known
        spelling = key if key in accepted else primary  # a spelling the model reads as is stays
        if spelling in result and key != spelling:
            continue  # the exact spelling was sent too: it wins
        for submodel in nested:
            item = canonical_names(item, submodel)
        result[spelling] = item
    return result
