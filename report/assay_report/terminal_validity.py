"""The "Judge validity" section of the terminal report."""

from __future__ import annotations

import math

from rich.console import Console

from .statistics import ControlRate, CorrectedPassShare
from .statistics._validity_rows import Measure
from .terminal_table import ci, pct, print_table
from .validity import JudgeValidity
from .validity_tables import corrected_cell
from .validity_tables import interval as _interval

__all__ = ["print_validity"]

MEASURES: tuple[Measure, ...] = ("sensitivity", "specificity")
_TITLES = {
    "sensitivity": "sensitivity (known-good passed)",
    "specificity": "specificity (known-bad failed)",
}


def _name(judge_id: str | None) -> str:
    return judge_id if judge_id is not None else "jury (mean)"


def _measure(rates: tuple[ControlRate, ...], measure: Measure) -> list[list[str]]:
    """One row per judge and variant ('all' first): the share, its interval, the counts."""
    rows = []
    for r in rates:
        if r.measure != measure:
            continue
        rows.append(
            [
                _name(r.judge_id),
                r.variant or "all",
                pct(r.estimate),
                _interval(r.ci_low, r.ci_high),
                f"{r.n_right}/{r.n_runs}",
            ]
        )
    return rows


def _undefined(x: float) -> str:
    return "undefined" if math.isnan(x) else pct(x)


def _variant_range(r: CorrectedPassShare) -> str:
    return f"{_undefined(r.at_lowest_specificity)} to {_undefined(r.at_highest_specificity)}"


def _rates(c: Console, what: str, rates: tuple[ControlRate, ...], level: str) -> None:
    for m in MEASURES:
        print_table(
            c,
            f"{what}: {_TITLES[m]}, {level} CI",
            ["judge", "variant", "share", "CI %", "right"],
            _measure(rates, m),
        )


def _corrected(c: Console, rows: tuple[CorrectedPassShare, ...], level: str) -> None:
    """One table per judge (and the jury): raw and corrected share side by side."""
    for judge in dict.fromkeys(r.judge_id for r in rows):
        mine = [r for r in rows if r.judge_id == judge]
        print_table(
            c,
            f"Pass share corrected for {_name(judge)}'s error rates on the controls in the "
            f"agent's family's style (Rogan–Gladen; "
            f"{level} CI: raw Wilson/bootstrap, corrected Lang–Reiczigel)",
            ["agent", "raw", "CI %", "corrected [CI %]"],
            [
                [
                    r.agent_id,
                    pct(r.raw_share),
                    _interval(r.raw_ci_low, r.raw_ci_high),
                    corrected_cell(r),
                ]
                for r in mine
            ],
        )
    print_table(
        c,
        "Corrected pass share under the lowest and highest per-variant specificity",
        ["agent", "judge", "range"],
        [
            [r.agent_id, _name(r.judge_id), _variant_range(r)]
            for r in rows
            if not math.isnan(r.lowest_variant_specificity)
            and not math.isnan(r.unclipped)
            and r.lowest_variant_specificity != r.highest_variant_specificity
        ],
    )


def print_validity(v: JudgeValidity | None, c: Console, confidence: float = 0.95) -> None:
    """Controls' error rates per judge and rule check, corrected pass shares, humans; one
    table per measure, so no interval sits under another measure's heading."""
    if v is None:
        return
    c.print(
        f"[bold]Judge validity[/bold]: {v.n_control_runs} control run(s) judged blind "
        "(sensitivity: known-good passed; specificity: known-bad failed)"
    )
    # One line per kind of warning (the HTML and JSON list every one).
    kinds: dict[str, list[str]] = {}
    for w in v.warnings:
        kinds.setdefault(w.kind, []).append(w.message)
    for kind, messages in kinds.items():
        more = f" (and {len(messages) - 1} more like it)" if len(messages) > 1 else ""
        c.print(f"  warning ({kind}): {messages[0]}{more}", highlight=False)
    level = f"{100 * confidence:.0f}%"
    _rates(c, "Judges on control runs", v.control_rates, level)
    _rates(c, "Rule checks on control runs", v.rule_rates, level)
    _corrected(c, v.corrected_pass_shares, level)
    print_table(
        c,
        "Agreement with human verdicts (pass shares: subject / human)",
        ["subject", "runs", "κ", "CI", "PABAK", "pass shares", "pairs"],
        [
            [
                r.subject or r.subject_kind,
                r.runs,
                f"{r.kappa:.2f}",
                ci(r.kappa_low, r.kappa_high),
                f"{r.pabak:.2f}",
                f"{pct(r.subject_pass_share)} / {pct(r.human_pass_share)}",
                str(r.n_runs),
            ]
            for r in v.human_agreement
        ],
    )
