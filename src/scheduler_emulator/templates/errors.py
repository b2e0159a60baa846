"""The template language's one error: what ARM answers ``InvalidTemplate`` (or ``InvalidTemplateParameter``…)
for, with the template path it sits at."""

from __future__ import annotations


class TemplateError(ValueError):
    """A template, parameter or expression ARM would refuse; ``target``: where (``resources[0].name``)."""

    def __init__(self, message: str, target: str | None = None, code: str = "InvalidTemplate") -> None:
        super().__init__(message)
        self.message = message
        self.target = target
        self.code = code

    def at(self, target: str) -> TemplateError:
        """This error, placed at ``target`` when it has no place yet."""
        if self.target is None:
            self.target = target
            self.message = f"{self.message} (at '{target}')"
        return self


class NeedsDeployment(Exception):
    """Raised by a lookup that cannot answer before resources are deployed (``reference()`` at preflight):
    the value is computed when the resource deploys."""
