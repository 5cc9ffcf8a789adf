"""Task-cluster bootstrap of ratio estimators, vectorized through resample counts.

Every mean-type statistic here is a ratio over task clusters, ``θ = Σ_t y_t / Σ_t x_t``
(a mean of task means has ``y_t`` = task mean, ``x_t`` = 1 when present; a pooled share
has ``y_t`` = hits in task t, ``x_t`` = trials). Resampling T tasks with replacement
only changes how many times each task is counted, so one resample is a row ``w`` of
multiplicities and ``θ* = (w·y) / (w·x)``; all resamples at once are two matrix
products ``W @ Y`` and ``W @ X`` with W of shape (B, T). This is exactly the estimator
applied to the resampled tasks, without materializing them.

W is kept as small unsigned integers (a multiplicity is at most T) and multiplied a block
of rows at a time (:func:`weigh`): at 10x, W in float64 was 140 MB held beside the
statistics tables at the report's memory peak; in uint16 it is a quarter of that.

The products are exact: each column of Y is put on a fixed-point grid fine enough that
every sum ``w·y`` is an integer below 2**53 (:func:`fixed_point`), so float64 adds it up
without rounding, whatever order or kernel BLAS picks. A resample's value is then a
function of the counts and the column alone: the same bits on every machine, in a pass
of any width, and a change of a few tasks' values can be added to a product already
made (``W @ Y' = W @ Y + W[:, S] @ (Y' − Y)[S]``) with the bits a full product gives.
"""

from __future__ import annotations

from typing import Any, NamedTuple, TypedDict

import numpy as np
import numpy.typing as npt

__all__ = [
    "Estimate",
    "Interval",
    "Weigher",
    "columns",
    "difference",
    "fixed_point",
    "percentile_interval",
    "ratio",
    "resample_counts",
    "weigh",
]

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]
B8 = npt.NDArray[np.bool_]
Counts = npt.NDArray[np.unsignedinteger[Any]]
"""(B, T) resample multiplicities: uint16, or uint32 beyond 65,535 clusters."""


def resample_counts(seed: int, n_resamples: int, n_clusters: int) -> Counts:
    """(B, T) multiplicities of each cluster in each resample; PCG64(seed), reproducible.

    Draw b picks ``rng.integers(0, T, size=T)`` — the same index draws a loop over
    ``rng.integers(0, T, size=(B, T))`` rows would make. A multiplicity is at most T, so
    the counts are unsigned integers just wide enough for T (exact, and a quarter of
    float64's memory); :func:`weigh` multiplies them.
    """
    rng = np.random.Generator(np.random.PCG64(seed))
    dtype = np.uint16 if n_clusters <= np.iinfo(np.uint16).max else np.uint32
    if n_clusters == 0:
        return np.zeros((n_resamples, 0), dtype=dtype)
    out = np.empty((n_resamples, n_clusters), dtype=dtype)
    # A block of rows at a time: the generator's stream is the same as one (B, T) draw,
    # and each block's bincount stays in cache. One bincount over all B·T cells wrote a
    # 140 MB array at random places (1.5 s of a 10x report; blocks take 0.2 s) and held
    # two such arrays beside the result.
    rows = max(1, _BLOCK_CELLS // n_clusters)
    for start in range(0, n_resamples, rows):
        n = min(rows, n_resamples - start)
        idx = rng.integers(0, n_clusters, size=(n, n_clusters))
        idx += (np.arange(n, dtype=np.int64) * n_clusters)[:, None]
        out[start : start + n] = np.bincount(idx.ravel(), minlength=n * n_clusters).reshape(
            n, n_clusters
        )
    return out


_BLOCK_CELLS = 1 << 16
"""Cells per block of :func:`resample_counts` (512 KiB of int64 counts)."""


def weigh(counts: Counts, m: F64, row_sum: int | None = None) -> F64:
    """``counts @ m`` in float64, exactly for the grid of :func:`fixed_point`, a block of
    resamples at a time.

    `row_sum` bounds every row's sum of counts (T for :func:`resample_counts`; measured
    when not given). Each block is converted to float64 (exact: counts are small
    integers) just before its product, so the float64 copy of the whole (B, T) array
    never exists. Equal columns of `m` are multiplied once: a ratio's denominators are
    often the same column for every dimension (each judgment scores them all), and the
    products are the report's largest cost, all arithmetic.
    """
    distinct, back = _distinct_columns(m)
    bound = max_row_sum(counts) if row_sum is None else row_sum
    grid, scale = fixed_point(distinct, bound)
    out = np.empty((counts.shape[0], grid.shape[1]))
    for start in range(0, counts.shape[0], _WEIGH_ROWS):
        block = counts[start : start + _WEIGH_ROWS].astype(np.float64)
        out[start : start + block.shape[0]] = block @ grid
    np.ldexp(out, -scale, out=out)  # a power of two: exact
    return out if back is None else out[:, back]


def max_row_sum(counts: Counts) -> int:
    """The largest total multiplicity of a resample (T, for :func:`resample_counts`)."""
    if counts.size == 0:
        return 0
    return int(counts.sum(axis=1, dtype=np.int64).max())


def fixed_point(m: F64, row_sum: int) -> tuple[F64, I64]:
    """Each column of `m` on the grid of ``2**-scale`` that keeps any product with counts
    summing to at most `row_sum` exact: ``(grid, scale)`` with ``grid = rint(m · 2**scale)``
    integers in float64 and ``Σ_t w_t |grid_t| < 2**53`` for every such row ``w``.

    A column's largest value times `row_sum` is below ``2**e``; its scale is ``52 − e``,
    so the sum stays under ``2**52`` plus half a unit per count. Rounding moves a value by
    at most ``2**-scale / 2``, no more than ``row_sum · 2**-52`` of the column's largest value
    (4e-13 at 1,780 tasks), far inside any bootstrap's own noise. A column with a NaN or
    an infinity is left as it is (its products are not finite either).
    """
    top = np.abs(m).max(axis=0, initial=0.0) * max(row_sum, 1)
    _, exponent = np.frexp(top)
    usable = np.isfinite(top) & (top > 0)
    scale = np.where(usable, 52 - exponent, 0).astype(np.int64)
    grid = np.ldexp(m, scale)
    np.rint(grid, out=grid, where=usable[None, :])
    return grid, scale


class Weigher:
    """``counts @ m`` over one set of resamples, each distinct column multiplied once in the
    weigher's life, whichever statistic asks for it.

    A context's statistics ask again for columns already weighed: an agent's denominators
    (the tasks it ran) recur in its overall, dimension, pass-rate and failure estimates;
    at 10x the report asks for 332 columns of which 168 are distinct.

    Products are exact (:func:`fixed_point`), so a column's answer has the same bits
    whichever columns shared its pass and whatever was asked before it.
    """

    def __init__(self, counts: Counts) -> None:
        self.counts = counts
        self.row_sum = max_row_sum(counts)
        self._products: dict[bytes, tuple[F64, int]] = {}
        """A column's bytes → the product it was weighed in, and its place there."""

    def __call__(self, m: F64) -> F64:
        """``counts @ m``, (B, K)."""
        keys = self.ahead(m)
        out = np.empty((self.counts.shape[0], len(keys)))
        for j, key in enumerate(keys):
            product, i = self._products[key]
            out[:, j] = product[:, i]
        return out

    def ahead(self, m: F64) -> list[bytes]:
        """Weigh the columns of ``m`` not weighed yet, in one pass, and keep their products
        for the asks to come; return each column's key.

        One wide pass is several times cheaper than the same columns in narrow ones (each
        pass converts and reads all of the counts: 168 columns of the 10x log take 0.13 s
        in one pass, 0.32 s in eight), so a context weighs every statistic's columns
        ahead of the statistics (:meth:`Context.weigh_ahead`).
        """
        keys = [col.tobytes() for col in np.ascontiguousarray(m.T)]
        new: dict[bytes, int] = {}
        for j, key in enumerate(keys):
            if key not in self._products:
                new.setdefault(key, j)
        if new:
            product = weigh(self.counts, m[:, list(new.values())], self.row_sum)
            for i, key in enumerate(new):
                self._products[key] = (product, i)
        return keys


def _distinct_columns(m: F64) -> tuple[F64, I64 | None]:
    """The distinct columns of `m` (equal bytes), and where each of its columns is among
    them (None: all distinct, `m` itself)."""
    first: dict[bytes, int] = {}
    back = np.array(
        [first.setdefault(col.tobytes(), len(first)) for col in np.ascontiguousarray(m.T)],
        dtype=np.int64,
    )
    if len(first) == m.shape[1]:
        return m, None
    _, keep = np.unique(back, return_index=True)  # each distinct column's first place
    return m[:, keep], back


_WEIGH_ROWS = 1024
"""Resamples per block of :func:`weigh` (at 10x's 1,750 tasks, 14 MB of float64)."""


def percentile_interval(draws: F64, confidence: float) -> tuple[F64, F64]:
    """Percentile CI per column (linear interpolation, as scipy.stats.bootstrap).

    Draws that are NaN (a resample without any cluster informing the column) are left
    out of that column's quantiles.
    """
    alpha = (1.0 - confidence) / 2.0
    q = np.array([alpha, 1.0 - alpha])
    if draws.shape[0] == 0:
        nan = np.full(draws.shape[1:], np.nan)
        return nan, nan.copy()
    bad = np.isnan(draws).any(axis=0)
    out = np.empty((2, *draws.shape[1:]))
    if (~bad).any():
        out[:, ~bad] = np.quantile(draws[:, ~bad], q, axis=0)
    for k in np.flatnonzero(bad):  # rare: only sparse columns
        col = draws[:, k]
        col = col[~np.isnan(col)]
        out[:, k] = np.quantile(col, q) if col.size else np.nan
    return out[0], out[1]


class Interval(TypedDict):
    """The uncertainty fields every estimated result row carries."""

    se: float
    ci_low: float
    ci_high: float


class Estimate(NamedTuple):
    """Point estimate, cluster-robust SE, percentile CI and bootstrap draws per column."""

    estimate: F64
    """(K,) statistic on the observed data."""
    se: F64
    """(K,) cluster-robust (CR1) standard error by linearization over tasks."""
    low: F64
    """(K,) lower percentile-bootstrap bound."""
    high: F64
    """(K,) upper percentile-bootstrap bound."""
    draws: F64
    """(B, K) bootstrap replicates."""
    influence: F64
    """(T, K) each task's linearized contribution to the estimate's error."""
    active: B8
    """(T, K) whether task t informs column k (its denominator is positive)."""

    def interval(self, k: int) -> Interval:
        """Column k's standard error and confidence interval, as result rows name them."""
        return Interval(
            se=float(self.se[k]), ci_low=float(self.low[k]), ci_high=float(self.high[k])
        )

    @property
    def n_clusters(self) -> I64:
        """(K,) number of tasks informing each column."""
        return np.asarray(self.active.sum(axis=0), dtype=np.int64)


def _finish(est: F64, infl: F64, draws: F64, active: B8, confidence: float) -> Estimate:
    g = active.sum(axis=0).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        corr = np.where(g > 1, g / (g - 1.0), np.nan)
        se = np.sqrt(corr * (infl**2).sum(axis=0))
    se = np.where(np.isnan(est), np.nan, se)  # no estimate, no standard error
    low, high = percentile_interval(draws, confidence)
    return Estimate(est, se, low, high, draws, infl, active)


def difference(a: Estimate, b: Estimate, confidence: float = 0.95) -> Estimate:
    """Paired difference ``a − b`` of two estimates from the same resamples.

    Its SE uses the difference of the task contributions, so the pairing on tasks is
    kept; G counts tasks informing either side.
    """
    infl = a.influence - b.influence
    active = a.active | b.active
    return _finish(a.estimate - b.estimate, infl, a.draws - b.draws, active, confidence)


def columns(e: Estimate, cols: I64 | slice) -> Estimate:
    """The estimate restricted to some columns."""
    return Estimate(
        e.estimate[cols],
        e.se[cols],
        e.low[cols],
        e.high[cols],
        e.draws[:, cols],
        e.influence[:, cols],
        e.active[:, cols],
    )


def ratio(num: F64, den: F64, resamples: Counts | Weigher, confidence: float = 0.95) -> Estimate:
    """Ratio estimator ``Σ num / Σ den`` per column with its task-cluster bootstrap.

    ``num``/``den`` are (T, K); ``resamples`` the (B, T) counts from
    :func:`resample_counts`, or a :class:`Weigher` of them shared by several estimates.
    The SE linearizes the ratio: task t contributes ``(y_t − θ x_t) / Σ x``, and
    ``SE² = G/(G−1) Σ_t contribution²`` with G the tasks where ``x_t > 0`` (for a mean
    of task means this is exactly s/√G).
    """
    dsum = den.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        est = num.sum(axis=0) / dsum
        infl = np.where(den > 0, (num - est * den) / dsum, 0.0)
        # One product for both sides: each is a pass over the (B, T) counts, and at 10x
        # those are 140 MB read from memory per pass.
        by = resamples if isinstance(resamples, Weigher) else Weigher(resamples)
        both = by(np.concatenate([num, den], axis=1))
        draws = both[:, : num.shape[1]] / both[:, num.shape[1] :]
    return _finish(est, np.nan_to_num(infl), draws, den > 0, confidence)
