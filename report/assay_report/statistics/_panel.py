"""Dense numpy view of the input tables that every statistic is computed from.

Building it once (polars group-bys, then scatter into arrays) keeps the statistics
themselves pure array code, which is what makes 10k-resample bootstraps cheap.

Scored runs are runs that are not infrastructure failures and have at least one rating;
ratings of infrastructure-failed runs are dropped. The cluster universe is every task
with at least one run that is not an infrastructure failure.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import polars as pl

from ._tables import StatisticsInputError, Tables

__all__ = ["Panel", "cell_means", "cell_sums", "prepare"]

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]


@dataclass(frozen=True, kw_only=True)
class Panel:
    """Arrays over tasks (T), agents (A), judges (J), dimensions (D), scored runs (R)."""

    task_ids: list[str]
    agent_ids: list[str]
    agent_families: list[str]
    judge_ids: list[str]
    judge_families: list[str]
    dimensions: list[str]
    run_ids: list[str]
    run_task: I64
    """(R,) task index of each scored run."""
    run_agent: I64
    """(R,) agent index of each scored run."""
    judge_dim: F64
    """(R, J, D) mean over samples of a judge's score on a dimension; NaN if not rated."""
    judge_score: F64
    """(R, J) mean of all ratings a judge gave the run (samples × dimensions); NaN if none."""
    n_ratings: F64
    """(R, J) number of ratings a judge gave the run."""
    n_below: F64
    """(R, J) number of those ratings below the anchor."""
    n_verdicts: F64
    """(R, J) number of verdicts (samples) a judge gave the run."""
    tag_names: list[str]
    tagged: F64
    """(R, G) number of the run's verdicts carrying each tag."""
    anchor: int

    @property
    def run_score(self) -> F64:
        """(R,) mean over judges of each judge's run score (judges weigh equally)."""
        return _nanmean(self.judge_score, axis=1)

    @property
    def dim_score(self) -> F64:
        """(R, D) mean over judges of each judge's sample-mean score on the dimension."""
        return _nanmean(self.judge_dim, axis=1)


def _nanmean(x: F64, axis: int) -> F64:
    # np.nanmean warns on all-NaN slices; an absent value is a legitimate NaN here.
    ok = ~np.isnan(x)
    n = ok.sum(axis=axis)
    s = np.where(ok, x, 0.0).sum(axis=axis)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.asarray(np.where(n > 0, s / np.maximum(n, 1), np.nan), dtype=np.float64)


def _codes(values: pl.Series, keys: list[str]) -> I64:
    lookup = pl.DataFrame(
        {"k": pl.Series(keys, dtype=pl.String), "i": np.arange(len(keys), dtype=np.int64)}
    )
    joined = pl.DataFrame({"k": values}).join(lookup, on="k", how="left", maintain_order="left")
    return joined["i"].to_numpy().astype(np.int64)


def _places(values: pl.Series, keys: list[str]) -> I64:
    """Each value's place in `keys`, which hold every one of them (an enum's codes: a
    hash per value, where a join or a rank sorted all of them)."""
    return values.cast(pl.Enum(keys)).to_physical().to_numpy().astype(np.int64)


def _weighed_counts(cell: I64, weights: npt.ArrayLike, n_cells: int) -> F64:
    """(n_cells,) the sum of `weights` in each cell (exact for the integer scores)."""
    return np.asarray(np.bincount(cell, weights=weights, minlength=n_cells), dtype=np.float64)


def _distinct_per_cell(cell: I64, value: I64, n_cells: int) -> F64:
    """(n_cells,) how many distinct values each cell holds."""
    if not cell.size:
        return np.zeros(n_cells)
    low = int(value.min())
    span = int(value.max()) - low + 1
    if n_cells * span <= 4 * cell.size + 4096:  # small values (samples): a bitmap
        seen = np.zeros(n_cells * span, dtype=np.bool_)
        seen[cell * span + (value - low)] = True
        return np.asarray(seen.reshape(n_cells, span).sum(axis=1), dtype=np.float64)
    pairs = np.unique(np.stack([cell, value], axis=1), axis=0)
    return np.bincount(pairs[:, 0], minlength=n_cells).astype(np.float64)


def _one_family(df: pl.DataFrame, key: str, fam: str, table: str) -> dict[str, str]:
    fams = df.group_by(key).agg(pl.col(fam).unique().sort())
    out: dict[str, str] = {}
    for k, f in fams.iter_rows():
        if len(f) != 1:
            raise StatisticsInputError(f"table {table!r}: {key} {k!r} has {fam} values {f}")
        out[k] = f[0]
    return out


def prepare(tables: Tables, *, anchor: int = 8) -> Panel:
    """Turn validated tables into a :class:`Panel` (deterministic: every axis is sorted)."""
    runs, ratings = tables.runs, tables.ratings
    ok_runs = runs.filter(~pl.col("infrastructure_failure"))
    task_ids = sorted(ok_runs["task_id"].unique().to_list())
    agent_fam = _one_family(runs, "agent_id", "agent_family", "runs")
    agent_ids = sorted(agent_fam)
    ok_ids = pl.Enum(ok_runs["run_id"].unique())
    rated = ratings.filter(ratings["run_id"].cast(ok_ids, strict=False).is_not_null())
    judge_fam = _one_family(rated, "judge_id", "judge_family", "ratings")
    judge_ids = sorted(judge_fam)
    dims = sorted(rated["dimension"].unique().to_list())

    per_run = (
        rated.group_by("run_id").agg(pl.col("task_id").first(), pl.col("agent_id").first())
    ).sort("run_id")
    run_ids = per_run["run_id"].to_list()
    r_n, j_n, d_n = len(run_ids), len(judge_ids), len(dims)

    # Each rating's cell as integer codes (every axis sorted, as the lists above), then the
    # per-cell figures by counting: group-bys and joins on the string keys of every
    # rating took most of a 10x panel's time.
    rj = _places(rated["run_id"], run_ids) * j_n + _places(rated["judge_id"], judge_ids)
    score = rated["score"].to_numpy().astype(np.float64)
    cells = r_n * j_n
    n_ratings = np.bincount(rj, minlength=cells).astype(np.float64).reshape(r_n, j_n)
    n_below = _weighed_counts(rj, score < anchor, cells).reshape(r_n, j_n)
    sums = _weighed_counts(rj, score, cells).reshape(r_n, j_n)
    n_verdicts = _distinct_per_cell(rj, rated["sample"].to_numpy(), cells).reshape(r_n, j_n)
    with np.errstate(invalid="ignore", divide="ignore"):
        judge_score = np.where(n_ratings > 0, sums / np.maximum(n_ratings, 1), np.nan)
        rjd = rj * d_n + _places(rated["dimension"], dims)
        n_dim = np.bincount(rjd, minlength=cells * d_n)
        dim_sums = _weighed_counts(rjd, score, cells * d_n)
        judge_dim = np.where(n_dim > 0, dim_sums / np.maximum(n_dim, 1), np.nan)
    judge_dim = judge_dim.reshape(r_n, j_n, d_n)

    # A tag counts only on a verdict that exists in ratings; duplicates count once.
    verdicts = rated.select("run_id", "judge_id", "sample").unique()
    tg = (
        tables.tags.join(verdicts, on=["run_id", "judge_id", "sample"], how="semi")
        .select("run_id", "judge_id", "sample", "tag")
        .unique()
        .group_by("run_id", "tag")
        .agg(pl.len().alias("n"))
    )
    tag_names = sorted(tg["tag"].unique().to_list())
    tagged = np.zeros((r_n, len(tag_names)))
    tagged[_codes(tg["run_id"], run_ids), _codes(tg["tag"], tag_names)] = tg["n"].to_numpy()

    return Panel(
        task_ids=task_ids,
        agent_ids=agent_ids,
        agent_families=[agent_fam[a] for a in agent_ids],
        judge_ids=judge_ids,
        judge_families=[judge_fam[j] for j in judge_ids],
        dimensions=dims,
        run_ids=run_ids,
        run_task=_codes(per_run["task_id"], task_ids),
        run_agent=_codes(per_run["agent_id"], agent_ids),
        judge_dim=judge_dim,
        judge_score=judge_score,
        n_ratings=n_ratings,
        n_below=n_below,
        n_verdicts=n_verdicts,
        tag_names=tag_names,
        tagged=tagged,
        anchor=anchor,
    )


def cell_means(panel: Panel, values: F64) -> tuple[F64, F64]:
    """Per (task, agent) mean over runs of run-level ``values`` (R, K) ignoring NaN.

    Returns ``(num, den)``, both (T, A·K) with column ``a·K + k``: ``num`` is the cell
    mean (0 where absent) and ``den`` is 1 where the cell has a value, else 0. These are
    the numerator and denominator of a mean-over-tasks ratio estimator.
    """
    v = values.reshape(values.shape[0], int(np.prod(values.shape[1:])))
    t_n, a_n, k_n = len(panel.task_ids), len(panel.agent_ids), v.shape[1]
    cell = panel.run_task * a_n + panel.run_agent
    ok = ~np.isnan(v)
    s = np.zeros((t_n * a_n, k_n))
    n = np.zeros((t_n * a_n, k_n))
    np.add.at(s, cell, np.where(ok, v, 0.0))
    np.add.at(n, cell, ok.astype(np.float64))
    den = (n > 0).astype(np.float64)
    num = np.divide(s, n, out=np.zeros_like(s), where=n > 0)
    return num.reshape(t_n, a_n * k_n), den.reshape(t_n, a_n * k_n)


def cell_sums(panel: Panel, values: F64) -> F64:
    """Per (task, agent) sum over runs of ``values`` (R, K) → (T, A·K), column ``a·K + k``."""
    v = values.reshape(values.shape[0], int(np.prod(values.shape[1:])))
    t_n, a_n, k_n = len(panel.task_ids), len(panel.agent_ids), v.shape[1]
    out = np.zeros((t_n * a_n, k_n))
    np.add.at(out, panel.run_task * a_n + panel.run_agent, v)
    return out.reshape(t_n, a_n * k_n)
