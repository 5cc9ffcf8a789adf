"""Statistics of a campaign: pure, seeded, vectorized functions over polars tables.

Build validated inputs with :func:`make_tables` (schemas in ``RATINGS_SCHEMA``,
``RUNS_SCHEMA``, ``TAGS_SCHEMA``) and choose :class:`AnalysisSettings`, then call
:func:`compute_statistics` for all of them, or one statistic (``*_rows``) on each
:func:`contexts` item. Every function returns frozen rows; ``RowType.to_frame(rows)``
or :func:`to_frame` gives a polars table. ``DEFINITIONS`` says precisely what each
number is. The plain counts that need no ratings (runs per state, infrastructure
failures, the rule judge's checks and tags) take :class:`CountTables` instead.
Judge validity (controls, human verdicts, corrected pass shares) takes its own tables
(``CONTROLS_SCHEMA``, ``RATER_SCHEMA``, ``SCORED_RUNS_SCHEMA``): :func:`control_rate_rows`,
:func:`human_agreement_rows`, :func:`corrected_pass_rows`, :func:`validity_warnings`.
"""

from __future__ import annotations

from . import _results
from ._agreement import agreement_rows, correlation_rows, icc2, krippendorff_alpha_interval
from ._context import ANCHOR, DEFAULT_RESAMPLES, AnalysisSettings, Context, contexts
from ._counts import (
    RULE_CHECKS,
    CountTables,
    PlainCounts,
    infrastructure_failure_counts,
    judge_cost_rows,
    plain_counts,
    reference_check_matrix,
    reference_check_rates,
    rule_tag_rates,
    run_state_counts,
)
from ._definitions import DEFINITIONS, definitions_markdown
from ._failures import empty_artifact_rows, tag_rate_rows
from ._human import human_agreement_rows, kappa, spearman
from ._operations import accounting_rows, agent_cost_rows, cost_rows, epoch_spread_rows
from ._prices import COST_TABLES, USED_MODELS_SCHEMA, unpriced_models
from ._proportions import binomial_interval, clopper_pearson, lang_reiczigel, wilson
from ._ranking import pairwise_rows, rank_rows

# The result types are listed once, in ``_results.__all__``.
from ._results import *  # noqa: F403
from ._rows import AgentRow, Row, frames_of, to_frame
from ._scores import (
    below_anchor_rows,
    communication_gap_rows,
    dimension_score_rows,
    judge_score_rows,
    overall_score_rows,
    pass_rate_rows,
    unpassed_task_rows,
)
from ._self_preference import self_preference_rows
from ._sequential import (
    MIN_SEQUENCE_TASKS,
    ConfidenceSequence,
    SequentialInterval,
    hedged_capital,
    hedged_sequence,
    mean_interval,
)
from ._stopping import (
    AgentSequence,
    PairSequence,
    ScoredRun,
    StoppingDecision,
    StopReason,
    decide,
)
from ._suite import StatisticsReport, compute_statistics
from ._tables import (
    RATINGS_SCHEMA,
    RUNS_SCHEMA,
    TAGS_SCHEMA,
    TASK_ATTRIBUTES,
    StatisticsInputError,
    Tables,
    TaskAttribute,
    filter_campaign,
    make_tables,
    validate_table,
)
from ._validity import (
    control_rate_rows,
    corrected_pass_rows,
    corrected_pass_rows_by_family,
    rogan_gladen,
)
from ._validity_rows import (
    BINS,
    CONTROLS_SCHEMA,
    EXTREME_PREVALENCE,
    FRAGILE_BAND,
    FRAGILE_SHARE,
    HETEROGENEITY_P,
    HETEROGENEITY_RANGE,
    MAX_HALF_WIDTH,
    MIN_HUMAN_RUNS,
    MIN_HUMAN_TASKS,
    RATER_SCHEMA,
    SCORED_RUNS_SCHEMA,
    VALIDITY_DEFINITIONS,
    ControlRate,
    CorrectedPassShare,
    HumanAgreement,
    HumanBias,
    RunKind,
)
from ._validity_warnings import validity_warnings
from ._warnings import warning_rows

__all__ = [
    "ANCHOR",
    "BINS",
    "CONTROLS_SCHEMA",
    "COST_TABLES",
    "DEFAULT_RESAMPLES",
    "DEFINITIONS",
    "EXTREME_PREVALENCE",
    "FRAGILE_BAND",
    "FRAGILE_SHARE",
    "HETEROGENEITY_P",
    "HETEROGENEITY_RANGE",
    "MAX_HALF_WIDTH",
    "MIN_HUMAN_RUNS",
    "MIN_HUMAN_TASKS",
    "RATER_SCHEMA",
    "RATINGS_SCHEMA",
    "RULE_CHECKS",
    "RUNS_SCHEMA",
    "SCORED_RUNS_SCHEMA",
    "TAGS_SCHEMA",
    "TASK_ATTRIBUTES",
    "USED_MODELS_SCHEMA",
    "VALIDITY_DEFINITIONS",
    "AgentRow",
    "AnalysisSettings",
    "Context",
    "ControlRate",
    "CorrectedPassShare",
    "CountTables",
    "HumanAgreement",
    "HumanBias",
    "PlainCounts",
    "Row",
    "RunKind",
    "StatisticsInputError",
    "StatisticsReport",
    "Tables",
    "TaskAttribute",
    "accounting_rows",
    "agent_cost_rows",
    "agreement_rows",
    "below_anchor_rows",
    "binomial_interval",
    "clopper_pearson",
    "communication_gap_rows",
    "compute_statistics",
    "contexts",
    "control_rate_rows",
    "corrected_pass_rows",
    "corrected_pass_rows_by_family",
    "correlation_rows",
    "cost_rows",
    "definitions_markdown",
    "dimension_score_rows",
    "empty_artifact_rows",
    "epoch_spread_rows",
    "filter_campaign",
    "frames_of",
    "human_agreement_rows",
    "icc2",
    "infrastructure_failure_counts",
    "judge_cost_rows",
    "judge_score_rows",
    "kappa",
    "krippendorff_alpha_interval",
    "lang_reiczigel",
    "make_tables",
    "overall_score_rows",
    "pairwise_rows",
    "pass_rate_rows",
    "plain_counts",
    "rank_rows",
    "reference_check_matrix",
    "reference_check_rates",
    "rogan_gladen",
    "rule_tag_rates",
    "run_state_counts",
    "self_preference_rows",
    "spearman",
    "tag_rate_rows",
    "to_frame",
    "unpassed_task_rows",
    "unpriced_models",
    "validate_table",
    "validity_warnings",
    "warning_rows",
    "wilson",
]
__all__ += _results.__all__
# Anytime-valid intervals and the stopping rule (#51).
__all__ += [
    "MIN_SEQUENCE_TASKS",
    "AgentSequence",
    "ConfidenceSequence",
    "PairSequence",
    "ScoredRun",
    "SequentialInterval",
    "StopReason",
    "StoppingDecision",
    "decide",
    "hedged_capital",
    "hedged_sequence",
    "mean_interval",
]
