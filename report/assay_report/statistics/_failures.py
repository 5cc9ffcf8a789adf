"""Failure-tag rates and the empty-artifact rate per agent, with task-cluster CIs.

Both are pooled shares (hits / trials over all of the agent's runs), bootstrapped as
ratio estimators over tasks, their intervals never narrower than Wilson's at the counts
(:mod:`._proportions`): a verdict is one run × judge × sample, and a run counts
for the empty-artifact rate unless it failed for infrastructure reasons.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from ._context import Context
from ._panel import F64, cell_sums
from ._proportions import share_intervals
from ._results import EmptyArtifactRate, TagRate

__all__ = [
    "DEFAULT_FIRST_TAGS",
    "empty_artifact_inputs",
    "empty_artifact_rows",
    "tag_rate_inputs",
    "tag_rate_rows",
]

DEFAULT_FIRST_TAGS: tuple[str, ...] = ("overclaiming",)
"""Tags listed before all others, in this order (the rest follow alphabetically)."""


def _tag_order(observed: list[str], tags: tuple[str, ...], first: tuple[str, ...]) -> list[str]:
    names = set(observed) | set(tags) | set(first)
    head = [t for t in first if t in names]
    return head + sorted(names - set(head))


def tag_rate_inputs(ctx: Context, tags: tuple[str, ...], first: tuple[str, ...]) -> tuple[F64, F64]:
    """Task sums of each agent's verdicts with each tag, column a·G + g (tags in
    :func:`tag_rate_rows`' order), and of its verdicts."""
    p = ctx.panel
    order = _tag_order(p.tag_names, tags, first)
    tagged = np.zeros((len(p.run_ids), len(order)))
    for g, name in enumerate(p.tag_names):
        tagged[:, order.index(name)] = p.tagged[:, g]
    verdicts = cell_sums(p, p.n_verdicts.sum(axis=1)[:, None])  # (T, A)
    return cell_sums(p, tagged), np.repeat(verdicts, len(order), axis=1)


def tag_rate_rows(
    ctx: Context, tags: tuple[str, ...] = (), first: tuple[str, ...] = DEFAULT_FIRST_TAGS
) -> list[TagRate]:
    """Per tag (``first`` tags first) and agent: tagged verdicts / verdicts.

    ``tags`` adds tags that should appear even if never used (rate 0); ``first`` tags
    always appear.
    """
    p = ctx.panel
    order = _tag_order(p.tag_names, tags, first)
    g_n = len(order)
    num, den = ctx.inputs(tag_rate_inputs, tags, first)
    est = ctx.ratio(num, den)
    iv = share_intervals(est, num.sum(axis=0), den.sum(axis=0), ctx.confidence)
    rows: list[TagRate] = []
    for g, tag in enumerate(order):
        for a, agent in enumerate(p.agent_ids):
            c = a * g_n + g
            rows.append(
                TagRate(
                    **ctx.agent_key(agent),
                    tag=tag,
                    rate=float(est.estimate[c]),
                    n_verdicts=int(den[:, c].sum()),
                    n_tagged=int(num[:, c].sum()),
                    **iv[c],
                )
            )
    return rows


def empty_artifact_inputs(ctx: Context) -> tuple[F64, F64]:
    """Task sums of each agent's runs with empty artifacts, and of its runs (infrastructure
    failures excluded)."""
    p = ctx.panel
    t_n, a_n = len(p.task_ids), len(p.agent_ids)
    runs = ctx.tables.runs.filter(~pl.col("infrastructure_failure"))
    t_idx = {t: i for i, t in enumerate(p.task_ids)}
    a_idx = {a: i for i, a in enumerate(p.agent_ids)}
    ti = np.array([t_idx[t] for t in runs["task_id"].to_list()], dtype=np.int64)
    ai = np.array([a_idx[a] for a in runs["agent_id"].to_list()], dtype=np.int64)
    num = np.zeros((t_n, a_n))
    den = np.zeros((t_n, a_n))
    np.add.at(num, (ti, ai), runs["empty_artifacts"].to_numpy().astype(np.float64))
    np.add.at(den, (ti, ai), 1.0)
    return num, den


def empty_artifact_rows(ctx: Context) -> list[EmptyArtifactRate]:
    """Per agent: runs with empty artifacts / runs (infrastructure failures excluded)."""
    num, den = ctx.inputs(empty_artifact_inputs)
    est = ctx.ratio(num, den)
    iv = share_intervals(est, num.sum(axis=0), den.sum(axis=0), ctx.confidence)
    return [
        EmptyArtifactRate(
            **ctx.agent_key(agent),
            rate=float(est.estimate[a]),
            n_runs=int(den[:, a].sum()),
            n_empty=int(num[:, a].sum()),
            **iv[a],
        )
        for a, agent in enumerate(ctx.panel.agent_ids)
    ]
