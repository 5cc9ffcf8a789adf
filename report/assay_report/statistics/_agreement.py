"""Inter-judge agreement on run scores: Krippendorff's alpha, ICC(2,1), ICC(2,k), correlations.

The unit is a run and a judge's value is its run score (mean of its ratings of the
run). Alpha uses every run with at least two judges (it handles missing values); ICC
and the correlation matrices need a complete runs × judges matrix and use the runs
every judge of the panel scored. A flaky judge with a single verdict would make them
all NaN (or rest them on a handful of runs), so a judge that scored few runs is left
out of that panel while it has fewer than ``MIN_COMPLETE_RUNS`` complete runs (see
:func:`judge_panel`); the warnings name it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ._context import Context
from ._panel import F64
from ._results import JudgeAgreement, JudgeCorrelation

__all__ = [
    "MIN_COMPLETE_RUNS",
    "JudgePanel",
    "agreement_rows",
    "correlation_rows",
    "icc2",
    "judge_panel",
    "krippendorff_alpha_interval",
]

_NAN = float("nan")

MIN_COMPLETE_RUNS = 10
"""Below this many runs scored by every judge, a judge that scored few runs is left out."""


@dataclass(frozen=True)
class JudgePanel:
    """The judges ICC, k_eff and the correlations use, and those left out (in order)."""

    keep: npt.NDArray[np.bool_]
    """(J,) whether each judge is in the panel."""
    dropped: tuple[tuple[int, int], ...]
    """Judges left out, in order, each with the complete runs the panel had with it."""
    blocking: tuple[int, ...]
    """When no panel of two or more judges has 2 common runs: the judge that would have
    been left out first (the statistics stay undefined, on the whole panel)."""


def _n_complete(s: F64) -> int:
    return int((~np.isnan(s).any(axis=1)).sum())


def judge_panel(judge_score: F64) -> JudgePanel:
    """Leave out, one at a time, a judge that scored few runs while fewer than
    ``MIN_COMPLETE_RUNS`` runs are scored by every remaining judge.

    A judge may be left out only if that adds complete runs and it scored fewer than
    half the runs (a flaky judge), or if without that the statistics are undefined
    (fewer than 2 complete runs). Among those, the judge with the fewest scored runs
    goes first; ties go to the one whose removal leaves the most complete runs, then to
    the first in sorted order. A panel where every judge scored every run is untouched.
    If fewer than two judges would remain, nobody is left out and ``blocking`` names
    who stood in the way.
    """
    r_n, j_n = judge_score.shape
    keep = np.ones(j_n, dtype=bool)
    scored = (~np.isnan(judge_score)).sum(axis=0)
    dropped: list[tuple[int, int]] = []
    while keep.sum() >= 2:
        now = _n_complete(judge_score[:, keep])
        if now >= MIN_COMPLETE_RUNS:
            break
        options = []
        for j in np.flatnonzero(keep).tolist():
            rest = keep.copy()
            rest[j] = False
            after = _n_complete(judge_score[:, rest])
            if after > now and (now < 2 or 2 * scored[j] < r_n):
                options.append((int(scored[j]), -after, j))
        if not options:
            break
        worst = min(options)[2]
        keep[worst] = False
        dropped.append((worst, now))
    if keep.sum() < 2 <= j_n:
        return JudgePanel(np.ones(j_n, dtype=bool), (), (dropped[0][0],))
    return JudgePanel(keep, tuple(dropped), ())


def krippendorff_alpha_interval(values: F64) -> float:
    """Krippendorff's alpha, interval metric, for a units × coders matrix with NaN gaps.

    With ``m_u`` values in unit u, ``SS_u`` their sum of squared deviations from the
    unit mean, ``n = Σ m_u`` (units with m_u ≥ 2 only) and ``SS`` the sum of squared
    deviations of all those values from their grand mean:
    ``D_o = (2/n) Σ_u m_u SS_u / (m_u − 1)``, ``D_e = 2 SS / (n − 1)``, α = 1 − D_o/D_e.
    (These are the coincidence-matrix sums of squared differences in closed form.)
    """
    ok = ~np.isnan(values)
    m = ok.sum(axis=1)
    keep = m >= 2
    v, ok, m = values[keep], ok[keep], m[keep].astype(np.float64)
    n = m.sum()
    if n < 2:
        return _NAN
    x = np.where(ok, v, 0.0)
    unit_mean = x.sum(axis=1) / m
    ss_u = (np.where(ok, v - unit_mean[:, None], 0.0) ** 2).sum(axis=1)
    grand = x.sum() / n
    ss = (np.where(ok, v - grand, 0.0) ** 2).sum()
    if ss == 0:
        return _NAN
    d_o = 2.0 / n * (m * ss_u / (m - 1.0)).sum()
    d_e = 2.0 * ss / (n - 1.0)
    return float(1.0 - d_o / d_e)


def icc2(x: F64) -> tuple[float, float]:
    """ICC(2,1) and ICC(2,k) of a complete n × k matrix (Shrout & Fleiss 1979, case 2).

    Two-way random effects, absolute agreement, from the two-way ANOVA mean squares:
    ICC(2,1) = (MSR − MSE) / (MSR + (k−1)·MSE + k·(MSC − MSE)/n),
    ICC(2,k) = (MSR − MSE) / (MSR + (MSC − MSE)/n).
    """
    n, k = x.shape
    if n < 2 or k < 2:
        return _NAN, _NAN
    grand = x.mean()
    ssr = k * ((x.mean(axis=1) - grand) ** 2).sum()
    ssc = n * ((x.mean(axis=0) - grand) ** 2).sum()
    sse = ((x - grand) ** 2).sum() - ssr - ssc
    msr, msc, mse = ssr / (n - 1), ssc / (k - 1), sse / ((n - 1) * (k - 1))
    d1 = msr + (k - 1) * mse + k * (msc - mse) / n
    dk = msr + (msc - mse) / n
    one = (msr - mse) / d1 if d1 != 0 else _NAN
    many = (msr - mse) / dk if dk != 0 else _NAN
    return float(one), float(many)


def _corr(x: F64) -> F64:
    # A judge with constant scores has no defined correlation: NaN, not a warning.
    with np.errstate(invalid="ignore", divide="ignore"):
        c = x - x.mean(axis=0)
        s = np.sqrt((c**2).sum(axis=0))
        return np.asarray((c.T @ c) / np.outer(s, s), dtype=np.float64)


def _off_diagonal_mean(c: F64) -> float:
    k = c.shape[0]
    if k < 2:
        return _NAN
    return float(c[~np.eye(k, dtype=bool)].mean())


def _complete(ctx: Context) -> tuple[F64, npt.NDArray[np.bool_]]:
    """Runs × panel judges over the runs every panel judge scored, and the panel mask."""
    s = ctx.panel.judge_score
    keep = judge_panel(s).keep
    x = s[:, keep]
    return x[~np.isnan(x).any(axis=1)], keep


def agreement_rows(ctx: Context) -> list[JudgeAgreement]:
    """One agreement summary for the panel of judges (ICC and k_eff over :func:`judge_panel`)."""
    s = ctx.panel.judge_score
    x, keep = _complete(ctx)
    k = x.shape[1]
    one, many = icc2(x)
    enough = x.shape[0] >= 2 and k >= 2
    dev = _off_diagonal_mean(_corr(x - x.mean(axis=1, keepdims=True))) if enough else _NAN
    rbar = _off_diagonal_mean(_corr(x)) if enough else _NAN
    denom = 1.0 + (k - 1) * rbar
    return [
        JudgeAgreement(
            group=ctx.group,
            judges=tuple(ctx.panel.judge_ids),
            left_out=tuple(
                j for j, kept in zip(ctx.panel.judge_ids, keep, strict=True) if not kept
            ),
            n_runs=int(((~np.isnan(s)).sum(axis=1) >= 2).sum()),
            n_complete_runs=int(x.shape[0]),
            krippendorff_alpha=krippendorff_alpha_interval(s),
            icc2_1=one,
            icc2_k=many,
            mean_deviation_correlation=dev,
            deviation_baseline=-1.0 / (k - 1) if k >= 2 else _NAN,
            mean_score_correlation=rbar,
            k_eff=float(k / denom) if denom > 0 else _NAN,
        )
    ]


def correlation_rows(ctx: Context) -> list[JudgeCorrelation]:
    """Every pair of judges: correlation of deviations from the run mean and of scores.

    A pair with a judge left out of the panel (:func:`judge_panel`) is NaN on 0 runs.
    """
    x, keep = _complete(ctx)
    judges = ctx.panel.judge_ids
    j_n = len(judges)
    dev = np.full((j_n, j_n), np.nan)
    score = np.full((j_n, j_n), np.nan)
    n = np.zeros((j_n, j_n), dtype=np.int64)
    if x.shape[0] >= 2:
        inside = np.ix_(keep, keep)
        dev[inside] = _corr(x - x.mean(axis=1, keepdims=True))
        score[inside] = _corr(x)
    n[np.ix_(keep, keep)] = x.shape[0]
    return [
        JudgeCorrelation(
            group=ctx.group,
            judge_a=judges[i],
            judge_b=judges[j],
            deviation_correlation=float(dev[i, j]),
            score_correlation=float(score[i, j]),
            n_runs=int(n[i, j]),
        )
        for i in range(j_n)
        for j in range(i + 1, j_n)
    ]
