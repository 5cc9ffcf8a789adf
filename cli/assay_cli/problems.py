"""What did not go as planned in a campaign: infrastructure failures grouped by cause, and
whatever the log still owes. Shown in the terminal, the HTML and report.json by `assay run`.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from html import escape

from pydantic import BaseModel, ConfigDict
from rich.console import Console
from rich.table import Table

from assay_cli.progress import Progress
from assay_schemas import JudgmentFailed, RunFailed

__all__ = ["Cause", "Problems", "problems_of"]

_CLASS = re.compile(r"^([A-Z][\w.]*): ")
"""Events logged before `error_info` existed carry only `error`: `ClassName: message`."""


class Cause(BaseModel):
    """Failures that share a stage and an error class; the first message as the example."""

    model_config = ConfigDict(frozen=True)

    stage: str
    error_class: str
    first_message: str
    count: int


class Problems(BaseModel):
    """Infrastructure failures by cause and what is still pending; empty when all went well."""

    model_config = ConfigDict(frozen=True)

    causes: tuple[Cause, ...] = ()
    pending_runs: int = 0
    pending_verdicts: dict[str, int] = {}
    """judge id -> owed verdicts not given."""
    complete: bool = True

    @property
    def ok(self) -> bool:
        """Nothing failed for the platform's sake and nothing is missing."""
        return self.complete and not self.causes

    def lines(self) -> list[str]:
        """One line per pending item, for the terminal and the HTML."""
        out = []
        if self.pending_runs:
            out.append(f"{self.pending_runs} expected run(s) never ended")
        out += [f"{n} verdict(s) of {j} never came" for j, n in self.pending_verdicts.items()]
        return out

    def print(self, console: Console) -> None:
        """The problems as a table and lines (nothing when all went well)."""
        if self.ok:
            return
        console.print("\n[bold red]This campaign did not go as planned.[/bold red]")
        for line in self.lines():
            console.print(f"  [red]•[/red] {line}")
        if self.causes:
            table = Table(title="infrastructure failures by cause (never scored)")
            for column in ("stage", "error class", "first message", "count"):
                table.add_column(column, overflow="fold")
            for c in self.causes:
                table.add_row(c.stage, c.error_class, c.first_message, str(c.count))
            console.print(table)
            from assay.command import assay_command

            doctor = f"{assay_command()} doctor"
            console.print(f"run `{doctor}` to check this machine's prerequisites", highlight=False)

    def html(self) -> str:
        """An HTML section to put at the top of the report (empty when all went well)."""
        if self.ok:
            return ""
        items = "".join(f"<li>{escape(line)}</li>" for line in self.lines())
        rows = "".join(
            f"<tr><td>{escape(c.stage)}</td><td>{escape(c.error_class)}</td>"
            f"<td>{escape(c.first_message)}</td><td>{c.count}</td></tr>"
            for c in self.causes
        )
        table = (
            "<h3>Infrastructure failures by cause (never scored)</h3><table><tr><th>stage</th>"
            f"<th>error class</th><th>first message</th><th>count</th></tr>{rows}</table>"
            if rows
            else ""
        )
        return (
            '<section class="problems"><h2>This campaign did not go as planned</h2>'
            f"<ul>{items}</ul>{table}</section>"
        )


def _split(event: RunFailed | JudgmentFailed) -> tuple[str, str]:
    """Error class (or "") and message of a failure: structured, else parsed from old text."""
    if event.error_info is not None:
        return event.error_info.error_class or "", event.error_info.message
    error = event.error
    match = _CLASS.match(error)
    if match is None:
        return "", error
    return match.group(1), error[match.end() :]


def problems_of(progress: Progress) -> Problems:
    """Group the infrastructure failures on the log and count what is still owed."""
    grouped: dict[tuple[str, str], list[str]] = defaultdict(list)
    for failure in progress.failures.values():
        if failure.infrastructure:
            error_class, message = _split(failure)
            grouped[(failure.stage, error_class)].append(message)
    for judged in progress.judge_failures.values():
        if judged.infrastructure:
            error_class, message = _split(judged)
            grouped[("judge", error_class)].append(message)
    causes = tuple(
        Cause(stage=stage, error_class=cls or "-", first_message=messages[0], count=len(messages))
        for (stage, cls), messages in sorted(grouped.items(), key=lambda kv: -len(kv[1]))
    )
    pending = Counter(judge for _, judge, _ in progress.pending_verdicts())
    return Problems(
        causes=causes,
        pending_runs=len(progress.pending_runs()),
        pending_verdicts=dict(sorted(pending.items())),
        complete=progress.complete,
    )
