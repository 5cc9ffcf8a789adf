"""The full statistics suite in one pass: every table from one panel and one set of resamples.

Sharing the panel and the task resamples across statistics is both faster than calling
each function and more coherent: the ranks, pairwise differences and scores of a report
all come from the same resampled task sets.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import partial

import polars as pl
from pydantic import BaseModel, ConfigDict
from threadpoolctl import threadpool_limits

from . import (
    _agreement,
    _failures,
    _operations,
    _panel_warnings,
    _ranking,
    _scores,
    _self_preference,
    _warnings,
)
from ._context import AnalysisSettings, Context, Weighed, contexts, overall_inputs
from ._results import (
    AgentCost,
    AgentRank,
    AgentScore,
    BelowAnchorShare,
    CommunicationGap,
    EmptyArtifactRate,
    EpochSpread,
    JudgeAgreement,
    JudgeCorrelation,
    PairwiseDifference,
    PassRate,
    RunAccounting,
    RunCost,
    SelfPreference,
    StatisticsWarning,
    TagRate,
    UnpassedTask,
)
from ._rows import Row, frames_of
from ._tables import Tables, validated

__all__ = ["StatisticsReport", "compute_statistics"]


class StatisticsReport(BaseModel):
    """Every statistic of a campaign (or campaigns), as tuples of rows."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    seed: int
    """Seed of the task-cluster bootstrap."""
    n_resamples: int
    confidence: float
    group_by: str | None
    """Task attribute the per-agent tables are grouped by, or None."""
    agent_scores: tuple[AgentScore, ...]
    dimension_scores: tuple[AgentScore, ...]
    judge_leaderboards: tuple[AgentScore, ...]
    pass_rates: tuple[PassRate, ...]
    below_anchor_shares: tuple[BelowAnchorShare, ...]
    unpassed_tasks: tuple[UnpassedTask, ...]
    communication_gap: tuple[CommunicationGap, ...]
    """Empty when either dimension is absent from the ratings."""
    tag_rates: tuple[TagRate, ...]
    empty_artifact_rates: tuple[EmptyArtifactRate, ...]
    judge_agreement: tuple[JudgeAgreement, ...]
    judge_correlations: tuple[JudgeCorrelation, ...]
    self_preference: tuple[SelfPreference, ...]
    agent_ranks: tuple[AgentRank, ...]
    pairwise_differences: tuple[PairwiseDifference, ...]
    epoch_spread: tuple[EpochSpread, ...]
    run_costs: tuple[RunCost, ...]
    agent_costs: tuple[AgentCost, ...]
    run_accounting: tuple[RunAccounting, ...]
    warnings: tuple[StatisticsWarning, ...]
    """Where the data cannot carry the figures above (each names those it affects)."""

    def frames(self) -> dict[str, pl.DataFrame]:
        """Every table as a polars DataFrame, keyed by field name."""
        return frames_of(self)


def compute_statistics(
    tables: Tables,
    settings: AnalysisSettings,
    *,
    communication: str = "communication",
    scientific_accuracy: str = "scientific_accuracy",
    tags: tuple[str, ...] = (),
    first_tags: tuple[str, ...] = _failures.DEFAULT_FIRST_TAGS,
    declared_agents: tuple[str, ...] = (),
    declared_judges: tuple[str, ...] = (),
    tasks_without_checks: tuple[str, ...] = (),
    unpriced_models: Mapping[str, tuple[str, ...]] | None = None,
) -> StatisticsReport:
    """Compute every statistic; same inputs and seed give a byte-identical report.

    The declared agents and judges (and the tasks lacking reference checks, and the
    models logged at $0 for want of a price) only feed the warnings: those of them with
    no scored run are named there.
    """
    # One BLAS thread: the bootstrap's products are many small (resamples x tasks) @
    # (tasks x a few) ones, where a second thread's start and spin cost more CPU than it
    # saves, several times more on a busy machine, and the report runs beside the other
    # services on their cores.
    with threadpool_limits(limits=1, user_api="blas"):
        return _compute(
            tables,
            settings,
            communication=communication,
            scientific_accuracy=scientific_accuracy,
            tags=tags,
            first_tags=first_tags,
            declared_agents=declared_agents,
            declared_judges=declared_judges,
            tasks_without_checks=tasks_without_checks,
            unpriced_models=unpriced_models,
        )


def _compute(
    tables: Tables,
    settings: AnalysisSettings,
    *,
    communication: str,
    scientific_accuracy: str,
    tags: tuple[str, ...],
    first_tags: tuple[str, ...],
    declared_agents: tuple[str, ...],
    declared_judges: tuple[str, ...],
    tasks_without_checks: tuple[str, ...],
    unpriced_models: Mapping[str, tuple[str, ...]] | None,
) -> StatisticsReport:
    checked = validated(tables)
    acc: dict[str, list[Row]] = {
        name: []
        for name, f in StatisticsReport.model_fields.items()
        if f.annotation is not None and getattr(f.annotation, "__origin__", None) is tuple
    }
    statistics = _per_context(communication, scientific_accuracy, tags, first_tags)
    weighed = _weighed(communication, scientific_accuracy, tags, first_tags)
    late: list[StatisticsWarning] = []
    for ctx in contexts(checked, settings):
        ctx.weigh_ahead(weighed)
        for name, rows_of in statistics.items():
            acc[name] += rows_of(ctx)
        late += _panel_warnings.context_warnings(ctx)
    acc["warnings"] += _warnings.warning_rows(
        checked,
        acc,
        group_by=settings.group_by,
        declared_agents=declared_agents,
        declared_judges=declared_judges,
        tasks_without_checks=tasks_without_checks,
        unpriced_models=unpriced_models,
    )
    acc["warnings"] += late
    return StatisticsReport.model_validate(
        {
            "seed": settings.seed,
            "n_resamples": settings.n_resamples,
            "confidence": settings.confidence,
            "group_by": settings.group_by,
            **{k: tuple(v) for k, v in acc.items()},
        }
    )


def _weighed(
    communication: str, scientific_accuracy: str, tags: tuple[str, ...], first_tags: tuple[str, ...]
) -> list[Weighed]:
    """The inputs every bootstrapped statistic of a context weighs, in one fixed order: the
    context weighs them in one pass before the first statistic asks (a test checks that
    no statistic then needs another)."""
    return [
        (overall_inputs, ()),
        (_scores.dimension_inputs, ()),
        (_scores.judge_inputs, ()),
        (_scores.pass_rate_inputs, ()),
        (_scores.below_anchor_inputs, ()),
        (_scores.communication_gap_inputs, (communication, scientific_accuracy)),
        (_failures.tag_rate_inputs, (tags, first_tags)),
        (_failures.empty_artifact_inputs, ()),
        (_self_preference.self_preference_inputs, ()),
    ]


def _per_context(
    communication: str, scientific_accuracy: str, tags: tuple[str, ...], first_tags: tuple[str, ...]
) -> dict[str, Callable[[Context], Sequence[Row]]]:
    """Report field → the statistic that fills it from one context."""

    def gap(ctx: Context) -> Sequence[Row]:
        dims = ctx.panel.dimensions
        if communication in dims and scientific_accuracy in dims:
            return _scores.communication_gap_rows(ctx, communication, scientific_accuracy)
        return []

    return {
        "agent_scores": _scores.overall_score_rows,
        "dimension_scores": _scores.dimension_score_rows,
        "judge_leaderboards": _scores.judge_score_rows,
        "pass_rates": _scores.pass_rate_rows,
        "below_anchor_shares": _scores.below_anchor_rows,
        "unpassed_tasks": _scores.unpassed_task_rows,
        "communication_gap": gap,
        "tag_rates": partial(_failures.tag_rate_rows, tags=tags, first=first_tags),
        "empty_artifact_rates": _failures.empty_artifact_rows,
        "judge_agreement": _agreement.agreement_rows,
        "judge_correlations": _agreement.correlation_rows,
        "self_preference": _self_preference.self_preference_rows,
        "agent_ranks": _ranking.rank_rows,
        "pairwise_differences": _ranking.pairwise_rows,
        "epoch_spread": _operations.epoch_spread_rows,
        "run_costs": _operations.cost_rows,
        "agent_costs": _operations.agent_cost_rows,
        "run_accounting": _operations.accounting_rows,
    }
