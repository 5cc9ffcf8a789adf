"""Rank stability and paired differences between agents, from the overall-score resamples.

Both reuse the same task resamples as the overall scores, so every comparison is
paired on tasks: a resample that draws a hard task draws it for every agent.
"""

from __future__ import annotations

import numpy as np

from ._bootstrap import columns, difference, percentile_interval
from ._context import Context
from ._no_spread import DIFFERENCE_RANGE, no_spread, with_no_spread
from ._panel import F64
from ._results import AgentRank, PairwiseDifference

__all__ = ["average_ranks", "pairwise_rows", "rank_rows", "top_shares"]


def average_ranks(scores: F64) -> F64:
    """Ranks along the last axis, 1 = highest score, ties sharing their average rank."""
    x = scores[..., None, :]
    y = scores[..., :, None]
    higher = (x > y).sum(axis=-1)
    tied = (x == y).sum(axis=-1) - 1
    return np.asarray(1.0 + higher + 0.5 * tied, dtype=np.float64)


def top_shares(scores: F64) -> F64:
    """Each agent's share of rank 1 per row: 1/k for each of k agents tied at the top.

    Counting only a strict rank 1 gives tied leaders nothing, and P(rank 1) would no
    longer sum to 1 over the agents.
    """
    top = scores == scores.max(axis=-1, keepdims=True)
    return np.asarray(top / top.sum(axis=-1, keepdims=True), dtype=np.float64)


def rank_rows(ctx: Context) -> list[AgentRank]:
    """Each agent's rank (1 = best), its bootstrap distribution and P(rank 1).

    Agents tied at the top of a resample share its rank 1 equally, so P(rank 1) sums
    to 1 over the ranked agents.

    Only agents with a score are ranked (the others get NaN). Resamples in which one
    of them has no task are left out of the rank distribution, since a rank needs every
    ranked agent scored.
    """
    est = ctx.overall
    a_n = est.estimate.size
    ranked = ~np.isnan(est.estimate)
    point = np.full(a_n, np.nan)
    point[ranked] = average_ranks(est.estimate[ranked])
    sub = est.draws[:, ranked]
    sub = sub[~np.isnan(sub).any(axis=1)]
    ranks = np.full((sub.shape[0], a_n), np.nan)
    ranks[:, ranked] = average_ranks(sub)
    low, high = percentile_interval(ranks, ctx.confidence)
    n = ranks.shape[0]
    mean_rank = ranks.mean(axis=0) if n else np.full(a_n, np.nan)
    p1 = np.full(a_n, np.nan)
    if n and ranked.any():
        p1[ranked] = top_shares(sub).mean(axis=0)
    return [
        AgentRank(
            **ctx.agent_key(agent),
            estimate=float(est.estimate[a]),
            rank=float(point[a]),
            mean_rank=float(mean_rank[a]),
            rank_ci_low=float(low[a]),
            rank_ci_high=float(high[a]),
            p_rank_1=float(p1[a]),
        )
        for a, agent in enumerate(ctx.panel.agent_ids)
    ]


def pairwise_rows(ctx: Context) -> list[PairwiseDifference]:
    """Overall score of agent a minus agent b for every pair a before b (sorted ids)."""
    agents = ctx.panel.agent_ids
    ia, ib = np.triu_indices(len(agents), k=1)
    est = difference(columns(ctx.overall, ia), columns(ctx.overall, ib), ctx.confidence)
    flat = no_spread(est)
    est = with_no_spread(est, *DIFFERENCE_RANGE, ctx.confidence)
    with np.errstate(invalid="ignore"):
        ok = ~np.isnan(est.draws)
        better = np.where(ok, est.draws > 0, False).sum(axis=0) / ok.sum(axis=0)
    return [
        PairwiseDifference(
            group=ctx.group,
            agent_a=agents[a],
            agent_b=agents[b],
            difference=float(est.estimate[i]),
            p_a_better=float(better[i]),
            **est.interval(i),
            no_spread=bool(flat[i]),
        )
        for i, (a, b) in enumerate(zip(ia, ib, strict=True))
    ]
