"""Run-level operations: epoch spread, latency/cost/steps per run, and run accounting."""

from __future__ import annotations

import numpy as np
import polars as pl

from ._context import Context
from ._results import AgentCost, EpochSpread, RunAccounting, RunCost

__all__ = [
    "COST_METRICS",
    "accounting_rows",
    "agent_cost_rows",
    "clamp_cached",
    "cost_rows",
    "epoch_spread_rows",
    "summary",
]

COST_METRICS: tuple[str, ...] = (
    "latency_s",
    "cost_usd",
    "steps",
    "input_tokens",
    "output_tokens",
    "cached_tokens",
)
"""Per-run resource columns summarised by :func:`cost_rows`."""


def epoch_spread_rows(ctx: Context) -> list[EpochSpread]:
    """Within-(task, agent) spread of run scores across epochs, per agent."""
    p = ctx.panel
    a_n = len(p.agent_ids)
    score = p.run_score
    ok = ~np.isnan(score)
    cell = (p.run_task * a_n + p.run_agent)[ok]
    x = score[ok]
    size = len(p.task_ids) * a_n
    n = np.bincount(cell, minlength=size).astype(np.float64)
    s = np.bincount(cell, weights=x, minlength=size).astype(np.float64)
    mean = np.divide(s, n, out=np.zeros_like(s), where=n > 0)
    ss = np.bincount(cell, weights=(x - mean[cell]) ** 2, minlength=size).astype(np.float64)
    multi = n >= 2
    var = np.divide(ss, n - 1, out=np.zeros_like(ss), where=multi)
    agent_of_cell = np.arange(size) % a_n
    rows: list[EpochSpread] = []
    for a, agent in enumerate(p.agent_ids):
        sel = multi & (agent_of_cell == a)
        k = int(sel.sum())
        rows.append(
            EpochSpread(
                **ctx.agent_key(agent),
                n_cells=k,
                mean_within_sd=float(np.sqrt(var[sel]).mean()) if k else float("nan"),
                pooled_within_sd=float(np.sqrt(var[sel].mean())) if k else float("nan"),
            )
        )
    return rows


def clamp_cached(frame: pl.DataFrame) -> pl.DataFrame:
    """Cached tokens never above input tokens, as :func:`assay.pricing.cost` prices them."""
    return frame.with_columns(
        pl.min_horizontal("cached_tokens", "input_tokens").alias("cached_tokens")
    )


def cost_rows(ctx: Context) -> list[RunCost]:
    """Mean, median and 95th percentile (linear interpolation) of each metric per agent.

    Over runs that are not infrastructure failures, scored or not: an agent's failed
    runs cost time and money too. Cached tokens are clamped to the input tokens.
    """
    runs = clamp_cached(ctx.tables.runs.filter(~pl.col("infrastructure_failure")))
    rows: list[RunCost] = []
    for agent in ctx.panel.agent_ids:
        mine = runs.filter(pl.col("agent_id") == agent)
        for metric in COST_METRICS:
            v = mine[metric].cast(pl.Float64).to_numpy()
            mean, p50, p95 = summary(v)
            rows.append(
                RunCost(
                    **ctx.agent_key(agent),
                    metric=metric,
                    n_runs=int(v.size),
                    mean=mean,
                    p50=p50,
                    p95=p95,
                )
            )
    return rows


def summary(v: np.ndarray[tuple[int], np.dtype[np.float64]]) -> tuple[float, float, float]:
    """Mean, median and 95th percentile (linear interpolation); NaN when empty."""
    if v.size == 0:
        return (float("nan"),) * 3
    return float(v.mean()), float(np.quantile(v, 0.5)), float(np.quantile(v, 0.95))


def agent_cost_rows(ctx: Context) -> list[AgentCost]:
    """Each agent's total cost and its cost per task passed (a run at or above the anchor)."""
    p = ctx.panel
    runs = ctx.tables.runs.filter(~pl.col("infrastructure_failure"))
    passed = np.nan_to_num(p.run_score) >= p.anchor
    rows: list[AgentCost] = []
    for a, agent in enumerate(p.agent_ids):
        mine = runs.filter(pl.col("agent_id") == agent)
        total = float(mine["cost_usd"].sum())
        tasks = len(set(p.run_task[(p.run_agent == a) & passed].tolist()))
        rows.append(
            AgentCost(
                **ctx.agent_key(agent),
                n_runs=mine.height,
                cost_usd=total,
                n_passed_tasks=tasks,
                cost_per_passed_task=total / tasks if tasks else float("nan"),
            )
        )
    return rows


def accounting_rows(ctx: Context) -> list[RunAccounting]:
    """How each agent's runs split: scored, infrastructure failures, unscored, empty."""
    runs = ctx.tables.runs.with_columns(
        pl.col("run_id")
        .is_in(pl.Series(ctx.panel.run_ids, dtype=pl.String).implode())
        .alias("scored")
    )
    rows: list[RunAccounting] = []
    for agent in ctx.panel.agent_ids:
        mine = runs.filter(pl.col("agent_id") == agent)
        infra = mine["infrastructure_failure"]
        scored = int(mine["scored"].sum())
        rows.append(
            RunAccounting(
                **ctx.agent_key(agent),
                n_runs=mine.height,
                n_scored=scored,
                n_infrastructure_failures=int(infra.sum()),
                n_unscored=mine.height - scored - int(infra.sum()),
                n_empty_artifacts=int((mine["empty_artifacts"] & ~infra).sum()),
            )
        )
    return rows
