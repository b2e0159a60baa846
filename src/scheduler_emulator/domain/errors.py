"""Domain rule violations, raised by pure code and turned into ARM errors by the API layer."""

from __future__ import annotations


class FieldError(ValueError):
    """A value that breaks a rule, with the ARM field path it sits at (``properties.action.request.uri``)."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem


class Conflict(Exception):
    """A request that is well-formed but conflicts with a quota, a plan limit or the resource's state."""
