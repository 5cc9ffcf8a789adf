"""Judge error rates on control runs, and pass shares corrected for them (Rogan–Gladen).

A control is a run whose right verdict is known: known-good (expected "pass") or
known-bad (expected "fail"). Se and Sp are pooled shares over control runs, so each is
the ratio estimator ``Σ_t right_t / Σ_t runs_t`` of :mod:`._bootstrap`; its interval
is the hull of the task bootstrap and the binomial interval at its counts
(:mod:`._proportions`). The corrected pass share's interval is Lang–Reiczigel's, which
carries the uncertainty of q, Se and Sp at once, each at its effective sample size.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import NamedTuple

import numpy as np
import polars as pl

from ._bootstrap import F64, Estimate, ratio, resample_counts
from ._context import AnalysisSettings
from ._proportions import effective_trials, lang_reiczigel, share_bounds
from ._tables import StatisticsInputError
from ._validity_rows import (
    CONTROLS_SCHEMA,
    FRAGILE_BAND,
    SCORED_RUNS_SCHEMA,
    ControlRate,
    CorrectedPassShare,
    Measure,
)

__all__ = ["check_settings", "control_rate_rows", "corrected_pass_rows", "validated"]

_DTYPES = {"str": pl.String, "float": pl.Float64}
_CLASS: dict[str, Measure] = {"pass": "sensitivity", "fail": "specificity"}


def check_settings(settings: AnalysisSettings) -> None:
    """The bootstrap settings' own checks (as :func:`contexts` makes them)."""
    if not 0.0 < settings.confidence < 1.0:
        raise StatisticsInputError(f"confidence must lie in (0, 1): {settings.confidence}")
    if settings.n_resamples < 1:
        raise StatisticsInputError(f"n_resamples must be positive: {settings.n_resamples}")


def validated(
    df: pl.DataFrame, name: str, schema: Mapping[str, str], key: tuple[str, ...]
) -> pl.DataFrame:
    """``df`` with canonical dtypes, or :class:`StatisticsInputError` naming the first fault:
    a missing or mistyped column, a null, a score outside 0-10 or not finite, a repeated
    ``key``, or a run filed under two tasks."""
    missing = [c for c in schema if c not in df.columns]
    if missing:
        raise StatisticsInputError(f"table {name!r} is missing column(s) {', '.join(missing)}")
    for col, kind in schema.items():
        dtype = df.schema[col]
        ok = dtype == pl.String if kind == "str" else dtype.is_numeric()
        if not ok:
            raise StatisticsInputError(
                f"table {name!r}: column {col!r} has dtype {dtype}, expected {kind}"
            )
        if df[col].null_count():
            raise StatisticsInputError(f"table {name!r}: column {col!r} has null(s)")
    out = df.select([pl.col(c).cast(_DTYPES[k]) for c, k in schema.items()])
    bad = out.filter(~pl.col("score").is_finite() | (pl.col("score") < 0) | (pl.col("score") > 10))
    if bad.height:
        raise StatisticsInputError(
            f"table {name!r}: column 'score' must lie in 0-10, found {bad['score'][0]!r}"
        )
    if key and out.select(key).is_duplicated().any():
        raise StatisticsInputError(f"table {name!r}: repeated {', '.join(key)}")
    split = out.group_by("run_id").agg(pl.col("task_id").n_unique()).filter(pl.col("task_id") > 1)
    if split.height:
        raise StatisticsInputError(f"table {name!r}: run {split['run_id'][0]!r} has several tasks")
    return out


def _controls(controls: pl.DataFrame) -> pl.DataFrame:
    c = validated(controls, "controls", CONTROLS_SCHEMA, ("run_id", "judge_id"))
    wrong = c.filter(~pl.col("expected").is_in(["pass", "fail"]))
    if wrong.height:
        raise StatisticsInputError(
            f"table 'controls': expected must be 'pass' or 'fail', found {wrong['expected'][0]!r}"
        )
    for col in ("variant", "expected"):
        mixed = c.group_by("run_id").agg(pl.col(col).n_unique()).filter(pl.col(col) > 1)
        if mixed.height:
            raise StatisticsInputError(
                f"table 'controls': run {mixed['run_id'][0]!r} has several {col} values"
            )
    mixed = c.group_by("variant").agg(pl.col("expected").n_unique()).filter(pl.col("expected") > 1)
    if mixed.height:
        raise StatisticsInputError(
            f"table 'controls': variant {mixed['variant'][0]!r} is both known-good and known-bad"
        )
    return c


def _with_jury(c: pl.DataFrame) -> pl.DataFrame:
    """The judges' rows plus the jury's mean run score per run (judge_id null)."""
    jury = c.group_by("task_id", "run_id", "variant", "expected").agg(pl.col("score").mean())
    jury = jury.with_columns(pl.lit(None, pl.String).alias("judge_id")).select(c.columns)
    return pl.concat([c, jury])


_Key = tuple[str | None, str | None, Measure]


class _Rates(NamedTuple):
    keys: list[_Key]
    num: F64
    """(T, K) controls judged right per task."""
    den: F64
    """(T, K) controls per task."""
    near: F64
    """(K,) controls whose score lies within ``FRAGILE_BAND`` of the anchor."""


def _rate_matrix(c: pl.DataFrame, tasks: list[str], anchor: int) -> _Rates:
    """Columns (judge, variant, measure) with per-task right counts and control counts."""
    t_of = {t: i for i, t in enumerate(tasks)}
    t_idx = np.array([t_of[t] for t in c["task_id"]], dtype=np.int64)
    score = c["score"].to_numpy()
    expected = c["expected"].to_numpy()
    right = np.where(expected == "pass", score >= anchor, score < anchor).astype(np.float64)
    close = np.abs(score - anchor) <= FRAGILE_BAND
    judges = c["judge_id"].to_list()
    variants = c["variant"].to_numpy()
    keys: list[_Key] = []
    nums: list[F64] = []
    dens: list[F64] = []
    near: list[float] = []
    kinds = sorted(set(zip(c["variant"].to_list(), expected.tolist(), strict=True)))
    for judge in [*sorted({j for j in judges if j is not None}), None]:
        mine = np.array([j == judge for j in judges], dtype=bool)
        cols = [(None, e, mine & (expected == e)) for e in ("pass", "fail")]
        cols += [(v, e, mine & (variants == v)) for v, e in kinds]
        for variant, e, mask in cols:
            keys.append((judge, variant, _CLASS[e]))
            nums.append(np.bincount(t_idx[mask], right[mask], len(tasks)).astype(np.float64))
            dens.append(np.bincount(t_idx[mask], minlength=len(tasks)).astype(np.float64))
            near.append(float((close & mask).sum()))
    t_n = len(tasks)
    num = np.stack(nums, axis=1) if nums else np.zeros((t_n, 0))
    den = np.stack(dens, axis=1) if dens else np.zeros((t_n, 0))
    return _Rates(keys, num, den, np.array(near))


def control_rate_rows(
    controls: pl.DataFrame, settings: AnalysisSettings
) -> tuple[ControlRate, ...]:
    """Se and Sp at ``settings.anchor`` per judge and for the jury (judge_id None), over all
    controls of a class (variant None) and per variant; tasks resampled with
    ``settings.seed`` (``group_by`` does not apply). See ``CONTROLS_SCHEMA``."""
    check_settings(settings)
    c = _with_jury(_controls(controls))
    tasks = sorted(set(c["task_id"].to_list()))
    m = _rate_matrix(c, tasks, settings.anchor)
    counts = resample_counts(settings.seed, settings.n_resamples, len(tasks))
    est = ratio(m.num, m.den, counts, settings.confidence)
    right, runs = m.num.sum(axis=0), m.den.sum(axis=0)
    low, high = share_bounds(est, right, runs, settings.confidence)
    return tuple(
        ControlRate(
            judge_id=j,
            variant=v,
            measure=measure,
            estimate=float(est.estimate[k]),
            n_tasks=int(est.n_clusters[k]),
            n_runs=int(runs[k]),
            n_right=int(right[k]),
            n_near_anchor=int(m.near[k]),
            se=float(est.se[k]),
            ci_low=float(low[k]),
            ci_high=float(high[k]),
        )
        for k, (j, v, measure) in enumerate(m.keys)
    )


def rogan_gladen(q: F64, se: F64, sp: F64) -> tuple[F64, F64]:
    """(unclipped, clipped) corrected shares; NaN where Se + Sp ≤ 1 or an input is NaN."""
    youden = se + sp - 1.0
    with np.errstate(invalid="ignore", divide="ignore"):
        raw = np.where(youden > 0, (q + sp - 1.0) / youden, np.nan)
    return raw, np.clip(raw, 0.0, 1.0)


def _pass_matrix(runs: pl.DataFrame, tasks: list[str], anchor: int) -> tuple[list[str], F64, F64]:
    """Per agent: per-task pass share (numerator) and task presence (denominator)."""
    per = runs.group_by("agent_id", "task_id").agg((pl.col("score") >= anchor).mean().alias("s"))
    agents = sorted(set(runs["agent_id"].to_list()))
    num = np.zeros((len(tasks), len(agents)))
    den = np.zeros_like(num)
    t_of = {t: i for i, t in enumerate(tasks)}
    a_of = {a: i for i, a in enumerate(agents)}
    for a, t, s in per.iter_rows():
        num[t_of[t], a_of[a]] = s
        den[t_of[t], a_of[a]] = 1.0
    return agents, num, den


def corrected_pass_rows(
    runs: pl.DataFrame,
    controls: pl.DataFrame,
    settings: AnalysisSettings,
    *,
    judge_id: str | None = None,
) -> tuple[CorrectedPassShare, ...]:
    """Each agent's Rogan–Gladen pass share from ``runs`` (``SCORED_RUNS_SCHEMA``, scored by
    ``judge_id`` or by the jury's mean when None) and that judge's Se, Sp on ``controls``,
    with Lang–Reiczigel's interval.

    One bootstrap resamples the union of both tables' tasks; its standard errors give each
    of q, Se and Sp the effective sample size (n / design effect) the interval uses."""
    check_settings(settings)
    r = validated(runs, "runs", SCORED_RUNS_SCHEMA, ("run_id",))
    c = _with_jury(_controls(controls))
    if judge_id is not None and judge_id not in set(c["judge_id"].drop_nulls().to_list()):
        raise StatisticsInputError(f"table 'controls': no control verdict of judge {judge_id!r}")
    c = c.filter(
        pl.col("judge_id").is_null() if judge_id is None else pl.col("judge_id") == judge_id
    )
    tasks = sorted(set(c["task_id"].to_list()) | set(r["task_id"].to_list()))
    m = _rate_matrix(c, tasks, settings.anchor)
    agents, q_num, q_den = _pass_matrix(r, tasks, settings.anchor)
    counts = resample_counts(settings.seed, settings.n_resamples, len(tasks))
    q = ratio(q_num, q_den, counts, settings.confidence)
    rates = ratio(m.num, m.den, counts, settings.confidence)
    return _corrected(agents, q, rates, m, r, judge_id, settings)


def corrected_pass_rows_by_family(
    runs: pl.DataFrame,
    controls: pl.DataFrame,
    families: Mapping[str, str],
    settings: AnalysisSettings,
    *,
    judge_id: str | None = None,
) -> tuple[CorrectedPassShare, ...]:
    """:func:`corrected_pass_rows` for each family's agents apart, with the Se and Sp of
    the controls in that family's style: those that wore one of its agents (`families`:
    run id → the family its request wears; a control answers in its look-alike's house
    style, and a judge that favours a family's style passes that family's work, sound or
    not, more often). A family no control wore has no Se or Sp: its corrected shares are
    not estimable (NaN, warned), never the other families' rates. Rows in agent order; a
    family none of whose controls this judge rated has none."""
    of = pl.DataFrame(
        {"run_id": list(families), "family": list(families.values())},
        schema={"run_id": pl.String, "family": pl.String},
    )
    r = runs.join(of, on="run_id", how="left").with_columns(pl.col("family").fill_null(""))
    c = controls.join(of, on="run_id", how="left").with_columns(pl.col("family").fill_null(""))
    rows: list[CorrectedPassShare] = []
    for family in sorted(set(r["family"].to_list())):
        mine = pl.col("family") == family
        try:
            rows += corrected_pass_rows(
                r.filter(mine).drop("family"),
                c.filter(mine).drop("family"),
                settings,
                judge_id=judge_id,
            )
        except StatisticsInputError:
            continue  # this judge rated no control in the family's style
    return tuple(sorted(rows, key=lambda row: row.agent_id))


class _Evidence(NamedTuple):
    """One of Se, Sp: the estimate and its effective number of controls."""

    estimate: float
    n_effective: float


def _evidence(rates: Estimate, m: _Rates, key: _Key) -> _Evidence:
    k = m.keys.index(key)
    n = m.den[:, k].sum()
    est = rates.estimate[k : k + 1]
    trials = effective_trials(
        est, np.array([n]), rates.se[k : k + 1], rates.n_clusters[k : k + 1].astype(np.float64)
    )
    return _Evidence(float(est[0]), float(trials[0]))


def _variant_specificities(rates: Estimate, m: _Rates, judge_id: str | None) -> tuple[float, float]:
    """The lowest and highest specificity over the known-bad variants with controls."""
    sp = [
        rates.estimate[k]
        for k, (j, v, measure) in enumerate(m.keys)
        if j == judge_id and v is not None and measure == "specificity" and m.den[:, k].sum()
    ]
    return (float(min(sp)), float(max(sp))) if sp else (math.nan, math.nan)


def _corrected(
    agents: list[str],
    q: Estimate,
    rates: Estimate,
    m: _Rates,
    r: pl.DataFrame,
    judge_id: str | None,
    settings: AnalysisSettings,
) -> tuple[CorrectedPassShare, ...]:
    se = _evidence(rates, m, (judge_id, None, "sensitivity"))
    sp = _evidence(rates, m, (judge_id, None, "specificity"))
    close = (pl.col("score") - settings.anchor).abs() <= FRAGILE_BAND
    per = r.group_by("agent_id").agg(pl.len().alias("n"), close.sum().alias("near"))
    n_runs = {a: n for a, n, _ in per.iter_rows()}
    near = {a: k for a, _, k in per.iter_rows()}
    n = np.array([float(n_runs[a]) for a in agents])
    raw_low, raw_high = share_bounds(q, q.estimate * n, n, settings.confidence)
    full = np.ones_like(q.estimate)
    unclipped, est = rogan_gladen(q.estimate, full * se.estimate, full * sp.estimate)
    n_q = effective_trials(q.estimate, n, q.se, q.n_clusters.astype(np.float64))
    lr = lang_reiczigel(
        q.estimate,
        n_q,
        full * se.estimate,
        full * se.n_effective,
        full * sp.estimate,
        full * sp.n_effective,
        settings.confidence,
    )
    sp_low, sp_high = _variant_specificities(rates, m, judge_id)
    _, at_low = rogan_gladen(q.estimate, full * se.estimate, full * sp_low)
    _, at_high = rogan_gladen(q.estimate, full * se.estimate, full * sp_high)
    return tuple(
        CorrectedPassShare(
            agent_id=a,
            judge_id=judge_id,
            raw_share=float(q.estimate[k]),
            raw_ci_low=float(raw_low[k]),
            raw_ci_high=float(raw_high[k]),
            sensitivity=se.estimate,
            specificity=sp.estimate,
            unclipped=float(unclipped[k]),
            estimate=float(est[k]),
            ci_low=float(lr.low[k]),
            ci_high=float(lr.high[k]),
            unbounded=bool(lr.unbounded[k]),
            n_tasks=int(q.n_clusters[k]),
            n_runs=int(n_runs[a]),
            n_near_anchor=int(near[a]),
            lowest_variant_specificity=sp_low,
            highest_variant_specificity=sp_high,
            at_lowest_specificity=float(at_low[k]),
            at_highest_specificity=float(at_high[k]),
        )
        for k, a in enumerate(agents)
    )
