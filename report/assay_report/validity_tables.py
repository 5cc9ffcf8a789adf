"""The "Judge validity" section as titled tables (one drawing for the report and the viewer)."""

from __future__ import annotations

import math
from typing import Any

from .statistics import ControlRate, CorrectedPassShare
from .table import Table
from .terminal_table import pct
from .validity import JudgeValidity

__all__ = ["corrected_cell", "interval", "validity_tables"]

_RATE = [
    "judge",
    "variant",
    "measure",
    "estimate",
    "ci_low",
    "ci_high",
    "n_right",
    "n_runs",
    "n_tasks",
    "n_near_anchor",
]


def interval(lo: float, hi: float) -> str:
    """A share's interval in whole percents, never printed as one point."""
    if math.isnan(lo) or math.isnan(hi):
        return "–"
    a, b = 100 * lo, 100 * hi
    digits = 0 if round(a) != round(b) else 1
    return f"[{a:.{digits}f}, {b:.{digits}f}]"


def corrected_cell(r: CorrectedPassShare) -> str:
    """The corrected share, its unclipped value beside a clipped one, and its interval."""
    if math.isnan(r.unclipped):
        return "undefined"
    value = pct(r.estimate)
    if r.unclipped != r.estimate:
        value = f"{100 * r.unclipped:.0f}% → {value}"
    if r.unbounded:
        return f"{value}, not estimable (unbounded)"
    return f"{value} {interval(r.ci_low, r.ci_high)}"


def _rates(rows: tuple[ControlRate, ...]) -> list[dict[str, Any]]:
    return [
        {
            **r.model_dump(),
            "judge": r.judge_id if r.judge_id is not None else "jury (mean run score)",
            "variant": r.variant if r.variant is not None else "all",
        }
        for r in rows
    ]


def validity_tables(v: JudgeValidity) -> list[Table]:
    """The section's tables, in order; empty ones are left out of the page."""
    corrected = [
        {
            **r.model_dump(),
            "judge": r.judge_id if r.judge_id is not None else "jury (mean)",
            "corrected": corrected_cell(r),
        }
        for r in v.corrected_pass_shares
    ]
    humans = [{**r.model_dump(), "subject": r.subject or r.subject_kind} for r in v.human_agreement]
    bias = [
        {
            **r.model_dump(),
            "subject": r.subject or r.subject_kind,
            "dimension": r.dimension or "run score",
        }
        for r in v.human_bias
    ]
    kinds: dict[str, list[str]] = {}
    for w in v.warnings:
        kinds.setdefault(w.kind, []).append(w.message)
    warnings = [
        {"kind": k, "count": len(m), "first": m[0]} for k, m in kinds.items()
    ]  # the JSON report lists every one
    listed = [
        (
            "Validity warnings (by kind; the JSON report lists each)",
            warnings,
            ["kind", "count", "first"],
        ),
        (
            "Judges on control runs (sensitivity: known-good passed; specificity: known-bad failed)",
            _rates(v.control_rates),
            _RATE,
        ),
        ("Rule checks on control runs", _rates(v.rule_rates), _RATE),
        (
            "Pass share corrected for the judges' error rates on the controls in the agent's family's style (Rogan–Gladen; Lang–Reiczigel interval; at_lowest/highest_specificity: under the lowest and highest per-variant specificity)",
            corrected,
            [
                "agent_id",
                "judge",
                "raw_share",
                "raw_ci_low",
                "raw_ci_high",
                "corrected",
                "unclipped",
                "estimate",
                "ci_low",
                "ci_high",
                "unbounded",
                "sensitivity",
                "specificity",
                "at_lowest_specificity",
                "at_highest_specificity",
                "n_tasks",
                "n_runs",
                "n_near_anchor",
            ],
        ),
        (
            "Agreement with human verdicts (agents' runs and control runs apart)",
            humans,
            [
                "subject_kind",
                "subject",
                "runs",
                "subject_pass_share",
                "human_pass_share",
                "kappa",
                "pabak",
                "kappa_low",
                "kappa_high",
                "weighted_kappa",
                "weighted_kappa_low",
                "weighted_kappa_high",
                "spearman",
                "spearman_low",
                "spearman_high",
                "both_pass",
                "subject_only_pass",
                "human_only_pass",
                "both_fail",
                "n_runs",
                "n_tasks",
            ],
        ),
        (
            "Bias against human verdicts (subject − human)",
            bias,
            [
                "subject_kind",
                "subject",
                "runs",
                "dimension",
                "estimate",
                "ci_low",
                "ci_high",
                "n_runs",
                "n_tasks",
            ],
        ),
    ]
    return [Table(title, rows, cols) for title, rows, cols in listed]
