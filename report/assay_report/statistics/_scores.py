"""Scores: per agent (overall, per dimension, per judge), pass rates, strictness, gap.

Run score: the mean over judges of each judge's mean rating of the run (over its samples
and dimensions), so every judge weighs the same whatever its sample count. Agent score:
the mean over tasks of the mean over that task's scored runs (epochs), so every task
weighs the same whatever its number of runs.
"""

from __future__ import annotations

import numpy as np

from ._bootstrap import Estimate, difference
from ._context import Context
from ._no_spread import DIFFERENCE_RANGE, SCORE_RANGE, no_spread, with_no_spread
from ._panel import F64, cell_means
from ._proportions import share_intervals
from ._results import AgentScore, BelowAnchorShare, CommunicationGap, PassRate, UnpassedTask
from ._tables import StatisticsInputError

__all__ = [
    "below_anchor_inputs",
    "below_anchor_rows",
    "communication_gap_inputs",
    "communication_gap_rows",
    "dimension_inputs",
    "dimension_score_rows",
    "judge_inputs",
    "judge_score_rows",
    "overall_score_rows",
    "pass_rate_inputs",
    "pass_rate_rows",
    "unpassed_task_rows",
]


def _runs_per_agent(ctx: Context, values: F64) -> F64:
    """(A, K) number of runs with a non-NaN value per agent and column."""
    v = values.reshape(values.shape[0], int(np.prod(values.shape[1:])))
    out = np.zeros((len(ctx.panel.agent_ids), v.shape[1]))
    np.add.at(out, ctx.panel.run_agent, (~np.isnan(v)).astype(np.float64))
    return out


def _score_rows(
    ctx: Context, est: Estimate, values: F64, dims: list[str | None], judges: list[str | None]
) -> list[AgentScore]:
    # Columns are agent-major: column a·K + k, with k indexing dims × judges.
    k_n = len(dims) * len(judges)
    runs = _runs_per_agent(ctx, values)
    flat = no_spread(est)
    est = with_no_spread(est, *SCORE_RANGE, ctx.confidence)
    rows: list[AgentScore] = []
    for a, agent in enumerate(ctx.panel.agent_ids):
        for k in range(k_n):
            c = a * k_n + k
            rows.append(
                AgentScore(
                    **ctx.agent_key(agent),
                    dimension=dims[k // len(judges)],
                    judge_id=judges[k % len(judges)],
                    estimate=float(est.estimate[c]),
                    n_tasks=int(est.n_clusters[c]),
                    n_runs=int(runs[a, k]),
                    **est.interval(c),
                    no_spread=bool(flat[c]),
                )
            )
    return rows


def overall_score_rows(ctx: Context) -> list[AgentScore]:
    """Each agent's overall score."""
    return _score_rows(ctx, ctx.overall, ctx.panel.run_score[:, None], [None], [None])


def dimension_inputs(ctx: Context) -> tuple[F64, F64]:
    """Task sums of each agent's dimension scores, and of its runs rated on them."""
    return cell_means(ctx.panel, ctx.panel.dim_score)


def dimension_score_rows(ctx: Context) -> list[AgentScore]:
    """Each agent's score on each dimension (judges averaged as for the run score)."""
    est = ctx.ratio(*ctx.inputs(dimension_inputs))
    return _score_rows(ctx, est, ctx.panel.dim_score, list(ctx.panel.dimensions), [None])


def judge_inputs(ctx: Context) -> tuple[F64, F64]:
    """Task sums of each agent's scores from each judge, and of its runs that judge scored."""
    return cell_means(ctx.panel, ctx.panel.judge_score)


def judge_score_rows(ctx: Context) -> list[AgentScore]:
    """Each judge's own leaderboard: agent scores from that judge's ratings alone."""
    est = ctx.ratio(*ctx.inputs(judge_inputs))
    return _score_rows(ctx, est, ctx.panel.judge_score, [None], list(ctx.panel.judge_ids))


def _passed(ctx: Context) -> F64:
    score = ctx.panel.run_score
    return np.where(np.isnan(score), np.nan, (score >= ctx.panel.anchor).astype(np.float64))


def pass_rate_inputs(ctx: Context) -> tuple[F64, F64]:
    """Task sums of each agent's passing runs, and of its scored runs."""
    return cell_means(ctx.panel, ctx.inputs(_passed)[:, None])


def pass_rate_rows(ctx: Context) -> list[PassRate]:
    """Task-balanced share of each agent's scored runs with run score ≥ anchor."""
    passed = ctx.inputs(_passed)
    est = ctx.ratio(*ctx.inputs(pass_rate_inputs))
    runs = _runs_per_agent(ctx, passed)[:, 0]
    n_passed = np.zeros(len(ctx.panel.agent_ids))
    np.add.at(n_passed, ctx.panel.run_agent, np.nan_to_num(passed))
    # Task-balanced: the binomial side counts q·n of n, which is n_passed when epochs agree.
    iv = share_intervals(est, est.estimate * runs, runs.astype(np.float64), ctx.confidence)
    return [
        PassRate(
            **ctx.agent_key(agent),
            pass_rate=float(est.estimate[a]),
            n_tasks=int(est.n_clusters[a]),
            n_runs=int(runs[a]),
            n_passed=int(n_passed[a]),
            **iv[a],
        )
        for a, agent in enumerate(ctx.panel.agent_ids)
    ]


def below_anchor_inputs(ctx: Context) -> tuple[F64, F64]:
    """Task sums of ratings below the anchor and of all ratings: pooled, then per judge."""
    p = ctx.panel
    t_n, j_n = len(p.task_ids), len(p.judge_ids)
    below = np.zeros((t_n, j_n))
    total = np.zeros((t_n, j_n))
    np.add.at(below, p.run_task, p.n_below)
    np.add.at(total, p.run_task, p.n_ratings)
    return np.column_stack([below.sum(axis=1), below]), np.column_stack([total.sum(axis=1), total])


def below_anchor_rows(ctx: Context) -> list[BelowAnchorShare]:
    """Share of individual ratings below the anchor: all judges pooled, then per judge."""
    p = ctx.panel
    num, den = ctx.inputs(below_anchor_inputs)
    est = ctx.ratio(num, den)
    iv = share_intervals(est, num.sum(axis=0), den.sum(axis=0), ctx.confidence)
    judges: list[str | None] = [None, *p.judge_ids]
    return [
        BelowAnchorShare(
            group=ctx.group,
            judge_id=judge,
            share=float(est.estimate[k]),
            n_ratings=int(den[:, k].sum()),
            n_below=int(num[:, k].sum()),
            **iv[k],
        )
        for k, judge in enumerate(judges)
    ]


def unpassed_task_rows(ctx: Context) -> list[UnpassedTask]:
    """Tasks where no scored run of any agent reaches the anchor."""
    p = ctx.panel
    t_n = len(p.task_ids)
    best = np.full(t_n, -np.inf)
    np.maximum.at(best, p.run_task, np.nan_to_num(p.run_score, nan=-np.inf))
    n_runs = np.bincount(p.run_task, minlength=t_n)
    return [
        UnpassedTask(
            group=ctx.group,
            task_id=task,
            n_runs=int(n_runs[t]),
            best_run_score=float(best[t]) if np.isfinite(best[t]) else float("nan"),
        )
        for t, task in enumerate(p.task_ids)
        if not best[t] >= p.anchor
    ]


def communication_gap_inputs(
    ctx: Context, communication: str, scientific_accuracy: str
) -> tuple[F64, ...]:
    """Task sums of each agent's two dimension scores over the runs rated on both (numerator
    and denominator of each); nothing when either dimension is absent."""
    p = ctx.panel
    if communication not in p.dimensions or scientific_accuracy not in p.dimensions:
        return ()
    comm = p.dim_score[:, p.dimensions.index(communication)]
    acc = p.dim_score[:, p.dimensions.index(scientific_accuracy)]
    # Only runs with both dimensions rated, so the two means cover the same runs.
    both = ~np.isnan(comm) & ~np.isnan(acc)
    return (
        *cell_means(p, np.where(both, comm, np.nan)[:, None]),
        *cell_means(p, np.where(both, acc, np.nan)[:, None]),
    )


def communication_gap_rows(
    ctx: Context,
    communication: str = "communication",
    scientific_accuracy: str = "scientific_accuracy",
) -> list[CommunicationGap]:
    """communication − scientific_accuracy agent scores, paired on tasks."""
    p = ctx.panel
    for key in (communication, scientific_accuracy):
        if key not in p.dimensions:
            raise StatisticsInputError(f"table 'ratings': no dimension {key!r} to compute the gap")
    comm_num, comm_den, acc_num, acc_den = ctx.inputs(
        communication_gap_inputs, communication, scientific_accuracy
    )
    e_comm = ctx.ratio(comm_num, comm_den)
    e_acc = ctx.ratio(acc_num, acc_den)
    gap = difference(e_comm, e_acc, ctx.confidence)
    flat = no_spread(gap)
    gap = with_no_spread(gap, *DIFFERENCE_RANGE, ctx.confidence)
    return [
        CommunicationGap(
            **ctx.agent_key(agent),
            communication=float(e_comm.estimate[a]),
            scientific_accuracy=float(e_acc.estimate[a]),
            gap=float(gap.estimate[a]),
            n_tasks=int(gap.n_clusters[a]),
            **gap.interval(a),
            no_spread=bool(flat[a]),
        )
        for a, agent in enumerate(p.agent_ids)
    ]
