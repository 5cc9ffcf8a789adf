"""The "Judge validity" section as forest plots: each judge's, rule check's and the jury's
sensitivity and specificity with their intervals (per variant on demand), and each agent's
raw and corrected pass share as paired intervals."""

from __future__ import annotations

import math
from typing import NamedTuple

from .charts import Intervals, intervals
from .statistics import ControlRate, CorrectedPassShare
from .validity import JudgeValidity

__all__ = ["ValidityCharts", "validity_charts"]


class ValidityCharts(NamedTuple):
    """The section's pictures: shown first, and the per-variant one on demand."""

    shown: list[Intervals]
    per_variant: list[Intervals]


def _who(judge_id: str | None) -> str:
    return judge_id if judge_id is not None else "jury (mean)"


def _left(labels: list[str]) -> int:
    """Room for the longest label (about 7 px a character at the chart's font)."""
    return max(150, 16 + 7 * max(map(len, labels), default=0))


def _forest(rows: list[ControlRate], title: str, label: str) -> Intervals:
    labels = [label.format(judge=_who(r.judge_id), variant=r.variant) for r in rows]
    return intervals(
        labels,
        [r.estimate for r in rows],
        [r.ci_low for r in rows],
        [r.ci_high for r in rows],
        title=title,
        lo=0.0,
        hi=1.0,
        bars=False,
        left=_left(labels),
        note=[f"{r.n_right}/{r.n_runs}" for r in rows],
    )


def _paired(rows: tuple[CorrectedPassShare, ...]) -> Intervals:
    labels, values, lows, highs, notes = [], [], [], [], []
    for r in rows:
        who = f"{r.agent_id} · {_who(r.judge_id)}"
        labels += [f"{who} raw", f"{who} corrected"]
        values += [r.raw_share, r.estimate]
        lows += [r.raw_ci_low, r.ci_low]
        highs += [r.raw_ci_high, r.ci_high]
        corrected = "undefined" if math.isnan(r.unclipped) else "unbounded" if r.unbounded else ""
        notes += ["", corrected]
    return intervals(
        labels,
        values,
        lows,
        highs,
        bars=False,
        lo=0.0,
        hi=1.0,
        note=notes,
        left=_left(labels),
        title="Pass share: raw and corrected for each judge's error rates",
    )


def validity_charts(v: JudgeValidity) -> ValidityCharts:
    """Forest plots of the section (none for a measure without rows)."""
    rates = [*v.control_rates, *v.rule_rates]
    shown: list[Intervals] = []
    for measure in ("sensitivity", "specificity"):
        overall = [r for r in rates if r.measure == measure and r.variant is None]
        if overall:
            shown.append(
                _forest(
                    overall,
                    f"{measure.capitalize()} on control runs (dot: "
                    "estimate; whisker: interval; right: counts)",
                    "{judge}",
                )
            )
    if v.corrected_pass_shares:
        shown.append(_paired(v.corrected_pass_shares))
    variants = [r for r in rates if r.variant is not None and r.measure == "specificity"]
    per_variant = (
        [_forest(variants, "Specificity per known-bad variant", "{judge} · {variant}")]
        if variants
        else []
    )
    return ValidityCharts(shown, per_variant)
