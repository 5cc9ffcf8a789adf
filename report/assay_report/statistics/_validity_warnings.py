"""Warnings on the validity figures: error rates too uncertain, at a boundary, on a hair
or differing by variant; too few human verdicts; undefined κ; a correction undefined,
clipped, unbounded or past its model. Computed from the rows themselves (which carry their counts and NaNs), in
the package's warning style; thresholds are in ``_validity_rows``."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

import numpy as np

from ._results import StatisticsWarning
from ._validity_rows import (
    EXTREME_PREVALENCE,
    FRAGILE_BAND,
    FRAGILE_SHARE,
    HETEROGENEITY_P,
    HETEROGENEITY_RANGE,
    MAX_HALF_WIDTH,
    MIN_HUMAN_RUNS,
    MIN_HUMAN_TASKS,
    ControlRate,
    CorrectedPassShare,
    HumanAgreement,
)
from ._warnings import _warn

__all__ = ["validity_warnings"]

_CORRECTED = ("corrected_pass_shares",)
_RATES = ("control_rates", "rule_rates", *_CORRECTED)
_HUMAN = ("human_agreement", "human_bias")


def _judge(judge_id: str | None) -> str:
    if judge_id is None:
        return "the jury's mean"
    return f"rule check {judge_id}" if judge_id.startswith("rules:") else f"judge {judge_id}"


def _which(r: ControlRate) -> str:
    return f"{r.measure} of {_judge(r.judge_id)}" + (
        f" on variant {r.variant}" if r.variant else ""
    )


def _pct(x: float) -> str:
    return "undefined" if math.isnan(x) else f"{100 * x:.0f}%"


def _controls(rows: Sequence[ControlRate]) -> list[StatisticsWarning]:
    out = []
    for r in rows:
        half = (r.ci_high - r.ci_low) / 2
        if r.n_runs == 0 or half > MAX_HALF_WIDTH:
            width = "no interval" if r.n_runs == 0 else f"an interval of ±{half:.2f}"
            out.append(
                _warn(
                    None,
                    "few_controls",
                    r.judge_id or "",
                    f"the {_which(r)} rests on "
                    f"{r.n_runs} control run(s) in {r.n_tasks} task(s): {width}, wider "
                    f"than ±{MAX_HALF_WIDTH}",
                    _RATES,
                )
            )
        if r.n_runs and r.n_right in (0, r.n_runs):
            out.append(
                _warn(
                    None,
                    "boundary_interval",
                    r.judge_id or "",
                    f"the {_which(r)} is "
                    f"{r.n_right}/{r.n_runs}: its interval [{_pct(r.ci_low)}, "
                    f"{_pct(r.ci_high)}] is Clopper–Pearson's, as no task bootstrap "
                    "can vary a count at 0 or n",
                    _RATES,
                )
            )
        if r.variant is None and r.n_runs and r.n_near_anchor / r.n_runs >= FRAGILE_SHARE:
            out.append(
                _warn(
                    None,
                    "threshold_fragile",
                    r.judge_id or "",
                    f"{r.n_near_anchor} "
                    f"of the {r.n_runs} controls behind the {_which(r)} "
                    f"({_pct(r.n_near_anchor / r.n_runs)}) score within "
                    f"±{FRAGILE_BAND} of the anchor: the rate hangs on a hair",
                    _RATES,
                )
            )
    return out


HETEROGENEITY_RESAMPLES = 9_999
"""Tables drawn (seeded: a report is its replay) for Fisher's test of more than two
variants where some expected count is under `CHI2_MIN_EXPECTED`."""
CHI2_MIN_EXPECTED = 5.0
"""The least expected count at which the χ² approximation is used (Cochran's rule)."""


def _heterogeneity_p(rates: Sequence[ControlRate]) -> float:
    """Right × variant: Fisher's exact test (two variants); with more, the χ² test where
    every expected count is at least `CHI2_MIN_EXPECTED`, else Fisher's test over tables
    drawn with the same margins. The χ² test alone read 1e-8 for 39 of 40 controls
    right and the one wrong the only control of its variant, where the exact p is 1/40
    (a bundled campaign, 2026-12-07)."""
    # Imported here: scipy.stats costs 0.6 s to import (a report imports no scipy), and only a
    # campaign whose controls come in variants gets here.
    from scipy.stats import (  # type: ignore[import-untyped]
        MonteCarloMethod,
        chi2_contingency,
        fisher_exact,
    )
    from scipy.stats.contingency import expected_freq  # type: ignore[import-untyped]

    table = np.array([[r.n_right, r.n_runs - r.n_right] for r in rates], dtype=np.int64)
    table = table[:, table.sum(axis=0) > 0]
    if table.shape[1] < 2:
        return 1.0  # every variant all right (or all wrong): nothing differs
    if len(rates) == 2:
        return float(fisher_exact(table).pvalue)
    if expected_freq(table).min() >= CHI2_MIN_EXPECTED:
        return float(chi2_contingency(table).pvalue)
    drawn = MonteCarloMethod(n_resamples=HETEROGENEITY_RESAMPLES, rng=np.random.default_rng(0))
    return float(fisher_exact(table, method=drawn).pvalue)


def _heterogeneous(
    rows: Sequence[ControlRate], corrected: Sequence[CorrectedPassShare]
) -> list[StatisticsWarning]:
    out = []
    judges = list(dict.fromkeys(r.judge_id for r in rows))
    for j in judges:
        mine = [
            r
            for r in rows
            if r.judge_id == j and r.variant and r.measure == "specificity" and r.n_runs
        ]
        if len(mine) < 2:
            continue
        p = _heterogeneity_p(mine)
        low, high = min(mine, key=lambda r: r.estimate), max(mine, key=lambda r: r.estimate)
        if p >= HETEROGENEITY_P and high.estimate - low.estimate <= HETEROGENEITY_RANGE:
            continue
        shares = "; ".join(
            f"agent {c.agent_id} {_pct(c.at_lowest_specificity)} to "
            f"{_pct(c.at_highest_specificity)}"
            for c in corrected
            if c.judge_id == j
        )
        under = (
            f"; the corrected pass shares under the lowest and highest: {shares}" if shares else ""
        )
        out.append(
            _warn(
                None,
                "specificity_heterogeneous",
                j or "",
                f"the specificity of "
                f"{_judge(j)} differs between variants (p = {p:.3g}): "
                f"{low.n_right}/{low.n_runs} on {low.variant}, {high.n_right}/"
                f"{high.n_runs} on {high.variant}; the pooled figure holds only if "
                f"agents' bad runs mix the variants as the controls do{under}",
                _RATES,
            )
        )
    return out


def _undefined(r: CorrectedPassShare, *, alone: bool) -> StatisticsWarning:
    """`alone`: the judge's correction is defined for other agents, so the warning names
    this one (its family's controls are not theirs)."""
    se, sp = r.sensitivity, r.specificity
    cause = (
        "there is no known-good control (no sensitivity)"
        if math.isnan(se)
        else "there is no known-bad control (no specificity)"
        if math.isnan(sp)
        else f"Se + Sp = {se:.3f} + {sp:.3f} ≤ 1: the judge's verdicts carry no "
        "information on the runs' quality"
    )
    return _warn(
        None,
        "correction_undefined",
        r.judge_id or "",
        f"the corrected pass share from {_judge(r.judge_id)} is undefined"
        + (f" for agent {r.agent_id}, from the controls in its family's style" if alone else "")
        + f": {cause}",
        _CORRECTED,
    )


def _correction(rows: Sequence[CorrectedPassShare]) -> list[StatisticsWarning]:
    out = []
    done: set[str | None] = set()
    # Each family is corrected by its own controls: where a judge's correction is defined
    # for some agents and not others, each undefined one is named.
    rated = Counter(r.judge_id for r in rows)
    undefined = Counter(r.judge_id for r in rows if math.isnan(r.unclipped))
    for r in rows:
        of = f"agent {r.agent_id}'s corrected pass share from {_judge(r.judge_id)}"
        if math.isnan(r.unclipped):
            alone = undefined[r.judge_id] < rated[r.judge_id]
            if alone or r.judge_id not in done:
                done.add(r.judge_id)
                out.append(_undefined(r, alone=alone))
            continue
        if not 0.0 <= r.unclipped <= 1.0:
            out.append(
                _warn(
                    None,
                    "correction_clipped",
                    r.agent_id,
                    f"{of} "
                    f"({_pct(r.unclipped)} → {_pct(r.estimate)}) lies outside [0, 1] "
                    "and is clipped: the raw share and the error rates disagree",
                    _CORRECTED,
                )
            )
        if r.unbounded:
            out.append(
                _warn(
                    None,
                    "correction_unbounded",
                    r.agent_id,
                    f"{of} is not "
                    f"estimable: Se + Sp = {r.sensitivity:.3f} + {r.specificity:.3f} "
                    "may be ≤ 1 at the report's confidence, so any share fits",
                    _CORRECTED,
                )
            )
        if r.raw_share >= r.sensitivity:
            out.append(
                _warn(
                    None,
                    "raw_share_at_sensitivity",
                    r.agent_id,
                    f"agent "
                    f"{r.agent_id}'s raw pass share ({_pct(r.raw_share)}) reaches the "
                    f"known-good sensitivity of {_judge(r.judge_id)} "
                    f"({_pct(r.sensitivity)}): the correction's model says every run "
                    "is good, more than the controls can tell",
                    _CORRECTED,
                )
            )
        if r.n_runs and r.n_near_anchor / r.n_runs >= FRAGILE_SHARE:
            out.append(
                _warn(
                    None,
                    "threshold_fragile",
                    r.agent_id,
                    f"{r.n_near_anchor} of "
                    f"agent {r.agent_id}'s {r.n_runs} runs scored by "
                    f"{_judge(r.judge_id)} ({_pct(r.n_near_anchor / r.n_runs)}) lie "
                    f"within ±{FRAGILE_BAND} of the anchor: its pass share hangs on a "
                    "hair",
                    _CORRECTED,
                )
            )
    return out


def _human(rows: Sequence[HumanAgreement]) -> list[StatisticsWarning]:
    out = []
    for r in rows:
        who = {
            "judge": f"judge {r.subject}",
            "jury": "the jury's mean",
            "humans": "human with human",
        }[r.subject_kind]
        who += {"all": "", "agents": " on agents' runs", "controls": " on control runs"}[r.runs]
        shares = (r.subject_pass_share, r.human_pass_share)
        if r.n_runs and not all(EXTREME_PREVALENCE <= x <= 1 - EXTREME_PREVALENCE for x in shares):
            out.append(
                _warn(
                    None,
                    "kappa_prevalence",
                    r.subject,
                    f"Cohen's κ of {who} "
                    f"({r.kappa:.2f}) comes with pass shares of {_pct(shares[0])} "
                    f"(subject) and {_pct(shares[1])} (human): one class is rare, so κ "
                    f"is low even for close agreement; PABAK is {r.pabak:.2f}",
                    ("human_agreement",),
                )
            )
        if r.n_runs < MIN_HUMAN_RUNS or r.n_tasks < MIN_HUMAN_TASKS:
            out.append(
                _warn(
                    None,
                    "few_human_verdicts",
                    r.subject,
                    f"agreement of {who} rests "
                    f"on {r.n_runs} verdict pair(s) in {r.n_tasks} task(s), fewer than "
                    f"{MIN_HUMAN_RUNS} pairs or {MIN_HUMAN_TASKS} tasks",
                    _HUMAN,
                )
            )
        if math.isnan(r.kappa) or math.isnan(r.weighted_kappa):
            out.append(
                _warn(
                    None,
                    "kappa_undefined",
                    r.subject,
                    f"Cohen's κ of {who} is "
                    "undefined: both sides give one class only (all pass or all "
                    "fail, or one score bin), so chance agreement is total",
                    ("human_agreement",),
                )
            )
    return out


def validity_warnings(
    control_rates: Sequence[ControlRate] = (),
    corrected: Sequence[CorrectedPassShare] = (),
    agreement: Sequence[HumanAgreement] = (),
) -> list[StatisticsWarning]:
    """Every warning the validity rows call for: error rates (judges' and rule checks'
    alike) first, then the correction, then humans."""
    rates = _controls(control_rates) + _heterogeneous(control_rates, corrected)
    return rates + _correction(corrected) + _human(agreement)
