"""Score intervals where the task bootstrap has no spread: what n tasks of one value carry.

A mean of task means whose tasks all have the same value c draws c in every resample, so
its percentile interval is [c, c]. What the data say is a count: n of n tasks at c, none
elsewhere. The share π of tasks departing from c is then at most Clopper–Pearson's upper
bound at 0 of n, 1 − (α/2)^(1/n); a departing task lies somewhere on the bounded scale
[L, U], so the mean μ = (1 − π)·c + π·m, m ∈ [L, U], lies in

    [c − π·(c − L), c + π·(U − c)].

This holds for any distribution on [L, U]: the interval can miss μ only when π exceeds
its exact bound, and n tasks agree on a value that so few tasks hold with probability
(1 − π)^n < α/2.
It uses only the count (n tasks, no spread) and the scale, never a variance the data do
not have; at one task it is nearly the whole scale. Intervals with any spread are left
exactly as the bootstrap gives them.
"""

from __future__ import annotations

import numpy as np

from ._bootstrap import B8, F64, Estimate
from ._proportions import Bounds, clopper_pearson

__all__ = [
    "DIFFERENCE_RANGE",
    "SAME",
    "SCORE_RANGE",
    "no_spread",
    "no_spread_bounds",
    "with_no_spread",
    "zero_width",
]

SCORE_RANGE = (0.0, 10.0)
"""Bounds of a run score, and of any mean of run scores (ratings are integers 0–10)."""
DIFFERENCE_RANGE = (-10.0, 10.0)
"""Bounds of a difference of two scores (communication gap, pairwise differences)."""


SAME = 1e-9
"""Score points within which two bootstrap bounds are one value. Sums of equal task means
differ by rounding (3.333… drawn eight times is not always 3.333… to the last bit), while
distinct means of integer ratings differ by far more than this."""


def zero_width(low: F64, high: F64) -> B8:
    """Whether bounds are one value up to rounding (NaN bounds are not)."""
    return np.asarray(np.abs(high - low) <= SAME)


def no_spread(est: Estimate) -> B8:
    """(K,) whether a column's bootstrap interval has zero width: every task informing
    it has the same value (NaN intervals, with no estimate, are not marked)."""
    return np.asarray(est.n_clusters > 0) & zero_width(est.low, est.high)


def no_spread_bounds(
    value: F64, n_tasks: F64, lower: float, upper: float, confidence: float
) -> Bounds:
    """``[c − π(c − L), c + π(U − c)]`` with π Clopper–Pearson's upper bound at 0 of n
    tasks, for a mean at ``value`` c on the scale ``[lower, upper]``; NaN at n = 0."""
    pi = clopper_pearson(np.zeros_like(n_tasks), n_tasks, confidence).high
    c = np.clip(value, lower, upper)
    return Bounds(c - pi * (c - lower), c + pi * (upper - c))


def with_no_spread(est: Estimate, lower: float, upper: float, confidence: float) -> Estimate:
    """The estimate with :func:`no_spread_bounds` where its bootstrap interval has zero
    width; every other column (and the draws, shared by ranks and differences) as is."""
    flat = no_spread(est)
    fallback = no_spread_bounds(
        est.estimate, est.n_clusters.astype(np.float64), lower, upper, confidence
    )
    return est._replace(
        low=np.where(flat, fallback.low, est.low), high=np.where(flat, fallback.high, est.high)
    )
