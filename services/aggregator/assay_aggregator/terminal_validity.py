"""The "Judge validity" section of the terminal report."""

from __future__ import annotations

from rich.console import Console

from .statistics import ControlRate
from .statistics._validity_rows import Measure
from .terminal_table import ci, pct, print_table
from .validity import JudgeValidity

__all__ = ["print_validity"]

MEASURES: tuple[Measure, ...] = ("sensitivity", "specificity")


def _by_judge(rates: tuple[ControlRate, ...]) -> tuple[list[str], list[list[str]]]:
    """One row per judge: Se and Sp over all controls, then Sp per known-bad variant."""
    variants = sorted({r.variant for r in rates if r.variant and r.measure == "specificity"})
    cell = {(r.judge_id, r.variant, r.measure): r for r in rates}
    judges = list(dict.fromkeys(r.judge_id for r in rates))
    rows = []
    for j in judges:
        row = [j if j is not None else "jury (mean)"]
        for measure in MEASURES:
            r = cell.get((j, None, measure))
            row += [pct(r.estimate), ci(100 * r.ci_low, 100 * r.ci_high, 0), f"{r.n_right}/{r.n_runs}"] if r else ["–", "–", "–"]  # fmt: skip
        for v in variants:
            r = cell.get((j, v, "specificity"))
            row.append(f"{pct(r.estimate)} ({r.n_right}/{r.n_runs})" if r else "–")
        rows.append(row)
    header = ["judge", "sensitivity", "CI %", "right", "specificity", "CI %", "right"]
    return [*header, *(f"Sp {v}" for v in variants)], rows


def print_validity(v: JudgeValidity | None, c: Console) -> None:
    """Controls' error rates per judge and rule check, corrected pass shares, humans."""
    if v is None:
        return
    c.print(f"[bold]Judge validity[/bold]: {v.n_control_runs} control run(s) judged blind "
            "(sensitivity: known-good passed; specificity: known-bad failed)")  # fmt: skip
    # One line per kind of warning (the HTML and JSON list every one).
    kinds: dict[str, list[str]] = {}
    for w in v.warnings:
        kinds.setdefault(w.kind, []).append(w.message)
    for kind, messages in kinds.items():
        more = f" (and {len(messages) - 1} more like it)" if len(messages) > 1 else ""
        c.print(f"  warning ({kind}): {messages[0]}{more}", highlight=False)
    header, rows = _by_judge(v.control_rates)
    print_table(c, "Judges on control runs", header, rows)
    header, rows = _by_judge(v.rule_rates)
    print_table(c, "Rule checks on control runs", header, rows)
    print_table(c, "Pass share corrected for the judge's error rates (Rogan–Gladen)",
                ["agent", "judge", "raw pass", "raw CI %", "corrected", "CI %"],
                [[r.agent_id, r.judge_id or "jury (mean)", pct(r.raw_share),
                  ci(100 * r.raw_ci_low, 100 * r.raw_ci_high, 0), pct(r.estimate),
                  ci(100 * r.ci_low, 100 * r.ci_high, 0)] for r in v.corrected_pass_shares])  # fmt: skip
    print_table(c, "Agreement with human verdicts", ["subject", "κ", "CI", "weighted κ", "Spearman", "pairs"],
                [[r.subject or r.subject_kind, f"{r.kappa:.2f}", ci(r.kappa_low, r.kappa_high),
                  f"{r.weighted_kappa:.2f}", f"{r.spearman:.2f}", str(r.n_runs)]
                 for r in v.human_agreement])  # fmt: skip
