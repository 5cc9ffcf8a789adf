"""`assay audit` for people: the chain, the blobs, each verdict and the run's contribution.

Same layout rules as the report (`terminal.print_table`): tables where they fit, stacked
rows where they do not, so it reads at any width and in a log file.
"""

from __future__ import annotations

import math

from rich.console import Console
from rich.text import Text

from assay_report.terminal_table import print_table

from .audit import RunAudit, VerdictView

__all__ = ["print_audit"]


def _verdict(console: Console, v: VerdictView) -> None:
    scores = ", ".join(f"{k} {s}" for k, s in v.scores.items()) or "(no scores)"
    mean = "" if math.isnan(v.judge_score) else f" mean {v.judge_score:.2f}"
    lines = [f"{v.judge_id}#{v.sample} ({v.family} {v.model}){mean}: {scores}"]
    if v.tags:
        lines.append(f"  tags: {', '.join(v.tags)}")
    lines += [f"  check {n}: {'pass' if ok else 'FAIL'} {d}" for n, ok, d in v.checks]
    opened, cited = ", ".join(v.files_opened) or "-", ", ".join(v.files_cited) or "-"
    lines.append(f"  opened: {opened}; cited: {cited}")
    if v.cited_not_opened:
        lines.append(f"  cited but never opened: {', '.join(v.cited_not_opened)}")
    if v.opened_not_sealed:
        lines.append(f"  opened but not sealed: {', '.join(v.opened_not_sealed)}")
    if v.attempts > 1:
        kept = f"; rejected outputs in blob {v.rejected_outputs}" if v.rejected_outputs else ""
        lines.append(
            f"  repaired: {v.attempts} attempts, {v.attempts - 1} output(s) rejected{kept}"
        )
    if v.rationale:
        lines.append(f"  rationale: {v.rationale[:300]}")
    for line in lines:
        console.print(Text(line))


def print_audit(audit: RunAudit, console: Console) -> None:
    """Print everything `audit_run` found about one run."""
    console.print(
        Text(f"run {audit.run_id}", style="bold"),
        Text(f"campaign {audit.campaign_id}, task {audit.task_id}, agent {audit.agent_id}"),
    )
    if audit.refused:
        console.print(Text(f"REFUSED: this run counts in no figure: {audit.refused}", style="red"))
    chain = [
        [str(c.sequence), c.occurred_at, c.event_type, c.signer or "(not checked)", c.summary]
        for c in audit.chain
    ]
    print_table(
        console, "Event chain", ["seq", "time", "event", "signed by", "summary"], chain, keys=3
    )
    blobs = [
        [
            b.role,
            b.path,
            b.sha256[:16],
            str(b.size),
            b.status if b.status == "ok" else f"{b.status.upper()} {b.detail}",
        ]
        for b in audit.blobs
    ]
    print_table(
        console,
        "Blobs (re-hashed now)",
        ["role", "path", "sha256", "bytes", "status"],
        blobs,
        keys=2,
    )
    for v in audit.verdicts:
        _verdict(console, v)
    for f in audit.failures:
        console.print(Text(f"judgment failed {f}"))
    c = audit.contribution
    if c.scored:
        per = ", ".join(f"{j} {s:.2f}" for j, s in c.judge_scores.items())
        verdict = "PASS" if c.passed else "FAIL"
        line = f"contribution: run score {c.run_score:.3f} ({per}) → {verdict} at anchor {c.anchor}"
    else:
        why = "infrastructure failure (never scored)" if c.infrastructure_failure else "not scored"
        line = f"contribution: {why}"
    console.print(Text(line))
    console.print(Text(f"tags: {', '.join(f'{t} ×{n}' for t, n in c.tags.items()) or 'none'}"))
