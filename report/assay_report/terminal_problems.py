"""What did not go as planned, in the terminal: the problems' lines and their causes."""

from __future__ import annotations

from rich.console import Console

from assay_schemas import Problems

from .terminal_table import print_table

__all__ = ["MACHINE_STAGES", "print_problems"]


MACHINE_STAGES = frozenset({"sandbox"})
"""Stages whose infrastructure failures a check of this machine (`assay doctor`: the
sandbox runtime, bubblewrap, user namespaces, Docker, cgroups, disk) can explain; a run
that failed elsewhere (a web cache unread, a sandbox-manager gone) is not the machine's."""


def print_problems(problems: Problems, c: Console, *, doctor: str | None = None) -> None:
    """What did not go as planned, as lines and a table (nothing when all went well);
    `doctor`: the command that checks this machine, named under the infrastructure failures
    it can explain (`MACHINE_STAGES`)."""
    if problems.ok:
        return
    c.print("\n[bold red]This campaign did not go as planned.[/bold red]")
    for line in problems.lines():
        c.print(f"  [red]•[/red] {line}")
    print_table(
        c,
        "Infrastructure failures by cause (never scored)",
        ["stage", "error class", "first message", "count"],
        [[x.stage, x.error_class, x.first_message, str(x.count)] for x in problems.causes],
    )
    if doctor is not None and any(x.stage in MACHINE_STAGES for x in problems.causes):
        c.print(f"run `{doctor}` to check this machine's prerequisites", highlight=False)
