"""Self-preference: each judge's own-family effect in a run + judge fixed-effects OLS.

Model, one observation per (judge j, scored run r) with y = the judge's run score:

    y_rj = α_r + β_j + Σ_i γ_i · [j = i and family(i) = family(agent of r)] + ε_rj

α_r absorbs everything about the run (its true quality, its task, its agent), β_j a
judge's general leniency (β of the first judge fixed at 0), and γ_i is judge i's
self-preference: how much more it gives its own family than the other judges do,
beyond its usual leniency. A judge that is merely lenient gets a large β and γ ≈ 0.

The run effects are absorbed exactly by demeaning y and every regressor within run
(Frisch–Waugh–Lovell: projecting on run dummies is subtracting run means, whatever the
balance). What remains is tiny (2J − 1 columns), so the fit is accumulated as per-task
cross-products ``A_t = Z_t'Z_t``, ``b_t = Z_t'y_t``. A task-cluster bootstrap resample
duplicates whole tasks, and a duplicated run is a new run with its own effect, so its
weighted normal equations are ``Σ w_t A_t · γ = Σ w_t b_t``: two matrix products and a
batched 5 × 5 solve for all resamples at once, identical to refitting with dummies.

A coefficient is reported only where the data identify it: γ_i (or a centred leniency)
is a linear function c'θ of the coefficients, estimable exactly when c lies in the row
space of the demeaned design; then every least-squares solution gives it the same value,
whatever the judges' names or order. Two judges of one family scoring that family's
runs with no judge of another family beside them, for instance, identify only the
difference of their γ's: neither γ is reported (NaN) and the warnings name the family.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from ._bootstrap import percentile_interval
from ._context import Context
from ._no_spread import zero_width
from ._panel import F64, I64
from ._results import SelfPreference

__all__ = ["Fit", "design", "fit", "identified", "self_preference_inputs", "self_preference_rows"]


def design(ctx: Context) -> tuple[F64, F64, I64, I64, npt.NDArray[np.bool_]]:
    """Raw (not demeaned) design of the model: ``(y, Z, run, task, own)``.

    Z's columns are judge dummies 1..J−1, then own-family indicators of judges 0..J−1.
    """
    p = ctx.panel
    r_idx, j_idx = np.nonzero(~np.isnan(p.judge_score))
    y = p.judge_score[r_idx, j_idx]
    j_n = len(p.judge_ids)
    agent_fam = np.array(p.agent_families, dtype=object)[p.run_agent[r_idx]]
    judge_fam = np.array(p.judge_families, dtype=object)[j_idx]
    own = agent_fam == judge_fam
    z = np.zeros((y.size, 2 * j_n - 1))
    rows = np.arange(y.size)
    lenient = j_idx > 0
    z[rows[lenient], j_idx[lenient] - 1] = 1.0
    z[rows[own], j_n - 1 + j_idx[own]] = 1.0
    return y, z, r_idx.astype(np.int64), p.run_task[r_idx], own.astype(bool)


def _demean(x: F64, group: I64) -> F64:
    n = np.bincount(group).astype(np.float64)
    s = np.zeros((n.size, x.shape[1]))
    np.add.at(s, group, x)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.asarray(x - (s / n[:, None])[group], dtype=np.float64)


def _row_space(zd: F64) -> F64:
    """Orthonormal basis (columns) of the row space of ``zd``, via its small Gram matrix."""
    gram = zd.T @ zd
    val, vec = np.linalg.eigh(gram)
    tol = 1e-9 * max(float(val.max(initial=0.0)), 1.0)
    return np.asarray(vec[:, val > tol], dtype=np.float64)


def identified(ctx: Context) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.bool_]]:
    """Whether each judge's γ and centred leniency are estimable (order-independent).

    c'θ is estimable when c lies in the row space of the within-run design; testing the
    residual of c projected on that space depends on no column order or judge name.
    """
    j_n = len(ctx.panel.judge_ids)
    y, z, run, _, _ = ctx.inputs(design)
    if y.size == 0:
        return np.zeros(j_n, dtype=bool), np.zeros(j_n, dtype=bool)
    basis = _row_space(_demean(z, run))
    c = np.zeros((2 * j_n, z.shape[1]))
    c[np.arange(j_n), j_n - 1 + np.arange(j_n)] = 1.0  # γ_i
    beta = np.vstack([np.zeros(j_n - 1), np.eye(j_n - 1)])  # β_j over the dummies
    c[j_n:, : j_n - 1] = beta - beta.mean(axis=0)  # β_j − mean β
    resid = c - (c @ basis) @ basis.T
    ok = np.sqrt((resid**2).sum(axis=1)) < 1e-6
    return ok[:j_n], ok[j_n:]


def _estimable(z: F64) -> npt.NDArray[np.bool_]:
    """Greedy column selection: keep a column if it adds rank (judge dummies first)."""
    keep = np.zeros(z.shape[1], dtype=bool)
    scale = max(float(np.abs(z).max()), 1.0)
    for c in range(z.shape[1]):
        trial = keep.copy()
        trial[c] = True
        sub = z[:, trial]
        if np.linalg.matrix_rank(sub, tol=1e-9 * scale * np.sqrt(z.shape[0])) == trial.sum():
            keep = trial
    return keep


def _solve_batch(a: F64, b: F64) -> F64:
    """Solve each a[i] x = b[i]; a coefficient whose column is empty in a draw is NaN."""
    diag = np.diagonal(a, axis1=1, axis2=2)
    empty = diag <= 1e-12 * np.maximum(diag.max(axis=1, keepdims=True), 1.0)
    out = np.full(b.shape, np.nan)
    fine = ~empty.any(axis=1)
    try:
        out[fine] = np.linalg.solve(a[fine], b[fine][..., None])[..., 0]
    except np.linalg.LinAlgError:  # exact collinearity in some draw: minimum-norm fallback
        fine[:] = False
    rest = ~fine
    if rest.any():
        sol = (np.linalg.pinv(a[rest]) @ b[rest][..., None])[..., 0]
        out[rest] = np.where(empty[rest], np.nan, sol)
    return out


class Fit(NamedTuple):
    """Coefficients of the self-preference model over its 2J − 1 columns."""

    coef: F64
    """Judge effects 1..J−1, then own-family effects 0..J−1; NaN if not estimable."""
    se: F64
    """CR1 sandwich standard errors, tasks as clusters."""
    draws: F64
    """(B, 2J − 1) bootstrap refits."""


class _Sums(NamedTuple):
    """What the fit and its bootstrap need: the within-run design's estimable columns and
    their per-task cross-products."""

    z_n: int
    """Columns of the full design, 2J − 1."""
    keep: npt.NDArray[np.bool_]
    """The estimable ones."""
    yd: F64
    zk: F64
    task: I64
    a_t: F64
    """(T, k·k) per-task ``Z_t'Z_t`` over the kept columns."""
    b_t: F64
    """(T, k) per-task ``Z_t'y_t``."""


def _sums(ctx: Context) -> _Sums:
    t_n = len(ctx.panel.task_ids)
    y, z, run, task, _ = ctx.inputs(design)
    yd = _demean(y[:, None], run)[:, 0]
    zd = _demean(z, run)
    keep = _estimable(zd)
    zk = zd[:, keep]
    k = zk.shape[1]
    a_t = np.zeros((t_n, k * k))
    b_t = np.zeros((t_n, k))
    if k:  # e.g. a single judge: nothing varies within a run, nothing to fit
        np.add.at(a_t, task, (zk[:, :, None] * zk[:, None, :]).reshape(-1, k * k))
        np.add.at(b_t, task, zk * yd[:, None])
    return _Sums(z.shape[1], keep, yd, zk, task, a_t, b_t)


def self_preference_inputs(ctx: Context) -> tuple[F64, ...]:
    """The per-task cross-products each resample's refit weighs (none without a judge, or
    with nothing estimable)."""
    if not ctx.panel.judge_ids:
        return ()
    sums = ctx.inputs(_sums)
    if not sums.keep.any():
        return ()
    return (np.concatenate([sums.a_t, sums.b_t], axis=1),)


def fit(ctx: Context) -> Fit:
    """Fit the model on the data and on every task resample of ``ctx``."""
    t_n = len(ctx.panel.task_ids)
    z_n, keep, yd, zk, task, a_t, b_t = ctx.inputs(_sums)
    if not keep.any():  # e.g. a single judge: nothing varies within a run
        nan = np.full(z_n, np.nan)
        return Fit(nan, nan.copy(), np.full((ctx.counts.shape[0], z_n), np.nan))
    k = zk.shape[1]
    a, b = a_t.sum(axis=0).reshape(k, k), b_t.sum(axis=0)
    coef = np.linalg.solve(a, b)
    # CR1 sandwich with tasks as clusters.
    resid = yd - zk @ coef
    score = np.zeros((t_n, k))
    np.add.at(score, task, zk * resid[:, None])
    g = np.unique(task).size
    a_inv = np.linalg.inv(a)
    cov = a_inv @ (score.T @ score) @ a_inv * (g / (g - 1) if g > 1 else np.nan)
    # Both sides in one product: the columns the context weighed ahead.
    both = ctx.weigher(*ctx.inputs(self_preference_inputs))
    draws_k = _solve_batch(both[:, : k * k].reshape(-1, k, k), both[:, k * k :])

    full = np.full(z_n, np.nan)
    full[keep] = coef
    se = np.full(z_n, np.nan)
    se[keep] = np.sqrt(np.clip(np.diag(cov), 0.0, None))
    draws = np.full((draws_k.shape[0], z_n), np.nan)
    draws[:, keep] = draws_k
    return Fit(full, se, draws)


def self_preference_rows(ctx: Context) -> list[SelfPreference]:
    """Each judge's own-family coefficient with a cluster SE and a task bootstrap CI."""
    p = ctx.panel
    j_n = len(p.judge_ids)
    if j_n == 0:
        return []
    _, _, _, _, own = ctx.inputs(design)
    judge = np.nonzero(~np.isnan(p.judge_score))[1]
    f = fit(ctx)
    gam = slice(j_n - 1, 2 * j_n - 1)
    low, high = percentile_interval(f.draws[:, gam], ctx.confidence)
    beta = np.concatenate([[0.0], f.coef[: j_n - 1]])
    # One judge has no leniency relative to anyone.
    leniency = beta - beta.mean() if j_n > 1 else np.full(1, np.nan)
    # Only what the data identify is reported; the rest depends on column order.
    gam_ok, len_ok = identified(ctx)
    coef, se = np.where(gam_ok, f.coef[gam], np.nan), np.where(gam_ok, f.se[gam], np.nan)
    # An OLS coefficient has no bounded scale to fall back on: without spread across
    # task resamples its interval is not estimable, never a zero-width claim.
    flat = gam_ok & zero_width(low, high)
    low, high = np.where(gam_ok & ~flat, low, np.nan), np.where(gam_ok & ~flat, high, np.nan)
    leniency = np.where(len_ok, leniency, np.nan)

    rows: list[SelfPreference] = []
    for j, judge_id in enumerate(p.judge_ids):
        mine = judge == j
        rows.append(
            SelfPreference(
                group=ctx.group,
                judge_id=judge_id,
                judge_family=p.judge_families[j],
                coefficient=float(coef[j]),
                leniency=float(leniency[j]),
                n_own=int((mine & own).sum()),
                n_other=int((mine & ~own).sum()),
                se=float(se[j]),
                ci_low=float(low[j]),
                ci_high=float(high[j]),
                no_spread=bool(flat[j]),
            )
        )
    return rows
