"""Plain counts that need no ratings and no bootstrap: runs per lifecycle state,
infrastructure failures per stage, and the rule judge's reference checks and tags.

They read projection tables directly (see :class:`CountTables`) rather than the
validated :class:`Tables`, because they cover every run of the selected campaigns,
also runs whose request was never seen, and the rule judge, which never rates.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Literal, NamedTuple

import numpy as np
import polars as pl

from ._operations import clamp_cached, summary
from ._proportions import binomial_interval, effective_trials
from ._results import (
    InfrastructureFailures,
    JudgeCost,
    ReferenceCheckCell,
    ReferenceCheckRate,
    RuleTagRate,
    RunStateCount,
)
from ._tables import StatisticsInputError, TaskAttribute

CheckKind = Literal["reference", "rule"]

__all__ = [
    "RULE_CHECKS",
    "CountTables",
    "PlainCounts",
    "infrastructure_failure_counts",
    "judge_cost_rows",
    "plain_counts",
    "reference_check_matrix",
    "reference_check_rates",
    "rule_tag_rates",
    "run_state_counts",
]


RULE_CHECKS = frozenset(
    {"artifacts_present", "claimed_files_exist", "scripts_executed", "no_prompt_injection"}
)
"""The rule judge's own checks (assay_judge.rules.checks.evaluate); every other check is one of
the task's reference checks, which the rule judge runs on the task's behalf."""


def _of_kind(checks: pl.DataFrame, kind: CheckKind) -> pl.DataFrame:
    own = pl.col("name").is_in(sorted(RULE_CHECKS))
    return checks.filter(own if kind == "rule" else ~own)


class CountTables(NamedTuple):
    """Projection tables of the selected campaigns, for the plain counts."""

    runs: pl.DataFrame
    """Every run: run_id, agent_id, state, infrastructure_failure, failure_stage and the
    task attributes (the projection's ``runs``)."""
    checks: pl.DataFrame
    """The rule judge's reference checks: run_id, agent_id, passed, weight."""
    verdicts: pl.DataFrame
    """The rule judge's verdicts (run_id): the runs it checked."""
    tags: pl.DataFrame
    """The rule judge's tags: run_id, tag."""


def run_state_counts(tables: CountTables) -> tuple[RunStateCount, ...]:
    """How many runs are in each lifecycle state (states in sorted order)."""
    states: dict[str, int] = defaultdict(int)
    for s in tables.runs["state"].to_list():
        states[s] += 1
    return tuple(RunStateCount(state=k, n_runs=v) for k, v in sorted(states.items()))


def infrastructure_failure_counts(tables: CountTables) -> tuple[InfrastructureFailures, ...]:
    """Runs lost to infrastructure, per agent and failure stage."""
    infra = (
        tables.runs.filter(pl.col("infrastructure_failure"))
        .group_by("agent_id", "failure_stage")
        .agg(pl.len())
        .sort("agent_id", "failure_stage")
    )
    return tuple(
        InfrastructureFailures(agent_id=a, stage=s, n_runs=n) for a, s, n in infra.iter_rows()
    )


def _scored_runs(runs: pl.DataFrame, group_by: TaskAttribute | None, *cols: str) -> pl.DataFrame:
    """Runs that are not infrastructure failures, with their group (None when ungrouped)."""
    group = pl.col(group_by) if group_by else pl.lit(None, dtype=pl.String)
    return runs.filter(~pl.col("infrastructure_failure")).select(*cols, group.alias("group"))


def reference_check_rates(
    tables: CountTables,
    *,
    group_by: TaskAttribute | None = None,
    kind: CheckKind = "reference",
    confidence: float = 0.95,
) -> tuple[ReferenceCheckRate, ...]:
    """Per group and agent: the task's reference checks (or the rule judge's own checks,
    ``kind="rule"``) passed, plain and weighted."""
    ok = _scored_runs(tables.runs, group_by, "run_id")
    per_run = (
        _of_kind(tables.checks, kind)
        .join(ok, on="run_id", how="inner")
        .group_by("group", "agent_id", "run_id")
        .agg(
            pl.len().alias("x"),
            pl.col("passed").sum().alias("y"),
            (pl.col("weight") * pl.col("passed")).sum().alias("w_passed"),
            pl.col("weight").sum().alias("w"),
        )
    )
    agg = (
        per_run.with_columns(
            share=pl.col("y").sum().over("group", "agent_id")
            / pl.col("x").sum().over("group", "agent_id")
        )
        .group_by("group", "agent_id")
        .agg(
            pl.len().alias("n_runs"),
            pl.col("x").sum().alias("n_checks"),
            pl.col("y").sum().alias("n_passed"),
            pl.col("w_passed").sum(),
            pl.col("w").sum(),
            # CR0 over runs: Σ (y_r − p·x_r)², for the checks' design effect.
            ((pl.col("y") - pl.col("share") * pl.col("x")) ** 2).sum().alias("ss"),
        )
        .sort("group", "agent_id", nulls_last=False)
    )
    n = agg["n_checks"].to_numpy().astype(np.float64)
    p = agg["n_passed"].to_numpy() / n
    se = np.sqrt(agg["ss"].to_numpy()) / n
    # CR0 already: one cluster each (clusters = 1) keeps it as it is.
    n_eff = effective_trials(p, n, se, np.ones_like(n))
    low, high = binomial_interval(p * n_eff, n_eff, confidence)
    return tuple(
        ReferenceCheckRate(
            group=r["group"],
            agent_id=r["agent_id"],
            n_runs=r["n_runs"],
            n_checks=r["n_checks"],
            n_passed=r["n_passed"],
            pass_rate=r["n_passed"] / r["n_checks"],
            ci_low=float(low[i]),
            ci_high=float(high[i]),
            weighted_pass_rate=r["w_passed"] / r["w"] if r["w"] > 0 else float("nan"),
        )
        for i, r in enumerate(agg.iter_rows(named=True))
    )


def reference_check_matrix(tables: CountTables) -> tuple[ReferenceCheckCell, ...]:
    """Task × agent: the task's reference checks passed, and which failed with what value.

    Cells exist where the agent has a checked run of a task that has reference checks.
    """
    ok = tables.runs.filter(~pl.col("infrastructure_failure")).select("run_id", "task_id")
    checks = _of_kind(tables.checks, "reference").drop("task_id", strict=False)
    rows = checks.join(ok, on="run_id", how="inner").sort("task_id", "agent_id", "run_id", "name")
    # One grouped pass: a filter per cell made this a third of a 10x report's time.
    failed = pl.format("{}: {} — {}", "run_id", "name", pl.col("detail").fill_null("None"))
    cells = rows.group_by("task_id", "agent_id", maintain_order=True).agg(
        pl.col("run_id").n_unique().alias("n_runs"),
        pl.len().alias("n_checks"),
        pl.col("passed").sum().alias("n_passed"),
        failed.filter(~pl.col("passed")).alias("failed"),
    )
    return tuple(
        ReferenceCheckCell(
            task_id=str(task),
            agent_id=str(agent),
            n_runs=n_runs,
            n_checks=n,
            n_passed=k,
            pass_rate=k / n,
            failed=tuple(bad),
        )
        for task, agent, n_runs, n, k, bad in cells.iter_rows()
    )


def rule_tag_rates(
    tables: CountTables, *, group_by: TaskAttribute | None = None, confidence: float = 0.95
) -> tuple[RuleTagRate, ...]:
    """Per group, agent and tag the rule judge used: share of its checked runs tagged.

    Every agent with checked runs gets a row for every tag, so a 0 is shown, not omitted.
    """
    ok = _scored_runs(tables.runs, group_by, "run_id", "agent_id")
    checked = tables.verdicts.select("run_id").unique().join(ok, on="run_id", how="inner")
    denom = checked.group_by("group", "agent_id").agg(pl.len().alias("n_runs"))
    tagged = (
        tables.tags.select("run_id", "tag")
        .unique()
        .join(checked, on="run_id", how="inner")
        .group_by("group", "agent_id", "tag")
        .agg(pl.len().alias("n_tagged"))
    )
    counts: dict[tuple[str | None, str, str], int] = {
        (g, a, t): n for g, a, t, n in tagged.iter_rows()
    }
    tags = sorted({t for _, _, t in counts})
    out = []
    for g, a, n in denom.sort("group", "agent_id", nulls_last=False).iter_rows():
        for tag in tags:
            k = counts.get((g, a, tag), 0)
            low, high = binomial_interval(float(k), float(n), confidence)
            out.append(
                RuleTagRate(
                    group=g,
                    agent_id=a,
                    tag=tag,
                    n_runs=n,
                    n_tagged=k,
                    rate=k / n,
                    ci_low=float(low),
                    ci_high=float(high),
                )
            )
    return tuple(out)


JUDGE_COST_METRICS = ("input_tokens", "output_tokens", "cached_tokens", "cost_usd")


def judge_cost_rows(verdicts: pl.DataFrame) -> tuple[JudgeCost, ...]:
    """Per judge (sorted) and metric: total, mean, median and p95 per recorded verdict.

    ``verdicts`` has judge_id and the metric columns, one row per verdict; each must be
    finite and non-negative (else :class:`StatisticsInputError`). Cached tokens are
    clamped to the input tokens, as the cost clamps them.
    """
    for metric in JUDGE_COST_METRICS:
        amount = pl.col(metric).cast(pl.Float64)
        bad = verdicts.filter(~(amount.is_finite() & (amount >= 0)))
        if bad.height:
            raise StatisticsInputError(
                f"judge verdicts: {metric!r} must be finite and non-negative, found "
                f"{bad[metric][0]!r} for judge {bad['judge_id'][0]!r}"
            )
    verdicts = clamp_cached(verdicts)
    out = []
    for judge in sorted(set(verdicts["judge_id"].to_list())):
        mine = verdicts.filter(pl.col("judge_id") == judge)
        for metric in JUDGE_COST_METRICS:
            v = mine[metric].cast(pl.Float64).to_numpy()
            mean, p50, p95 = summary(v)
            out.append(
                JudgeCost(
                    judge_id=judge,
                    metric=metric,
                    n_verdicts=int(v.size),
                    total=float(v.sum()),
                    mean=mean,
                    p50=p50,
                    p95=p95,
                )
            )
    return tuple(out)


class PlainCounts(NamedTuple):
    """The plain counts of some campaigns, under the report's names for them."""

    run_states: tuple[RunStateCount, ...]
    infrastructure_failures: tuple[InfrastructureFailures, ...]
    reference_checks: tuple[ReferenceCheckRate, ...]
    """The task's own reference checks."""
    rule_checks: tuple[ReferenceCheckRate, ...]
    """The rule judge's built-in checks."""
    reference_check_matrix: tuple[ReferenceCheckCell, ...]
    rule_tags: tuple[RuleTagRate, ...]


def plain_counts(
    tables: CountTables, *, group_by: TaskAttribute | None = None, confidence: float = 0.95
) -> PlainCounts:
    """Every plain count at once (``group_by`` splits the check and tag rates; their
    intervals are at ``confidence``)."""
    return PlainCounts(
        run_states=run_state_counts(tables),
        infrastructure_failures=infrastructure_failure_counts(tables),
        reference_checks=reference_check_rates(tables, group_by=group_by, confidence=confidence),
        rule_checks=reference_check_rates(
            tables, group_by=group_by, kind="rule", confidence=confidence
        ),
        reference_check_matrix=reference_check_matrix(tables),
        rule_tags=rule_tag_rates(tables, group_by=group_by, confidence=confidence),
    )
