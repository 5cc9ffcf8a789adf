"""Task patterns run by RE2: linear time whatever the agent's text, so a task cannot stall
a judge with a catastrophic regex (`(a+)+$`). Submit and judge compile the same way, so
what passes submit is exactly what the judge can run."""

from __future__ import annotations

from typing import Protocol

import re2

from assay_schemas import InvalidInput

__all__ = ["PatternError", "TaskPattern", "compile_pattern"]


class PatternError(InvalidInput):
    """A pattern RE2 cannot compile (syntax errors, backreferences, look-arounds)."""


class TaskMatch(Protocol):
    """The part of an RE2 match the checks use."""

    def group(self, index: int = 0) -> str | None:
        """A captured group (0: the whole match)."""


class TaskPattern(Protocol):
    """A compiled task pattern."""

    @property
    def groups(self) -> int:
        """Number of capturing groups."""

    def search(self, text: str) -> TaskMatch | None:
        """The first match in `text`, or None."""


def compile_pattern(pattern: str, *, ignore_case: bool = False) -> TaskPattern:
    """Compile `pattern` with RE2; PatternError says why it cannot be run."""
    options = re2.Options()
    options.log_errors = False  # the error is raised to the caller; no stray stderr lines
    options.case_sensitive = not ignore_case
    try:
        compiled: TaskPattern = re2.compile(pattern, options)
    except re2.error as e:
        reason = e.args[0] if e.args else e
        text = reason.decode(errors="replace") if isinstance(reason, bytes) else str(reason)
        raise PatternError(f"not a valid RE2 regex: {text}") from e
    return compiled
