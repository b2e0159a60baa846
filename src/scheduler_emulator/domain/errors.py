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


class NotFound(Exception):
    """The resource a request names does not exist (``kind`` as users say it: "job collection", "job")."""

    def __init__(self, kind: str, name: str) -> None:
        super().__init__(f"The {kind} '{name}' could not be found.")
        self.kind = kind
        self.name = name


class InvalidName(ValueError):
    """A new resource's name (or a part of its path) that cannot be stored."""


class TooLarge(ValueError):
    """A value larger than the store keeps (``what``: "job definition")."""

    def __init__(self, what: str, limit: int, actual: int) -> None:
        super().__init__(f"The {what} is {actual} characters long; at most {limit} are allowed.")
        self.what = what
        self.limit = limit
        self.actual = actual
