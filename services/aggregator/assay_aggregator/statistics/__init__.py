"""Statistics of a campaign: pure, seeded, vectorized functions over three polars tables.

Build validated inputs with :func:`make_tables` (schemas in ``RATINGS_SCHEMA``,
``RUNS_SCHEMA``, ``TAGS_SCHEMA``), then call one statistic or
:func:`compute_statistics` for all of them. Every function returns frozen rows;
``RowType.to_frame(rows)`` or :func:`to_frame` gives a polars table. ``DEFINITIONS``
says precisely what each number is.
"""

from __future__ import annotations

from ._agreement import icc2, krippendorff_alpha_interval
from ._api import (
    ANCHOR,
    DEFAULT_RESAMPLES,
    agent_ranks,
    agent_scores,
    below_anchor_shares,
    communication_gap,
    dimension_scores,
    empty_artifact_rates,
    epoch_spread,
    judge_agreement,
    judge_correlations,
    judge_leaderboards,
    pairwise_differences,
    pass_rates,
    run_accounting,
    run_costs,
    self_preference,
    tag_rates,
    unpassed_tasks,
)
from ._definitions import DEFINITIONS, definitions_markdown
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
from ._rows import Row, to_frame
from ._suite import StatisticsReport, compute_statistics
from ._tables import (
    RATINGS_SCHEMA,
    RUNS_SCHEMA,
    TAGS_SCHEMA,
    TASK_ATTRIBUTES,
    StatisticsInputError,
    Tables,
    filter_campaign,
    make_tables,
    validate_table,
)

__all__ = [
    "ANCHOR",
    "DEFAULT_RESAMPLES",
    "DEFINITIONS",
    "RATINGS_SCHEMA",
    "RUNS_SCHEMA",
    "TAGS_SCHEMA",
    "TASK_ATTRIBUTES",
    "AgentRank",
    "AgentScore",
    "BelowAnchorShare",
    "CommunicationGap",
    "EmptyArtifactRate",
    "EpochSpread",
    "JudgeAgreement",
    "JudgeCorrelation",
    "PairwiseDifference",
    "PassRate",
    "Row",
    "RunAccounting",
    "RunCost",
    "SelfPreference",
    "StatisticsInputError",
    "StatisticsReport",
    "Tables",
    "TagRate",
    "UnpassedTask",
    "agent_ranks",
    "agent_scores",
    "below_anchor_shares",
    "communication_gap",
    "compute_statistics",
    "definitions_markdown",
    "dimension_scores",
    "empty_artifact_rates",
    "epoch_spread",
    "filter_campaign",
    "icc2",
    "judge_agreement",
    "judge_correlations",
    "judge_leaderboards",
    "krippendorff_alpha_interval",
    "make_tables",
    "pairwise_differences",
    "pass_rates",
    "run_accounting",
    "run_costs",
    "self_preference",
    "tag_rates",
    "to_frame",
    "unpassed_tasks",
    "validate_table",
]
