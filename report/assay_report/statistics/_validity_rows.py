"""Row models, input schemas, thresholds and definitions of the judge-validity statistics.

These measure the measuring instrument: how often a judge (or the jury's mean) gets
known-good and known-bad control runs right, how it agrees with human reviewers, and
what an agent's pass share becomes once corrected for those error rates. Their
definitions (``VALIDITY_DEFINITIONS``) join ``DEFINITIONS`` in a report that shows the
Judge validity section.
"""

from __future__ import annotations

from typing import Literal

from ._rows import Row

__all__ = [
    "BINS",
    "CONTROLS_SCHEMA",
    "EXTREME_PREVALENCE",
    "FRAGILE_BAND",
    "FRAGILE_SHARE",
    "HETEROGENEITY_P",
    "HETEROGENEITY_RANGE",
    "MAX_HALF_WIDTH",
    "MIN_HUMAN_RUNS",
    "MIN_HUMAN_TASKS",
    "RATER_SCHEMA",
    "SCORED_RUNS_SCHEMA",
    "VALIDITY_DEFINITIONS",
    "ControlRate",
    "CorrectedPassShare",
    "HumanAgreement",
    "HumanBias",
    "RunKind",
]

CONTROLS_SCHEMA = {
    "task_id": "str",
    "run_id": "str",
    "judge_id": "str",
    "variant": "str",
    "expected": "str",
    "score": "float",
}
"""Control verdicts, one row per control run × judge: ``score`` is that judge's run score
(0-10), ``expected`` is "pass" (a known-good control) or "fail" (known-bad), ``variant``
names the control kind (e.g. "reference", "altered_numbers"); one variant, one expected."""
SCORED_RUNS_SCHEMA = {"task_id": "str", "run_id": "str", "agent_id": "str", "score": "float"}
"""An agent's scored runs, one row per run: ``score`` is the run score (0-10) of the judge
(or the jury's mean) whose error rates correct the pass share."""
RATER_SCHEMA = {
    "task_id": "str",
    "run_id": "str",
    "rater_id": "str",
    "dimension": "str",
    "score": "float",
}
"""Ratings of one kind of rater (LLM judges, or humans), one row per run × rater ×
dimension (× sample: repeated rows are averaged)."""

BINS = 11
"""Quadratic-weighted κ compares run scores binned to the integers 0-10 (half up)."""
MAX_HALF_WIDTH = 0.15
"""A sensitivity or specificity whose interval is wider than twice this is too uncertain
to correct with (``few_controls``)."""
HETEROGENEITY_P = 0.05
"""Variants' specificities differ when Fisher's exact test (two variants) or the χ² test
(more) gives a p-value below this ..."""
HETEROGENEITY_RANGE = 0.3
"""... or when the highest and lowest differ by more than this."""
FRAGILE_BAND = 0.25
"""Run scores within this many points of the anchor pass or fail on a hair."""
FRAGILE_SHARE = 0.5
"""At least this share of runs within ``FRAGILE_BAND`` of the anchor makes a rate
``threshold_fragile`` (a third of integer scores 8-10 sit on the anchor itself, which
is the scale's nature, not fragility)."""
MIN_HUMAN_RUNS = 20
"""Below this many runs graded by both sides, agreement with humans is too uncertain."""
MIN_HUMAN_TASKS = 5
"""Below this many tasks with paired verdicts the task bootstrap is not trustworthy."""
EXTREME_PREVALENCE = 0.2
"""A pass share below this (or above 1 minus it) on either side makes κ hard to read
alone (``kappa_prevalence``): PABAK is shown beside it."""

Measure = Literal["sensitivity", "specificity"]
SubjectKind = Literal["judge", "jury", "humans"]
RunKind = Literal["all", "agents", "controls"]
"""Which runs a human-agreement row covers: control runs are mostly known-bad, so κ over
agents' runs and over controls differ, and a pooled κ describes neither."""


class ControlRate(Row):
    """A judge's sensitivity or specificity on control runs, at the anchor."""

    judge_id: str | None
    """The judge, or None for the jury's mean run score."""
    variant: str | None
    """The control variant, or None for all controls of the measure's class."""
    measure: Measure
    """'sensitivity' (known-good passed) or 'specificity' (known-bad failed)."""
    estimate: float
    """Share of the controls judged right (pooled over runs); NaN without controls."""
    n_tasks: int
    n_runs: int
    n_right: int
    """Controls judged right: known-good at or above the anchor, known-bad below it."""
    n_near_anchor: int
    """Controls whose score lies within ``FRAGILE_BAND`` points of the anchor."""
    se: float
    """Cluster-robust (CR1) standard error over tasks."""
    ci_low: float
    """Lower bound of the hull of the task bootstrap's percentile interval and Wilson's
    interval at n_right of n_runs (Clopper–Pearson's at 0 or n)."""
    ci_high: float
    """Upper bound of that hull."""


class CorrectedPassShare(Row):
    """An agent's pass share corrected for the judge's error rates (Rogan–Gladen)."""

    agent_id: str
    judge_id: str | None
    """The judge whose scores and error rates are used, or None for the jury's mean."""
    raw_share: float
    """Mean over tasks of the share of the task's runs at or above the anchor (q)."""
    raw_ci_low: float
    """Hull of the task bootstrap's interval and Wilson's at q·n_runs of n_runs."""
    raw_ci_high: float
    sensitivity: float
    """Se on the controls in the agent's family's style (those that wore one of its
    agents); NaN when none of them was known-good."""
    specificity: float
    """Sp on the same controls; NaN when none of them was known-bad."""
    unclipped: float
    """(q + Sp − 1)/(Se + Sp − 1) before clipping; NaN when Se + Sp ≤ 1."""
    estimate: float
    """The corrected share, clipped to [0, 1]."""
    ci_low: float
    """Lang–Reiczigel lower bound (q, Se, Sp at their effective sample sizes); 0 when
    unbounded."""
    ci_high: float
    """Lang–Reiczigel upper bound; 1 when unbounded."""
    unbounded: bool
    """The Se/Sp evidence allows Se + Sp ≤ 1 at the report's confidence: not estimable."""
    n_tasks: int
    n_runs: int
    n_near_anchor: int
    """The agent's runs whose score lies within ``FRAGILE_BAND`` points of the anchor."""
    lowest_variant_specificity: float
    """The judge's lowest specificity over known-bad variants (NaN without any)."""
    highest_variant_specificity: float
    at_lowest_specificity: float
    """The corrected share (clipped) under the lowest per-variant specificity; NaN where
    Se + Sp ≤ 1 there."""
    at_highest_specificity: float
    """The corrected share (clipped) under the highest per-variant specificity."""


class HumanAgreement(Row):
    """Agreement of a judge, the jury's mean, or a second human with human verdicts."""

    subject_kind: SubjectKind
    """'judge', 'jury' (mean run score over judges) or 'humans' (human against human)."""
    subject: str
    """The judge id; '' for the jury and for human-human rows."""
    runs: RunKind = "all"
    """The runs the pairs come from: agents' runs, control runs, or all."""
    n_tasks: int
    n_runs: int
    """Verdict pairs (run × human, or run × pair of humans)."""
    subject_pass_share: float
    """Share of the pairs the subject passes (at the anchor)."""
    human_pass_share: float
    """Share of the pairs the human passes."""
    kappa: float
    """Cohen's κ on pass/fail at the anchor; NaN when only one class occurs."""
    pabak: float
    """Prevalence- and bias-adjusted κ, 2·(observed agreement) − 1: read it beside κ when
    one class is rare, where κ is low even for close agreement."""
    kappa_low: float
    kappa_high: float
    weighted_kappa: float
    """Quadratic-weighted Cohen's κ on run scores binned to the integers 0-10."""
    weighted_kappa_low: float
    weighted_kappa_high: float
    spearman: float
    """Spearman's rank correlation of the run scores (midranks for ties)."""
    spearman_low: float
    spearman_high: float
    both_pass: int
    """Confusion matrix: subject passes and human passes."""
    subject_only_pass: int
    """Subject passes, human fails (a false pass when the human is right)."""
    human_only_pass: int
    """Subject fails, human passes (a false fail)."""
    both_fail: int


class HumanBias(Row):
    """Mean difference subject − human of scores, on one dimension or on the run score."""

    subject_kind: SubjectKind
    subject: str
    runs: RunKind = "all"
    """The runs the pairs come from: agents' runs, control runs, or all."""
    dimension: str | None
    """Dimension key, or None for the run score (mean of all ratings)."""
    n_runs: int
    """Verdict pairs behind the figure."""
    n_tasks: int
    estimate: float
    """Mean over verdict pairs of subject score − human score (first − second for humans)."""
    se: float
    """Cluster-robust (CR1) standard error over tasks."""
    ci_low: float
    ci_high: float


VALIDITY_DEFINITIONS: dict[str, str] = {
    "control_rates": (
        "Sensitivity Se = share of known-good control runs whose run score is at or above "
        "the anchor; specificity Sp = share of known-bad control runs below it; pooled over "
        "runs, per judge, per rule check and for the jury's mean run score, overall and per "
        "variant. Interval: the hull of the percentile task bootstrap (seeded) and Wilson's "
        "score interval at the counts (Clopper–Pearson's exact one at 0 or n), so it is never "
        "narrower than the counts allow, nor than the tasks' disagreement shows."
    ),
    "corrected_pass_shares": (
        "Rogan–Gladen: p = (q + Sp − 1)/(Se + Sp − 1), q the raw pass share (mean over tasks "
        "of the task's share of runs at or above the anchor), Se and Sp those of the controls "
        "in the agent's family's style (a control answers in the house style of the agent it "
        "wears; a judge that favours a family's style passes its work more often), clipped to [0, 1] (the "
        "unclipped value is shown beside a clipped one); undefined when Se + Sp ≤ 1. "
        "Interval: Lang & Reiczigel (2014), a Wald interval on counts with z²/2 passes and "
        "fails added to q and one right and one wrong to Se and Sp, shifted for skew; each of "
        "q, Se, Sp enters at its effective sample size, n divided by the task-clustering "
        "design effect (CR1 variance over binomial variance, at least 1). Not estimable "
        "(unbounded) when the interval of Se + Sp − 1 reaches 0. The raw share's interval is "
        "the hull of the task bootstrap and Wilson's. The correction assumes the controls "
        "represent the agents' good and bad work (the same mix of kinds of bad work as the "
        "known-bad variants), and that the judge's errors depend only on the run's true "
        "class, not on the agent; when an agent's raw share reaches Se, every run is taken "
        "for good, a conclusion the controls cannot carry."
    ),
    "human_agreement": (
        "Each judge's (and the jury's mean) run score paired with each human's run score of "
        "the same run; human-human pairs are every two humans who graded the same run. "
        "Agents' runs and control runs (mostly known-bad) are measured apart, each with both "
        "sides' pass shares. Cohen's κ on pass/fail at the anchor, with PABAK = 2·(observed "
        "agreement) − 1 beside it (κ is low when one class is rare, however close the "
        "agreement); quadratic-weighted κ on scores binned to the "
        "integers 0-10 (half up), weights (i−j)²/100; Spearman's ρ on the run scores; "
        "intervals from a task bootstrap (duplicated tasks keep all their pairs)."
    ),
    "human_bias": (
        "Mean over verdict pairs of the subject's minus the human's score, per dimension "
        "and for the run score; interval and CR1 standard error over tasks."
    ),
    "validity_warnings": (
        f"few_controls: a Se/Sp interval wider than ±{MAX_HALF_WIDTH}; boundary_interval: a "
        "Se/Sp at 0 or n, whose interval is Clopper–Pearson's (no task bootstrap can vary it); "
        f"threshold_fragile: at least {FRAGILE_SHARE:.0%} of the runs behind a rate score "
        f"within ±{FRAGILE_BAND} of the anchor; specificity_heterogeneous: the known-bad "
        f"variants' specificities differ (Fisher's exact or χ² test p < {HETEROGENEITY_P}, or "
        f"a range over {HETEROGENEITY_RANGE}), with each corrected share under the lowest and "
        "the highest; these apply to rule checks as to judges. few_human_verdicts: fewer than "
        f"{MIN_HUMAN_RUNS} verdict pairs or {MIN_HUMAN_TASKS} tasks; kappa_undefined: one "
        f"class only; kappa_prevalence: a side's pass share below {EXTREME_PREVALENCE} or "
        f"above {1 - EXTREME_PREVALENCE:.1f} (read PABAK); correction_undefined: Se + Sp ≤ 1 or a class without controls; "
        "correction_clipped: the corrected share fell outside [0, 1]; correction_unbounded: "
        "the Se/Sp evidence allows Se + Sp ≤ 1, so the corrected share is not estimable; "
        "raw_share_at_sensitivity: an agent's raw share reaches the known-good sensitivity."
    ),
}
