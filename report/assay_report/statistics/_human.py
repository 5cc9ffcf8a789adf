"""Agreement of the judges (and of humans among themselves) with human verdicts.

A verdict pair is one run scored by a subject (a judge, the jury's mean, or a first
human) and by a human. Every figure is a function of the pairs, and a task resample
weighs each pair by its task's multiplicity; so κ comes from weighted confusion
matrices (``W @ C``) and Spearman's ρ from weighted midranks, which are exactly those
of the resampled pairs, without materializing them.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from ._bootstrap import F64, I64, percentile_interval, ratio, resample_counts, weigh
from ._context import AnalysisSettings
from ._validity import check_settings, validated
from ._validity_rows import BINS, RATER_SCHEMA, HumanAgreement, HumanBias, RunKind, SubjectKind

__all__ = ["human_agreement_rows", "kappa", "spearman"]

_PLAIN = 1.0 - np.eye(2)
_QUADRATIC = (np.subtract.outer(np.arange(BINS), np.arange(BINS)) ** 2) / (BINS - 1) ** 2


def kappa(confusion: F64, weights: F64) -> F64:
    """Cohen's κ of (..., K, K) confusion counts: 1 − Σ w·O / Σ w·E, NaN when Σ w·E = 0."""
    n = confusion.sum(axis=(-2, -1))
    with np.errstate(invalid="ignore", divide="ignore"):
        expected = confusion.sum(axis=-1)[..., :, None] * confusion.sum(axis=-2)[..., None, :]
        expected = expected / n[..., None, None]
        observed = (weights * confusion).sum(axis=(-2, -1))
        chance = (weights * expected).sum(axis=(-2, -1))
        return np.asarray(np.where(chance > 0, 1.0 - observed / chance, np.nan))


def _midranks(x: F64, w: F64) -> F64:
    """(B, n) midranks of x in the samples that hold item i w[b, i] times."""
    levels, inv = np.unique(x, return_inverse=True)
    onehot = np.zeros((x.size, levels.size))
    onehot[np.arange(x.size), inv] = 1.0
    per_level = w @ onehot
    below = np.cumsum(per_level, axis=1) - per_level
    return np.asarray((below + (per_level + 1.0) / 2.0)[:, inv])


def spearman(x: F64, y: F64, w: F64) -> F64:
    """(B,) Spearman's ρ of the pairs (x_i, y_i) counted w[b, i] times; NaN when constant."""
    rx, ry = _midranks(x, w), _midranks(y, w)
    tot = w.sum(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        dx = rx - (w * rx).sum(axis=1, keepdims=True) / tot
        dy = ry - (w * ry).sum(axis=1, keepdims=True) / tot
        cov = (w * dx * dy).sum(axis=1)
        var = (w * dx * dx).sum(axis=1) * (w * dy * dy).sum(axis=1)
        return np.asarray(np.where(var > 0, cov / np.sqrt(var), np.nan))


def _confusions(t_idx: I64, a: I64, b: I64, k: int, t_n: int) -> F64:
    """(T, k, k) per-task confusion counts of categories a (rows) against b (columns)."""
    flat = np.bincount((t_idx * k + a) * k + b, minlength=t_n * k * k)
    return flat.reshape(t_n, k, k).astype(np.float64)


def _bins(s: F64) -> I64:
    return np.clip(np.floor(s + 0.5), 0, BINS - 1).astype(np.int64)


def _agreement(
    kind: SubjectKind, subject: str, pairs: pl.DataFrame, settings: AnalysisSettings, runs: RunKind
) -> HumanAgreement:
    """One row from pairs (task_id, x = subject's run score, y = human's run score)."""
    tasks = sorted(set(pairs["task_id"].to_list()))
    t_of = {t: i for i, t in enumerate(tasks)}
    t_idx = np.array([t_of[t] for t in pairs["task_id"]], dtype=np.int64)
    x, y = pairs["x"].to_numpy(), pairs["y"].to_numpy()
    t_n, anchor = len(tasks), settings.anchor
    counts = resample_counts(settings.seed, settings.n_resamples, t_n)
    pf = _confusions(t_idx, (x < anchor).astype(np.int64), (y < anchor).astype(np.int64), 2, t_n)
    bins = _confusions(t_idx, _bins(x), _bins(y), BINS, t_n)

    def figure(c: F64, w: F64) -> tuple[float, float, float]:
        est = kappa(c.sum(axis=0), w)
        draws = kappa(weigh(counts, c.reshape(t_n, -1)).reshape(-1, *c.shape[1:]), w)
        low, high = percentile_interval(draws[:, None], settings.confidence)
        return float(est), float(low[0]), float(high[0])

    k, k_lo, k_hi = figure(pf, _PLAIN)
    wk, wk_lo, wk_hi = figure(bins, _QUADRATIC)
    rho = float(spearman(x, y, np.ones((1, x.size)))[0])
    r_lo, r_hi = percentile_interval(
        spearman(x, y, counts[:, t_idx].astype(np.float64))[:, None], settings.confidence
    )
    m = pf.sum(axis=0).astype(np.int64)
    n = max(pairs.height, 1)
    return HumanAgreement(
        subject_kind=kind,
        subject=subject,
        runs=runs,
        n_tasks=t_n,
        n_runs=pairs.height,
        subject_pass_share=float(m[0].sum() / n),
        human_pass_share=float(m[:, 0].sum() / n),
        pabak=float(2 * (m[0, 0] + m[1, 1]) / n - 1),
        kappa=k,
        kappa_low=k_lo,
        kappa_high=k_hi,
        weighted_kappa=wk,
        weighted_kappa_low=wk_lo,
        weighted_kappa_high=wk_hi,
        spearman=rho,
        spearman_low=float(r_lo[0]),
        spearman_high=float(r_hi[0]),
        both_pass=int(m[0, 0]),
        subject_only_pass=int(m[0, 1]),
        human_only_pass=int(m[1, 0]),
        both_fail=int(m[1, 1]),
    )


def _bias(
    kind: SubjectKind, subject: str, pairs: pl.DataFrame, settings: AnalysisSettings, runs: RunKind
) -> list[HumanBias]:
    """Per dimension (and None: the run score), mean of x − y over pairs (task_id, dimension, x, y)."""
    tasks = sorted(set(pairs["task_id"].to_list()))
    dims: list[str | None] = [None, *sorted(set(pairs["dimension"].drop_nulls().to_list()))]
    t_of = {t: i for i, t in enumerate(tasks)}
    num = np.zeros((len(tasks), len(dims)))
    den = np.zeros_like(num)
    for d_i, d in enumerate(dims):
        sub = pairs.filter(pl.col("dimension").is_null() if d is None else pl.col("dimension") == d)
        t_idx = np.array([t_of[t] for t in sub["task_id"]], dtype=np.int64)
        diff = (sub["x"] - sub["y"]).to_numpy()
        num[:, d_i] = np.bincount(t_idx, weights=diff, minlength=len(tasks))
        den[:, d_i] = np.bincount(t_idx, minlength=len(tasks))
    counts = resample_counts(settings.seed, settings.n_resamples, len(tasks))
    est = ratio(num, den, counts, settings.confidence)
    return [
        HumanBias(
            subject_kind=kind,
            subject=subject,
            runs=runs,
            dimension=d,
            estimate=float(est.estimate[k]),
            n_tasks=int(est.n_clusters[k]),
            n_runs=int(den[:, k].sum()),
            **est.interval(k),
        )
        for k, d in enumerate(dims)
    ]


def _scores(r: pl.DataFrame) -> pl.DataFrame:
    """Per run × rater: dimension scores (averaged over samples) and the run score (dimension
    null: the mean of all the rater's ratings of the run)."""
    keys = ("task_id", "run_id", "rater_id")
    dim = r.group_by(*keys, "dimension").agg(pl.col("score").mean())
    run = (
        r.group_by(*keys)
        .agg(pl.col("score").mean())
        .with_columns(dimension=pl.lit(None, pl.String))
    )
    return pl.concat([dim, run.select(dim.columns)])


def _pairs(subject: pl.DataFrame, human: pl.DataFrame) -> pl.DataFrame:
    """Both sides' scores of the same run and dimension (null dimension: run score)."""
    on = ["task_id", "run_id", "dimension"]
    return subject.rename({"score": "x"}).join(
        human.rename({"score": "y", "rater_id": "human"}), on=on, how="inner", nulls_equal=True
    )


def human_agreement_rows(
    judges: pl.DataFrame, humans: pl.DataFrame, settings: AnalysisSettings, *, runs: RunKind = "all"
) -> tuple[tuple[HumanAgreement, ...], tuple[HumanBias, ...]]:
    """Agreement and bias of each judge, of the jury's mean and of human with human,
    against the human verdicts; both tables follow ``RATER_SCHEMA``. A subject without a
    run in common with a human has no row; ``runs`` labels which runs the tables hold."""
    check_settings(settings)
    j = _scores(validated(judges, "judges", RATER_SCHEMA, ()))
    h = _scores(validated(humans, "humans", RATER_SCHEMA, ()))
    jury = j.group_by("task_id", "run_id", "dimension").agg(pl.col("score").mean())
    jury = jury.with_columns(rater_id=pl.lit("")).select(j.columns)
    subjects: list[tuple[SubjectKind, str, pl.DataFrame]] = [
        ("judge", name, _pairs(j.filter(pl.col("rater_id") == name), h))
        for name in sorted(set(j["rater_id"].to_list()))
    ]
    subjects.append(("jury", "", _pairs(jury, h)))
    same = _pairs(h, h).filter(pl.col("rater_id") < pl.col("human"))
    subjects.append(("humans", "", same))
    agreement: list[HumanAgreement] = []
    bias: list[HumanBias] = []
    for kind, name, pairs in subjects:
        if pairs.height == 0:
            continue
        per_run = pairs.filter(pl.col("dimension").is_null())
        agreement.append(_agreement(kind, name, per_run, settings, runs))
        bias += _bias(kind, name, pairs, settings, runs)
    return tuple(agreement), tuple(bias)
