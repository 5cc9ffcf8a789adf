"""The "Judge validity" section as titled tables (one drawing for the report and the viewer)."""

from __future__ import annotations

from typing import Any

from .statistics import ControlRate
from .table import Table
from .validity import JudgeValidity

__all__ = ["validity_tables"]

_RATE = ["judge", "variant", "measure", "estimate", "ci_low", "ci_high", "n_right", "n_runs", "n_tasks"]  # fmt: skip


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
        {**r.model_dump(), "judge": r.judge_id if r.judge_id is not None else "jury (mean)"}
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
        ("Validity warnings (by kind; the JSON report lists each)", warnings, ["kind", "count", "first"]),
        ("Judges on control runs (sensitivity: known-good passed; specificity: known-bad failed)", _rates(v.control_rates), _RATE),
        ("Rule checks on control runs", _rates(v.rule_rates), _RATE),
        ("Pass share corrected for the judges' error rates (Rogan–Gladen)", corrected, ["agent_id", "judge", "raw_share", "raw_ci_low", "raw_ci_high", "estimate", "ci_low", "ci_high", "sensitivity", "specificity", "n_tasks", "n_runs"]),
        ("Agreement with human verdicts", humans, ["subject_kind", "subject", "kappa", "kappa_low", "kappa_high", "weighted_kappa", "weighted_kappa_low", "weighted_kappa_high", "spearman", "spearman_low", "spearman_high", "both_pass", "subject_only_pass", "human_only_pass", "both_fail", "n_runs", "n_tasks"]),
        ("Bias against human verdicts (subject − human)", bias, ["subject_kind", "subject", "dimension", "estimate", "ci_low", "ci_high", "n_runs", "n_tasks"]),
    ]  # fmt: skip
    return [Table(title, rows, cols) for title, rows, cols in listed]
