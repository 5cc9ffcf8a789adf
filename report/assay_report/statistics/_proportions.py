"""Intervals for proportions that claim no more than their counts carry.

A task bootstrap of a share whose runs all agree (k = 0 or k = n in every task) has
zero width: every resample draws the same share. The binomial intervals do not: Wilson's
score interval, and Clopper–Pearson's exact one at 0 or n, where Wilson's is known to be
too short. Where runs are clustered in tasks the interval is the hull of the task
bootstrap and the binomial interval, so it is never narrower than Wilson's at the same
counts and still widens when tasks disagree.

The corrected pass share (Rogan–Gladen) gets Lang & Reiczigel's (2014) interval: an
adjusted Wald interval with pseudo-counts added to the raw share (z²/2 passes and fails)
and to Se and Sp (one right and one wrong each), and a shift for the skew the division
by Se + Sp − 1 brings. Counts enter through effective sample sizes, n / design effect,
so a share clustered in tasks carries no more information than its spread over tasks.
"""

from __future__ import annotations

from statistics import NormalDist
from typing import NamedTuple

import numpy as np

from ._bootstrap import B8, F64, Estimate, Interval

__all__ = [
    "Bounds",
    "CorrectedBounds",
    "binomial_interval",
    "clopper_pearson",
    "effective_trials",
    "hull",
    "lang_reiczigel",
    "share_bounds",
    "share_intervals",
    "wilson",
]


class Bounds(NamedTuple):
    """Lower and upper bounds, one per column."""

    low: F64
    high: F64


def _z(confidence: float) -> float:
    # The standard library's normal quantile (Wichura's AS241, within two units in the last
    # place of scipy's `ndtri`), not scipy: importing even scipy.special cost a report built
    # in a fresh process 0.1-0.25 s, and with Clopper-Pearson's bounds at 0 and n in closed
    # form (`_edge_bounds`) nothing else a report computes needs it.
    return NormalDist().inv_cdf(0.5 + confidence / 2.0)


def _arrays(k: F64 | float, n: F64 | float) -> tuple[F64, F64]:
    kk, nn = np.broadcast_arrays(np.asarray(k, dtype=np.float64), np.asarray(n, dtype=np.float64))
    return kk, nn


def wilson(k: F64 | float, n: F64 | float, confidence: float) -> Bounds:
    """Wilson's score interval for k successes in n trials; NaN where n = 0."""
    kk, nn = _arrays(k, n)
    z = _z(confidence)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = kk / nn
        centre = (p + z * z / (2 * nn)) / (1 + z * z / nn)
        half = z / (1 + z * z / nn) * np.sqrt(p * (1 - p) / nn + z * z / (4 * nn * nn))
    return Bounds(np.clip(centre - half, 0.0, 1.0), np.clip(centre + half, 0.0, 1.0))


def clopper_pearson(k: F64 | float, n: F64 | float, confidence: float) -> Bounds:
    """Clopper–Pearson's exact interval (beta quantiles); NaN where n = 0."""
    kk, nn = _arrays(k, n)
    inner = (kk > 0) & (kk < nn)
    if not inner.any():
        return _edge_bounds(kk, nn, confidence)
    from scipy.special import betaincinv  # type: ignore[import-untyped]  # `beta.ppf(q, a, b)`

    a = (1.0 - confidence) / 2.0
    with np.errstate(invalid="ignore", divide="ignore"):
        low = np.where(kk <= 0, 0.0, betaincinv(np.maximum(kk, 1e-300), nn - kk + 1, a))
        high = np.where(kk >= nn, 1.0, betaincinv(kk + 1, np.maximum(nn - kk, 1e-300), 1 - a))
    empty = ~(nn > 0)
    return Bounds(np.where(empty, np.nan, low), np.where(empty, np.nan, high))


def _edge_bounds(k: F64, n: F64, confidence: float) -> Bounds:
    """Clopper–Pearson's interval where every count is 0 or n, in closed form: Beta(1, n)
    and Beta(n, 1) have CDFs 1 − (1 − x)^n and x^n, so the bound at 0 of n is 1 − (α/2)^(1/n)
    and that at n of n is (α/2)^(1/n) (through expm1 and exp, exact where the root nears 1).
    The shares every report computes are of this kind (`binomial_interval` uses Wilson's
    inside), and none of them need scipy's incomplete-beta inverse."""
    log_a = np.log((1.0 - confidence) / 2.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        root = log_a / n
        low = np.where(k <= 0, 0.0, np.exp(root))
        high = np.where(k >= n, 1.0, -np.expm1(root))
    empty = ~(n > 0)
    return Bounds(np.where(empty, np.nan, low), np.where(empty, np.nan, high))


def binomial_interval(k: F64 | float, n: F64 | float, confidence: float) -> Bounds:
    """Wilson's interval, or Clopper–Pearson's where the count is at 0 or n."""
    kk, nn = _arrays(k, n)
    w, cp = wilson(kk, nn, confidence), _edge_bounds(kk, nn, confidence)
    edge = (kk <= 0) | (kk >= nn)
    return Bounds(np.where(edge, cp.low, w.low), np.where(edge, cp.high, w.high))


def at_boundary(k: F64 | float, n: F64 | float) -> B8:
    """Whether a count is at 0 or at n (with n > 0)."""
    kk, nn = _arrays(k, n)
    return np.asarray((nn > 0) & ((kk <= 0) | (kk >= nn)))


def hull(a: Bounds, b: Bounds) -> Bounds:
    """The smallest interval holding both (a NaN side is ignored)."""
    return Bounds(np.fmin(a.low, b.low), np.fmax(a.high, b.high))


def share_bounds(est: Estimate, k: F64, n: F64, confidence: float) -> Bounds:
    """The hull of the task bootstrap's interval and the binomial one at k of n."""
    return hull(Bounds(est.low, est.high), binomial_interval(k, n, confidence))


def share_intervals(est: Estimate, k: F64, n: F64, confidence: float) -> list[Interval]:
    """Per column: the CR1 standard error and :func:`share_bounds`, as rows name them."""
    low, high = share_bounds(est, k, n, confidence)
    return [
        Interval(se=float(est.se[c]), ci_low=float(low[c]), ci_high=float(high[c]))
        for c in range(len(low))
    ]


def effective_trials(share: F64, n: F64, se: F64, clusters: F64) -> F64:
    """n / design effect: the trials an independent sample would need for the clustered
    standard error ``se`` (CR1 over ``clusters`` tasks) of ``share``. The design effect is
    CR0's variance (CR1's without its G/(G−1) small-sample factor, so one trial per task
    costs nothing) over the binomial one, at least 1; 1 at a share of 0 or 1, where both
    variances are 0."""
    with np.errstate(invalid="ignore", divide="ignore"):
        cr0 = se * se * np.where(clusters > 1, (clusters - 1.0) / clusters, 1.0)
        binomial = share * (1.0 - share) / n
        deff = np.where(binomial > 0, cr0 / binomial, 1.0)
    deff = np.where(np.isfinite(deff), np.maximum(deff, 1.0), 1.0)
    return np.asarray(n / deff, dtype=np.float64)


class CorrectedBounds(NamedTuple):
    """Lang–Reiczigel bounds of a corrected share, and where they are not estimable."""

    low: F64
    high: F64
    unbounded: B8
    """The Se/Sp evidence allows Se + Sp ≤ 1 at this confidence: any share fits."""


def lang_reiczigel(
    q: F64, n_q: F64, se: F64, n_se: F64, sp: F64, n_sp: F64, confidence: float
) -> CorrectedBounds:
    """Lang & Reiczigel's (2014) interval for the true share behind a raw share ``q`` of
    ``n_q`` trials, judged with sensitivity ``se`` (of ``n_se`` known-good controls) and
    specificity ``sp`` (of ``n_sp`` known-bad controls); clipped to [0, 1]; NaN where the
    estimate itself is undefined (Se + Sp ≤ 1).

    Unbounded (and [0, 1]) where the lower confidence bound of the adjusted Youden index
    Se + Sp − 1 is not positive: there the correction can send the share anywhere."""
    # NaN inputs (no controls of a class) flow through to NaN bounds, masked below.
    with np.errstate(invalid="ignore", divide="ignore"):
        z = _z(confidence)
        n_q2, n_se2, n_sp2 = n_q + z * z, n_se + 2.0, n_sp + 2.0
        q2 = (q * n_q + z * z / 2.0) / n_q2
        se2 = (se * n_se + 1.0) / n_se2
        sp2 = (sp * n_sp + 1.0) / n_sp2
        youden = se2 + sp2 - 1.0
        v_se, v_sp = se2 * (1.0 - se2) / n_se2, sp2 * (1.0 - sp2) / n_sp2
        p = (q2 + sp2 - 1.0) / youden
        sd = np.sqrt(q2 * (1.0 - q2) / n_q2 + v_se * p * p + v_sp * (1.0 - p) ** 2) / np.abs(youden)
        shift = 2.0 * z * z * (p * v_se - (1.0 - p) * v_sp)
        unbounded = np.asarray(youden - z * np.sqrt(v_se + v_sp) <= 0.0)
        low = np.where(unbounded, 0.0, np.clip(p + shift - z * sd, 0.0, 1.0))
        high = np.where(unbounded, 1.0, np.clip(p + shift + z * sd, 0.0, 1.0))
        undefined = np.isnan(q) | ~(se + sp > 1.0)  # no Rogan–Gladen estimate: no interval
    return CorrectedBounds(
        np.where(undefined, np.nan, low), np.where(undefined, np.nan, high), unbounded & ~undefined
    )
