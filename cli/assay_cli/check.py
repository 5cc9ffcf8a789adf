"""How `assay check` and the end of `assay run` print the log's invariants (the check itself
is the aggregator's: `assay_aggregator.check`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console

from assay_aggregator.check import CheckResult, check_stream

if TYPE_CHECKING:
    from assay_aggregator.invariants import Breach

__all__ = ["CheckResult", "check_stream", "print_breaches"]


def print_breaches(breaches: list[Breach], console: Console) -> None:
    """Each breach on its own line, its kind first."""
    for b in breaches:
        console.print(f"[red]{b.kind}[/red] {b.detail}", highlight=False, soft_wrap=True)
