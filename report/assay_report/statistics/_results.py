"""Row models of every statistic (see ``definitions`` for what each number means).

Intervals are percentile-bootstrap intervals over tasks at the requested confidence;
``se`` is the cluster-robust (CR1, tasks as clusters) standard error. Undefined values
(no data, fewer than two clusters) are NaN, never dropped rows.
"""

from __future__ import annotations

from ._rows import AgentRow, Row

__all__ = [
    "AgentCost",
    "AgentRank",
    "AgentScore",
    "BelowAnchorShare",
    "CommunicationGap",
    "EmptyArtifactRate",
    "EpochSpread",
    "InfrastructureFailures",
    "JudgeAgreement",
    "JudgeCorrelation",
    "JudgeCost",
    "PairwiseDifference",
    "PassRate",
    "ReferenceCheckCell",
    "ReferenceCheckRate",
    "RuleTagRate",
    "RunAccounting",
    "RunCost",
    "RunStateCount",
    "SelfPreference",
    "StatisticsWarning",
    "TagRate",
    "UnpassedTask",
]


class AgentScore(AgentRow):
    """An agent's mean score (overall, on one dimension, or by one judge)."""

    dimension: str | None
    """Dimension key, or None for the mean over dimensions."""
    judge_id: str | None
    """Judge whose leaderboard this is, or None for the whole panel."""
    estimate: float
    """Mean over tasks of the mean over the task's scored runs of the run score."""
    n_tasks: int
    """Tasks with at least one scored run of this agent."""
    n_runs: int
    """Scored runs contributing."""
    se: float
    """Cluster-robust (CR1) standard error over tasks."""
    ci_low: float
    """Lower bound of the percentile bootstrap interval (tasks resampled)."""
    ci_high: float
    """Upper bound of the percentile bootstrap interval."""
    no_spread: bool = False
    """Every task informing it had the same value, so the task bootstrap had zero width:
    the interval is instead the bounded-scale one for n tasks without spread (see
    ``definitions``)."""


class PassRate(AgentRow):
    """Share of an agent's runs whose run score reaches the anchor (task-balanced)."""

    pass_rate: float
    """Mean over tasks of the share of the task's scored runs with run score ≥ anchor."""
    n_tasks: int
    n_runs: int
    n_passed: int
    """Scored runs at or above the anchor."""
    se: float
    """Cluster-robust (CR1) standard error over tasks."""
    ci_low: float
    """Lower bound of the percentile bootstrap interval (tasks resampled)."""
    ci_high: float
    """Upper bound of the percentile bootstrap interval."""


class BelowAnchorShare(Row):
    """Share of individual ratings below the anchor (a judge's strictness)."""

    group: str | None
    judge_id: str | None
    """Judge, or None for all judges pooled."""
    share: float
    """Ratings below the anchor / all ratings (pooled over runs, samples, dimensions)."""
    n_ratings: int
    n_below: int
    se: float
    """Cluster-robust (CR1) standard error over tasks."""
    ci_low: float
    """Lower bound of the percentile bootstrap interval (tasks resampled)."""
    ci_high: float
    """Upper bound of the percentile bootstrap interval."""


class UnpassedTask(Row):
    """A task on which no agent has a scored run at or above the anchor."""

    group: str | None
    task_id: str
    n_runs: int
    """Scored runs of the task (all agents)."""
    best_run_score: float
    """Highest run score any agent reached on it (NaN if none was scored)."""


class CommunicationGap(AgentRow):
    """How much better an agent communicates than it is accurate."""

    communication: float
    """Agent score on the communication dimension."""
    scientific_accuracy: float
    """Agent score on the scientific-accuracy dimension."""
    gap: float
    """communication − scientific_accuracy (paired on tasks)."""
    n_tasks: int
    se: float
    """Cluster-robust (CR1) standard error over tasks."""
    ci_low: float
    """Lower bound of the percentile bootstrap interval (tasks resampled)."""
    ci_high: float
    """Upper bound of the percentile bootstrap interval."""
    no_spread: bool = False
    """Every task informing it had the same value, so the task bootstrap had zero width:
    the interval is instead the bounded-scale one for n tasks without spread (see
    ``definitions``)."""


class TagRate(AgentRow):
    """Share of an agent's verdicts (run × judge × sample) carrying a failure tag."""

    tag: str
    rate: float
    """Tagged verdicts / verdicts, pooled over the agent's scored runs."""
    n_verdicts: int
    n_tagged: int
    se: float
    """Cluster-robust (CR1) standard error over tasks."""
    ci_low: float
    """Lower bound of the percentile bootstrap interval (tasks resampled)."""
    ci_high: float
    """Upper bound of the percentile bootstrap interval."""


class EmptyArtifactRate(AgentRow):
    """Share of an agent's runs that left no artifacts."""

    rate: float
    """Runs with empty artifacts / runs, over runs that are not infrastructure failures."""
    n_runs: int
    n_empty: int
    se: float
    """Cluster-robust (CR1) standard error over tasks."""
    ci_low: float
    """Lower bound of the percentile bootstrap interval (tasks resampled)."""
    ci_high: float
    """Upper bound of the percentile bootstrap interval."""


class JudgeAgreement(Row):
    """Agreement of the judges on run scores (one judge's run score = mean of its ratings)."""

    group: str | None
    judges: tuple[str, ...]
    """Every judge that scored a run (Krippendorff's alpha uses them all)."""
    left_out: tuple[str, ...]
    """Judges left out of ICC, k_eff and the correlations for scoring few runs (the
    warnings say why); empty for a complete panel."""
    n_runs: int
    """Runs scored by at least two judges (used by Krippendorff's alpha)."""
    n_complete_runs: int
    """Runs scored by every judge not left out (used by ICC and the correlations)."""
    krippendorff_alpha: float
    """Krippendorff's alpha, interval metric, over runs with ≥ 2 judges."""
    icc2_1: float
    """ICC(2,1): two-way random effects, absolute agreement, single judge."""
    icc2_k: float
    """ICC(2,k): two-way random effects, absolute agreement, mean of k judges."""
    mean_deviation_correlation: float
    """Mean off-diagonal correlation of judges' deviations from the run mean."""
    deviation_baseline: float
    """What that mean would be for independent equal-variance judges: −1/(k−1)."""
    mean_score_correlation: float
    """Mean off-diagonal correlation of judges' run scores."""
    k_eff: float
    """Effective number of independent judges: k / (1 + (k−1)·mean_score_correlation)."""


class JudgeCorrelation(Row):
    """Correlations between two judges over runs scored by every judge."""

    group: str | None
    judge_a: str
    judge_b: str
    deviation_correlation: float
    """Correlation of the two judges' deviations from the run's panel mean."""
    score_correlation: float
    """Correlation of the two judges' run scores."""
    n_runs: int


class SelfPreference(Row):
    """A judge's extra score for agents of its own family, net of run and judge effects."""

    group: str | None
    judge_id: str
    judge_family: str
    coefficient: float
    """Own-family coefficient of the fixed-effects OLS (score points on the run scale)."""
    leniency: float
    """The judge's fixed effect, centred so judges average 0 (other-family runs)."""
    n_own: int
    """Runs this judge scored whose agent shares its family."""
    n_other: int
    """Runs this judge scored whose agent is of another family."""
    se: float
    """Cluster-robust (CR1) standard error over tasks."""
    ci_low: float
    """Lower bound of the percentile bootstrap interval (tasks resampled)."""
    ci_high: float
    """Upper bound of the percentile bootstrap interval."""
    no_spread: bool = False
    """Every task resample gave the same coefficient (no spread across tasks): the
    interval is not estimable (NaN), never printed with zero width."""


class AgentRank(AgentRow):
    """Where an agent ranks (1 = best) and how stable that is under task resampling."""

    estimate: float
    """The agent's overall score."""
    rank: float
    """Rank of the overall score (ties share the average rank)."""
    mean_rank: float
    """Mean rank over bootstrap resamples."""
    rank_ci_low: float
    """2.5% (for 95%) percentile of the bootstrap rank."""
    rank_ci_high: float
    p_rank_1: float
    """Share of resamples in which the agent ranks first (k tied at the top: 1/k each)."""


class PairwiseDifference(Row):
    """Overall score of agent_a minus that of agent_b, paired on tasks."""

    group: str | None
    agent_a: str
    agent_b: str
    difference: float
    p_a_better: float
    """Share of resamples in which agent_a scores higher than agent_b."""
    se: float
    """Cluster-robust (CR1) standard error over tasks."""
    ci_low: float
    """Lower bound of the percentile bootstrap interval (tasks resampled)."""
    ci_high: float
    """Upper bound of the percentile bootstrap interval."""
    no_spread: bool = False
    """Every task informing it had the same value, so the task bootstrap had zero width:
    the interval is instead the bounded-scale one for n tasks without spread (see
    ``definitions``)."""


class EpochSpread(AgentRow):
    """How much an agent's run score varies across epochs of the same task."""

    n_cells: int
    """(task, agent) cells with at least two scored runs."""
    mean_within_sd: float
    """Mean over those cells of the SD (ddof=1) of run scores."""
    pooled_within_sd: float
    """√(mean over those cells of the within-cell variance)."""


class RunCost(AgentRow):
    """Latency, cost or steps per run of an agent (runs not failed for infrastructure)."""

    metric: str
    """'latency_s', 'cost_usd', 'steps', 'input_tokens', 'output_tokens' or 'cached_tokens'."""
    n_runs: int
    mean: float
    p50: float
    p95: float


class RunAccounting(AgentRow):
    """How an agent's runs split between scored, infrastructure-failed and unscored."""

    n_runs: int
    n_scored: int
    """Runs with ratings that are not infrastructure failures."""
    n_infrastructure_failures: int
    """Runs excluded from every score because the infrastructure failed."""
    n_unscored: int
    """Runs that are neither scored nor infrastructure failures (e.g. unjudged)."""
    n_empty_artifacts: int


class RunStateCount(Row):
    """How many runs are in a lifecycle state."""

    state: str
    n_runs: int


class InfrastructureFailures(Row):
    """Runs lost to infrastructure, per agent and stage (never scored)."""

    agent_id: str
    stage: str
    n_runs: int


class ReferenceCheckRate(AgentRow):
    """Share of the rule judge's reference checks an agent's runs passed."""

    n_runs: int
    """Runs with at least one check (infrastructure failures excluded)."""
    n_checks: int
    n_passed: int
    pass_rate: float
    """Passed checks / checks, pooled over runs."""
    ci_low: float
    """Wilson's interval (Clopper–Pearson's at 0 or n) at the checks' effective count: a
    run's checks are clustered, so n_checks is divided by the design effect over runs."""
    ci_high: float
    weighted_pass_rate: float
    """Σ weight of passed checks / Σ weight, pooled over runs."""


class RuleTagRate(AgentRow):
    """Share of an agent's rule-checked runs that the rule judge tagged."""

    tag: str
    n_runs: int
    n_tagged: int
    rate: float
    ci_low: float
    """Wilson's interval at n_tagged of n_runs (Clopper–Pearson's at 0 or n)."""
    ci_high: float


class StatisticsWarning(Row):
    """A reason to distrust some figures, found in the data (see ``DEFINITIONS['warnings']``)."""

    group: str | None
    kind: str
    """'few_tasks', 'zero_width_interval', 'constant_judge', 'scores_at_scale_end',
    'boundary_interval', 'agreement_undefined', 'agreement_unreliable', 'agent_without_scored_runs',
    'judge_without_scored_runs', 'infrastructure_failures' or
    'tasks_without_reference_checks'."""
    subject: str
    """The agent, judge or table concerned ('' when the warning is about all of them)."""
    message: str
    affects: tuple[str, ...]
    """Names of the report tables whose figures the warning concerns."""


class AgentCost(AgentRow):
    """What an agent spent in all, and per task it passed."""

    n_runs: int
    """Runs that are not infrastructure failures (scored or not)."""
    cost_usd: float
    """Total cost of those runs."""
    n_passed_tasks: int
    """Tasks with at least one scored run of the agent at or above the anchor."""
    cost_per_passed_task: float
    """cost_usd / n_passed_tasks (NaN when no task was passed)."""


class JudgeCost(Row):
    """Tokens or cost per verdict of a judge (over its recorded verdicts)."""

    judge_id: str
    metric: str
    """'input_tokens', 'output_tokens', 'cached_tokens' or 'cost_usd'."""
    n_verdicts: int
    total: float
    mean: float
    p50: float
    p95: float


class ReferenceCheckCell(Row):
    """The task's reference checks on one agent's runs of one task (a matrix cell)."""

    task_id: str
    agent_id: str
    n_runs: int
    """Checked runs (infrastructure failures excluded)."""
    n_checks: int
    n_passed: int
    pass_rate: float
    failed: tuple[str, ...]
    """Each failed check as 'run_id: check — detail' (the detail gives the value found)."""
