"""Anytime-valid confidence sequences for a bounded mean: the hedged betting construction.

A confidence sequence (CS) is a sequence of intervals ``C_1, C_2, ...`` with
``P(μ ∈ C_t for every t) ≥ 1 − α``: a campaign may look after every task and stop
whenever it likes, and the interval it stops on still holds ``μ`` with the stated
confidence. A bootstrap or normal interval promises that only at one fixed sample size;
peeking at it after every wave inflates its error well past α.

The construction is the hedged capital process of Waudby-Smith & Ramdas (2024),
"Estimating means of bounded random variables by betting", JRSS-B 86(1), §4 (Theorem 3,
the "hedged" CS with predictable plug-in bets, the default of their ``confseq`` package's
``hedged_cs``). For observations ``x_i ∈ [0, 1]`` and each candidate mean ``m``:

    K⁺_t(m) = ∏_{i≤t} (1 + λ⁺_i(m)(x_i − m)),   K⁻_t(m) = ∏_{i≤t} (1 − λ⁻_i(m)(x_i − m)),
    K_t(m) = max(θ K⁺_t(m), (1 − θ) K⁻_t(m)),    θ = 1/2,

with the predictable plug-in bet ``λ̇_i = sqrt(2 log(1/(αθ)) / (σ̂²_{i−1} i log(1 + i)))``
truncated to ``λ⁺_i(m) = min(λ̇_i, c/m)`` and ``λ⁻_i(m) = min(λ̇_i, c/(1 − m))``,
``c = 1/2``; ``σ̂²`` and ``μ̂`` are the running variance and mean regularized by one
fake observation at mean 1/2, variance 1/4. Under ``μ = m`` each of ``K⁺`` and ``K⁻`` is
a nonnegative martingale starting at 1 (each bet depends only on the past), so their
θ-mixture is too, and ``K_t(m) ≤ θK⁺ + (1−θ)K⁻``; by Ville's inequality
``P(∃t: K_t(μ) ≥ 1/α) ≤ α``. The CS is ``{m : K_t(m) < 1/α}``, found on a grid of
``m`` (the ends widened by one grid step, so a point between grid points is never
lost and no interval has zero width), then intersected over time (still valid: the
event that every ``C_t`` holds ``μ`` is unchanged).

The observations must arrive with conditional mean ``μ`` given the past: tasks drawn
in a random order from the suite (the task as the unit, one observation being a task's
mean over its runs once they are all scored, as the task bootstrap clusters).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from ._tables import StatisticsInputError

__all__ = [
    "BREAKS",
    "MIN_SEQUENCE_TASKS",
    "ConfidenceSequence",
    "SequentialInterval",
    "betting_bets",
    "hedged_capital",
    "hedged_sequence",
    "mean_interval",
]

F64 = npt.NDArray[np.float64]

BREAKS = 1000
"""Grid steps over [0, 1] for the candidate means (a bound is exact to 1/BREAKS)."""
TRUNCATION = 0.5
"""``c`` in ``λ⁺ ≤ c/m``: bets never stake more than half the capital (WSR's default)."""
THETA = 0.5
"""Weight of the upward bet in the hedge."""
MIN_SEQUENCE_TASKS = 2
"""Below this many tasks the sequence is the whole range and marked not estimable."""


class ConfidenceSequence(NamedTuple):
    """Bounds of a CS on [0, 1], one per observation (after the first t of them)."""

    low: F64
    high: F64


class SequentialInterval(NamedTuple):
    """An anytime-valid interval for a mean, on the observations' own scale."""

    n: int
    """Observations (tasks) it rests on."""
    estimate: float
    """Their plain mean (NaN with none)."""
    low: float
    high: float
    estimable: bool
    """False with fewer than ``MIN_SEQUENCE_TASKS`` observations: the bounds are the range."""


def betting_bets(x: F64, alpha: float) -> F64:
    """The predictable plug-in bets ``λ̇_i`` (WSR 2024, eq. 26 with θα in place of α/2).

    ``λ̇_i`` uses only ``x_1..x_{i−1}``: the variance estimate is the one before ``x_i``.
    """
    t = np.arange(1, x.size + 1, dtype=np.float64)
    mean = np.minimum((0.5 + np.cumsum(x)) / (t + 1), 1.0)
    var = (0.25 + np.cumsum((x - mean) ** 2)) / (t + 1)
    var_before = np.concatenate(([0.25], var[:-1]))
    return np.sqrt(2 * math.log(1 / (alpha * THETA)) / (t * np.log1p(t) * var_before))


def hedged_capital(x: F64, grid: F64, alpha: float) -> F64:
    """``log K_t(m)`` for every candidate ``m`` in ``grid`` and every t: shape (G, T)."""
    bets = betting_bets(x, alpha)[None, :]
    m = grid[:, None]
    with np.errstate(divide="ignore"):  # c/0 is an untruncated bet
        up = np.minimum(bets, TRUNCATION / m)
        down = np.minimum(bets, TRUNCATION / (1 - m))
    gap = x[None, :] - m
    log_up = np.cumsum(np.log1p(up * gap), axis=1) + math.log(THETA)
    log_down = np.cumsum(np.log1p(-down * gap), axis=1) + math.log(1 - THETA)
    return np.maximum(log_up, log_down)


def hedged_sequence(x: F64, alpha: float, breaks: int = BREAKS) -> ConfidenceSequence:
    """The hedged betting CS for the mean of ``x`` (each in [0, 1]) at level 1 − α."""
    if x.size == 0:
        return ConfidenceSequence(np.zeros(0), np.zeros(0))
    if np.any((x < 0) | (x > 1)) or np.any(np.isnan(x)):
        raise StatisticsInputError("a confidence sequence needs observations in [0, 1]")
    grid = np.arange(breaks + 1, dtype=np.float64) / breaks
    kept = hedged_capital(x, grid, alpha) < math.log(1 / alpha)  # (G, T)
    any_kept = kept.any(axis=0)
    first = np.argmax(kept, axis=0)
    last = breaks - np.argmax(kept[::-1], axis=0)
    step = 1.0 / breaks
    # Nothing kept (only after a miss) claims nothing rather than an empty set.
    raw_low = np.where(any_kept, np.maximum(grid[first] - step, 0.0), 0.0)
    raw_high = np.where(any_kept, np.minimum(grid[last] + step, 1.0), 1.0)
    low, high = np.maximum.accumulate(raw_low), np.minimum.accumulate(raw_high)
    crossed = low >= high  # the intersection emptied: only after a miss; fall back to raw
    return ConfidenceSequence(np.where(crossed, raw_low, low), np.where(crossed, raw_high, high))


def mean_interval(
    values: F64, lower: float, upper: float, confidence: float, breaks: int = BREAKS
) -> SequentialInterval:
    """The CS's interval after all of ``values`` (bounded in [lower, upper]), rescaled back.

    The order of ``values`` is the order they arrived in: the running intersection
    depends on it.
    """
    span = upper - lower
    n = int(values.size)
    estimate = float(values.mean()) if n else math.nan
    if n < MIN_SEQUENCE_TASKS:
        return SequentialInterval(n, estimate, lower, upper, estimable=False)
    cs = hedged_sequence(np.clip((values - lower) / span, 0.0, 1.0), 1 - confidence, breaks)
    return SequentialInterval(
        n, estimate, lower + span * float(cs.low[-1]), lower + span * float(cs.high[-1]), True
    )
