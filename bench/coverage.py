"""Coverage of the judge-validity intervals over simulated campaigns with planted truths.

Each campaign has T tasks; per task one known-good control, four known-bad controls and
one run of an agent whose true pass share is planted; a judge passes a good run with
probability Se and a bad one with 1 − Sp. The report's own interval functions (task
bootstrap hulled with Wilson/Clopper–Pearson for Se, Sp and the raw share;
Lang–Reiczigel at effective sample sizes for the corrected share) are applied to each
campaign, and a row gives the share of campaigns whose interval holds the planted value,
pooled over the planted settings (200 seeds each: 600 campaigns, a Monte Carlo error of
about ±0.9 points at 95%). Nominal 95%; the target is at least 93%. (At 1,000 seeds per
setting every kind covered 93.7-99.8% at 10 and 40 tasks.)
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from assay_report.statistics._bootstrap import ratio, resample_counts
from assay_report.statistics._proportions import effective_trials, lang_reiczigel, share_bounds
from bench.table import Row

__all__ = ["KINDS", "Planted", "bench_coverage", "coverage"]

CONFIDENCE = 0.95
TARGET = 0.93
TASKS = (8, 10, 40, 60)
KINDS = ("sensitivity", "specificity", "raw pass share", "corrected pass share")
BAD_PER_TASK = 4


class Planted(NamedTuple):
    """The truth behind a simulated campaign."""

    se: float
    sp: float
    share: float
    """The agent's true pass share (runs that are good)."""


SETTINGS = (Planted(0.9, 0.8, 0.3), Planted(0.8, 0.9, 0.6), Planted(0.95, 0.7, 0.5))


def _covers(lo: float, hi: float, truth: float) -> bool:
    return bool(lo <= truth <= hi)


def _campaign(rng: np.random.Generator, t: int, p: Planted, seed: int) -> list[bool]:
    """Whether each interval kind covers its planted value in one simulated campaign."""
    good = (rng.random(t) < p.se).astype(np.float64)  # known-good controls passed
    bad = (rng.random((t, BAD_PER_TASK)) >= 1 - p.sp).sum(axis=1).astype(np.float64)  # failed
    truly = rng.random(t) < p.share
    passed = np.where(truly, rng.random(t) < p.se, rng.random(t) < 1 - p.sp).astype(np.float64)
    num = np.column_stack([good, bad, passed])
    den = np.column_stack([np.ones(t), np.full(t, float(BAD_PER_TASK)), np.ones(t)])
    est = ratio(num, den, resample_counts(seed, 400, t), CONFIDENCE)
    k, n = num.sum(axis=0), den.sum(axis=0)
    low, high = share_bounds(est, k, n, CONFIDENCE)
    raw_truth = p.share * p.se + (1 - p.share) * (1 - p.sp)
    n_eff = effective_trials(est.estimate, n, est.se, est.n_clusters.astype(np.float64))
    e = est.estimate
    lr = lang_reiczigel(e[2:], n_eff[2:], e[:1], n_eff[:1], e[1:2], n_eff[1:2], CONFIDENCE)
    corrected = np.isnan(lr.low[0]) or _covers(lr.low[0], lr.high[0], p.share)
    return [
        _covers(low[0], high[0], p.se),
        _covers(low[1], high[1], p.sp),
        _covers(low[2], high[2], raw_truth),
        corrected,  # undefined (Se + Sp ≤ 1 observed) claims nothing, so it never misses
    ]


def coverage(n_tasks: int, planted: Planted, seeds: int = 200) -> dict[str, float]:
    """Share of ``seeds`` simulated campaigns whose interval holds the truth, per kind."""
    hits = np.zeros(len(KINDS))
    for seed in range(seeds):
        rng = np.random.default_rng([n_tasks, seed])
        hits += _campaign(rng, n_tasks, planted, seed)
    return dict(zip(KINDS, (hits / seeds).tolist(), strict=True))


def bench_coverage(seeds: int = 200) -> list[Row]:
    """One row per interval kind and task count: coverage pooled over ``SETTINGS``."""
    rows = []
    for t in TASKS:
        per = [coverage(t, planted, seeds) for planted in SETTINGS]
        rows += [
            Row(
                "coverage",
                f"{kind}, {t} tasks ({len(SETTINGS)}×{seeds} campaigns)",
                100 * float(np.mean([c[kind] for c in per])),
                "%",
                target=f">= {100 * TARGET:.0f}% at {100 * CONFIDENCE:.0f}% nominal",
            )
            for kind in KINDS
        ]
    return rows
