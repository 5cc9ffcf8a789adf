"""Rule evaluators that misbehave, run in the judge's worker process by the budget tests.

They live in an importable module (not a test file) because the worker process imports
its evaluator by name."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from assay_judge.rules.checks import RuleVerdict


def stuck(*, on_check: Callable[[str], None], **_: Any) -> RuleVerdict:
    """Starts a check named `stuck_check` and never finishes it (CPU-bound, as a bad
    pattern would be)."""
    on_check("stuck_check")
    while True:
        time.monotonic()


def crashing(*, on_check: Callable[[str], None], **_: Any) -> RuleVerdict:
    """A check that kills its own process."""
    import os

    on_check("crash_check")
    os._exit(3)


def slow_document(data: bytes, path: str) -> str:
    """A parser stuck on a hostile file, burning CPU (under the GIL, were it a thread)."""
    end = time.monotonic() + 5.0
    while time.monotonic() < end:
        sum(range(1000))
    return "late"
