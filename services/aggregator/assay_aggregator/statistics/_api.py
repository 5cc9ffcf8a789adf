"""Public statistics: one pure function per table, each over validated :class:`Tables`.

Every function validates its input, splits it by ``group_by`` (a task attribute) when
given, and returns a tuple of frozen rows (``RowType.to_frame(rows)`` makes a polars
table). Bootstrapped statistics take an explicit integer ``seed``; the same inputs and
seed give the same rows, bit for bit.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from . import _agreement, _failures, _operations, _ranking, _scores, _self_preference
from ._context import Context, contexts
from ._results import (
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
    TagRate,
    UnpassedTask,
)
from ._rows import Row
from ._tables import Tables, TaskAttribute, make_tables

__all__ = [
    "ANCHOR",
    "DEFAULT_RESAMPLES",
    "agent_ranks",
    "agent_scores",
    "below_anchor_shares",
    "communication_gap",
    "dimension_scores",
    "empty_artifact_rates",
    "epoch_spread",
    "judge_agreement",
    "judge_correlations",
    "judge_leaderboards",
    "pairwise_differences",
    "pass_rates",
    "run_accounting",
    "run_costs",
    "self_preference",
    "tag_rates",
    "unpassed_tasks",
]

ANCHOR = 8
"""Default anchor: 8 = a domain scientist would accept the work with minor edits."""
DEFAULT_RESAMPLES = 10_000
"""Default number of task-cluster bootstrap resamples."""

R = TypeVar("R", bound=Row)


def _run(
    tables: Tables,
    fn: Callable[[Context], list[R]],
    *,
    seed: int = 0,
    n_resamples: int = DEFAULT_RESAMPLES,
    confidence: float = 0.95,
    group_by: TaskAttribute | None = None,
    anchor: int = ANCHOR,
) -> tuple[R, ...]:
    checked = make_tables(*tables)
    ctxs = contexts(
        checked,
        seed=seed,
        n_resamples=n_resamples,
        confidence=confidence,
        group_by=group_by,
        anchor=anchor,
    )
    return tuple(row for ctx in ctxs for row in fn(ctx))


def agent_scores(
    tables: Tables,
    *,
    seed: int,
    n_resamples: int = DEFAULT_RESAMPLES,
    confidence: float = 0.95,
    group_by: TaskAttribute | None = None,
) -> tuple[AgentScore, ...]:
    """Each agent's overall score with a task-cluster bootstrap CI and cluster SE."""
    return _run(
        tables, _scores.overall_score_rows, seed=seed, n_resamples=n_resamples,
        confidence=confidence, group_by=group_by,
    )  # fmt: skip


def dimension_scores(
    tables: Tables,
    *,
    seed: int,
    n_resamples: int = DEFAULT_RESAMPLES,
    confidence: float = 0.95,
    group_by: TaskAttribute | None = None,
) -> tuple[AgentScore, ...]:
    """Each agent's score on each dimension (``dimension`` set, ``judge_id`` None)."""
    return _run(
        tables, _scores.dimension_score_rows, seed=seed, n_resamples=n_resamples,
        confidence=confidence, group_by=group_by,
    )  # fmt: skip


def judge_leaderboards(
    tables: Tables,
    *,
    seed: int,
    n_resamples: int = DEFAULT_RESAMPLES,
    confidence: float = 0.95,
    group_by: TaskAttribute | None = None,
) -> tuple[AgentScore, ...]:
    """Each judge's own leaderboard: agent scores from that judge's ratings alone."""
    return _run(
        tables, _scores.judge_score_rows, seed=seed, n_resamples=n_resamples,
        confidence=confidence, group_by=group_by,
    )  # fmt: skip


def pass_rates(
    tables: Tables,
    *,
    seed: int,
    n_resamples: int = DEFAULT_RESAMPLES,
    confidence: float = 0.95,
    group_by: TaskAttribute | None = None,
    anchor: int = ANCHOR,
) -> tuple[PassRate, ...]:
    """Task-balanced share of each agent's scored runs with run score ≥ ``anchor``."""
    return _run(
        tables, _scores.pass_rate_rows, seed=seed, n_resamples=n_resamples,
        confidence=confidence, group_by=group_by, anchor=anchor,
    )  # fmt: skip


def below_anchor_shares(
    tables: Tables,
    *,
    seed: int,
    n_resamples: int = DEFAULT_RESAMPLES,
    confidence: float = 0.95,
    group_by: TaskAttribute | None = None,
    anchor: int = ANCHOR,
) -> tuple[BelowAnchorShare, ...]:
    """Share of ratings below ``anchor``: all judges (``judge_id`` None), then each judge."""
    return _run(
        tables, _scores.below_anchor_rows, seed=seed, n_resamples=n_resamples,
        confidence=confidence, group_by=group_by, anchor=anchor,
    )  # fmt: skip


def unpassed_tasks(
    tables: Tables, *, group_by: TaskAttribute | None = None, anchor: int = ANCHOR
) -> tuple[UnpassedTask, ...]:
    """Tasks on which no agent has a scored run with run score ≥ ``anchor``."""
    return _run(tables, _scores.unpassed_task_rows, group_by=group_by, anchor=anchor)


def communication_gap(
    tables: Tables,
    *,
    seed: int,
    n_resamples: int = DEFAULT_RESAMPLES,
    confidence: float = 0.95,
    group_by: TaskAttribute | None = None,
    communication: str = "communication",
    scientific_accuracy: str = "scientific_accuracy",
) -> tuple[CommunicationGap, ...]:
    """Per agent: score on ``communication`` minus score on ``scientific_accuracy``."""

    def rows(ctx: Context) -> list[CommunicationGap]:
        return _scores.communication_gap_rows(ctx, communication, scientific_accuracy)

    return _run(
        tables, rows, seed=seed, n_resamples=n_resamples, confidence=confidence,
        group_by=group_by,
    )  # fmt: skip


def tag_rates(
    tables: Tables,
    *,
    seed: int,
    n_resamples: int = DEFAULT_RESAMPLES,
    confidence: float = 0.95,
    group_by: TaskAttribute | None = None,
    tags: tuple[str, ...] = (),
    first: tuple[str, ...] = _failures.DEFAULT_FIRST_TAGS,
) -> tuple[TagRate, ...]:
    """Per tag and agent: share of verdicts (run × judge × sample) carrying the tag.

    ``first`` tags (default: overclaiming) come first and always appear; ``tags`` are
    listed even when never used.
    """

    def rows(ctx: Context) -> list[TagRate]:
        return _failures.tag_rate_rows(ctx, tags, first)

    return _run(
        tables, rows, seed=seed, n_resamples=n_resamples, confidence=confidence,
        group_by=group_by,
    )  # fmt: skip


def empty_artifact_rates(
    tables: Tables,
    *,
    seed: int,
    n_resamples: int = DEFAULT_RESAMPLES,
    confidence: float = 0.95,
    group_by: TaskAttribute | None = None,
) -> tuple[EmptyArtifactRate, ...]:
    """Per agent: share of runs (not infrastructure failures) with empty artifacts."""
    return _run(
        tables, _failures.empty_artifact_rows, seed=seed, n_resamples=n_resamples,
        confidence=confidence, group_by=group_by,
    )  # fmt: skip


def judge_agreement(
    tables: Tables, *, group_by: TaskAttribute | None = None
) -> tuple[JudgeAgreement, ...]:
    """Krippendorff's alpha, ICC(2,1), ICC(2,k), mean correlations and k_eff."""
    return _run(tables, _agreement.agreement_rows, group_by=group_by)


def judge_correlations(
    tables: Tables, *, group_by: TaskAttribute | None = None
) -> tuple[JudgeCorrelation, ...]:
    """Pairwise judge correlations: of deviations from the run mean, and of scores."""
    return _run(tables, _agreement.correlation_rows, group_by=group_by)


def self_preference(
    tables: Tables,
    *,
    seed: int,
    n_resamples: int = DEFAULT_RESAMPLES,
    confidence: float = 0.95,
    group_by: TaskAttribute | None = None,
) -> tuple[SelfPreference, ...]:
    """Each judge's own-family coefficient from the run + judge fixed-effects OLS."""
    return _run(
        tables, _self_preference.self_preference_rows, seed=seed, n_resamples=n_resamples,
        confidence=confidence, group_by=group_by,
    )  # fmt: skip


def agent_ranks(
    tables: Tables,
    *,
    seed: int,
    n_resamples: int = DEFAULT_RESAMPLES,
    confidence: float = 0.95,
    group_by: TaskAttribute | None = None,
) -> tuple[AgentRank, ...]:
    """Each agent's rank by overall score and its bootstrap distribution."""
    return _run(
        tables, _ranking.rank_rows, seed=seed, n_resamples=n_resamples,
        confidence=confidence, group_by=group_by,
    )  # fmt: skip


def pairwise_differences(
    tables: Tables,
    *,
    seed: int,
    n_resamples: int = DEFAULT_RESAMPLES,
    confidence: float = 0.95,
    group_by: TaskAttribute | None = None,
) -> tuple[PairwiseDifference, ...]:
    """Overall-score difference of every pair of agents, paired on tasks."""
    return _run(
        tables, _ranking.pairwise_rows, seed=seed, n_resamples=n_resamples,
        confidence=confidence, group_by=group_by,
    )  # fmt: skip


def epoch_spread(
    tables: Tables, *, group_by: TaskAttribute | None = None
) -> tuple[EpochSpread, ...]:
    """Per agent: spread of run scores across epochs of the same task."""
    return _run(tables, _operations.epoch_spread_rows, group_by=group_by)


def run_costs(tables: Tables, *, group_by: TaskAttribute | None = None) -> tuple[RunCost, ...]:
    """Per agent and metric (latency_s, cost_usd, steps): mean, p50, p95 per run."""
    return _run(tables, _operations.cost_rows, group_by=group_by)


def run_accounting(
    tables: Tables, *, group_by: TaskAttribute | None = None
) -> tuple[RunAccounting, ...]:
    """Per agent: runs, scored, infrastructure failures (excluded), unscored, empty."""
    return _run(tables, _operations.accounting_rows, group_by=group_by)
