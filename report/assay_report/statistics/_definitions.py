"""Written definitions of every statistic, for the report documentation."""

from __future__ import annotations

__all__ = ["DEFINITIONS", "definitions_markdown"]

DEFINITIONS: dict[str, str] = {
    "scored_run": (
        "A run that is not an infrastructure failure and has at least one rating. "
        "Infrastructure failures are excluded from every score and counted apart "
        "(run_accounting); runs that are neither are counted as unscored."
    ),
    "judge_run_score": (
        "The mean of all ratings one judge gave one run, over its samples and the dimensions."
    ),
    "run_score": (
        "The mean over judges of the judge run scores, so each judge weighs equally "
        "whatever its number of samples."
    ),
    "agent_score": (
        "The mean over tasks of the mean over that task's scored runs (epochs) of the run "
        "score, over the tasks where the agent has a scored run: every task weighs the "
        "same whatever its number of epochs."
    ),
    "confidence_interval": (
        "Percentile bootstrap interval (linear interpolation) from resampling tasks with "
        "replacement (clusters); every run, judge and sample of a drawn task comes along. "
        "Each resample recomputes the statistic as defined on the drawn tasks. The seed is "
        "explicit; numpy Generator(PCG64(seed)). Resamples in which a statistic is "
        "undefined are left out of its quantiles. A rate (pass_rate, below_anchor_share, "
        "tag_rate, empty_artifact_rate, and the judge-validity rates) takes the hull of this "
        "interval and Wilson's score interval at its counts (Clopper–Pearson's exact one at "
        "0 or n), so it is never narrower than its counts carry and never of zero width. "
        "A score, dimension score, judge leaderboard, communication gap or pairwise "
        "difference whose tasks all have the same value c (no spread: the bootstrap gives "
        "[c, c]) takes instead [c − π(c − L), c + π(U − c)] on its scale [L, U] ([0, 10], "
        "[−10, 10] for differences), π = Clopper–Pearson's upper bound at 0 of n tasks "
        "departing from c, and no_spread = true; a self-preference coefficient without "
        "spread has no interval (not estimable)."
    ),
    "standard_error": (
        "Cluster-robust (CR1) standard error with tasks as clusters, by linearizing the "
        "ratio estimator Σ_t y_t / Σ_t x_t: SE² = G/(G−1) Σ_t ((y_t − θ x_t)/Σx)², G = tasks "
        "informing the statistic. For a mean of task means it equals s/√G."
    ),
    "dimension_score": (
        "As agent_score, on one dimension: the run's dimension score is the mean over "
        "judges of the judge's mean over samples on that dimension."
    ),
    "judge_leaderboard": "As agent_score, using one judge's run scores only.",
    "below_anchor_share": (
        "Share of individual ratings (run × judge × sample × dimension) below the anchor "
        "(8), pooled; per judge it measures strictness. CI over tasks."
    ),
    "pass_rate": (
        "Mean over tasks of the share of the agent's scored runs on the task whose run "
        "score is at least the anchor (8)."
    ),
    "unpassed_tasks": (
        "Tasks on which no scored run of any agent has run score ≥ anchor, including "
        "tasks with no scored run at all (n_runs = 0, best_run_score NaN)."
    ),
    "communication_gap": (
        "Agent score on communication minus agent score on scientific_accuracy, over runs "
        "rated on both; CI from the same task resamples (paired)."
    ),
    "tag_rate": (
        "Verdicts (run × judge × sample, of scored runs) carrying the tag divided by all "
        "verdicts, pooled over the agent's runs. Tags on verdicts absent from ratings are "
        "ignored. Overclaiming is listed first."
    ),
    "empty_artifact_rate": (
        "Runs with empty artifacts divided by runs, over the agent's runs that are not "
        "infrastructure failures (scored or not)."
    ),
    "krippendorff_alpha": (
        "Krippendorff's alpha with the interval metric on judge run scores, units = runs "
        "scored by at least two judges (missing judges allowed)."
    ),
    "icc": (
        "ICC(2,1) and ICC(2,k) of Shrout & Fleiss (two-way random effects, absolute "
        "agreement) on the runs × judges matrix of judge run scores, complete runs only. "
        "While fewer than 10 runs are scored by every judge, a judge that scored under half "
        "the runs (or any judge, if fewer than 2 such runs are left) is left out of ICC, "
        "k_eff and the correlations when that adds complete runs, fewest scored runs "
        "first; the warnings name it, judge_agreement.left_out lists it and its "
        "correlation pairs are NaN on 0 runs."
    ),
    "deviation_correlation": (
        "Pearson correlation between two judges of their deviations from the run's panel "
        "mean, over complete runs. Deviations sum to zero across judges, so independent "
        "equal-variance judges average −1/(k−1), reported as the baseline; correlations "
        "above it mean the two judges err together."
    ),
    "k_eff": (
        "Effective number of independent judges: k / (1 + (k−1)·r̄), r̄ = mean "
        "off-diagonal correlation of judges' run scores over complete runs; the number "
        "of independent judges whose mean would have the same variance as the panel mean "
        "(Kish design effect). Undefined (NaN) if the denominator is not positive."
    ),
    "self_preference": (
        "Judge i's coefficient γ_i in the OLS y_rj = α_r + β_j + Σ_i γ_i·1[j = i and "
        "family(i) = family(agent of r)] + ε over judge run scores, with run fixed "
        "effects α (absorbed exactly by within-run demeaning) and judge fixed effects β: "
        "extra points judge i gives its own family beyond its general leniency and beyond "
        "what other judges give the same runs. Not own-family minus others. SE: CR1 "
        "sandwich over tasks; CI: task bootstrap (refit per resample). Reported only where "
        "the data identify γ_i (it lies in the row space of the within-run design, a test "
        "independent of judge names and order); otherwise NaN with a warning naming the "
        "family (e.g. two judges of one family and no other family's judge on its runs). "
        "A judge that scored no run of its own family (n_own = 0) has no coefficient "
        "either; a warning names it."
    ),
    "leniency": (
        "The judge's fixed effect β_j, centred so judges average 0; NaN where the data do "
        "not identify it."
    ),
    "rank": (
        "Rank of the agent score, 1 = best, ties averaged. Rank stability: the rank in "
        "each task resample (resamples where some agent is unscored are left out); "
        "P(rank 1) = share of resamples where the agent is first, k agents tied at the "
        "top each counting 1/k (so P(rank 1) sums to 1 over the agents)."
    ),
    "pairwise_difference": (
        "Agent score of a minus agent score of b; CI from the same task resamples "
        "(paired on tasks); p_a_better = share of resamples where the difference > 0."
    ),
    "epoch_spread": (
        "Over (task, agent) cells with ≥ 2 scored runs: mean of the within-cell SD "
        "(ddof=1) of run scores, and the pooled SD √(mean within-cell variance)."
    ),
    "run_cost": (
        "Latency (s), cost (USD), steps and tokens (input, output, cached) per run over runs "
        "that are not infrastructure failures: mean, median and 95th percentile (linear "
        "interpolation). Cached tokens are counted at most up to the input tokens, as the "
        "cost counts them; every amount is finite and non-negative (checked on input)."
    ),
    "cost_per_passed_task": (
        "An agent's total cost over its runs that are not infrastructure failures, divided "
        "by the tasks where at least one of its scored runs reaches the anchor."
    ),
    "judge_cost": (
        "Tokens and cost (USD, at the campaign's prices, cached input tokens at the cached "
        "rate) per recorded verdict of a judge: total, mean, median and 95th percentile."
    ),
    "warnings": (
        "Computed from the data, each naming the tables it affects: fewer than 10 scored "
        "tasks (too few for a task bootstrap; with one task every bootstrap interval has zero width); "
        "task-bootstrap intervals of scores, differences or coefficients of zero width (zero_width_interval: no spread across tasks; the scores then carry the bounded-scale interval, a coefficient none); rates at 0 or 1 "
        "(boundary_interval, for pass rates and below-anchor shares: their interval is Clopper–Pearson's); a judge whose run scores have SD < 0.25 over its runs "
        "(near constant: agreement undefined, other judges' self-preference biased); a judge "
        "with ≥ 20% of its ratings at 0 or at 10 (clipped at the scale's end); Krippendorff's "
        "alpha undefined or below 0.667; declared agents or judges with no scored run; runs "
        "excluded as infrastructure failures; tasks without reference checks; a judge left "
        "out of ICC, k_eff and the correlations for too few common runs (or why they stay "
        "undefined); self-preference not identified for a family, or a judge with no "
        "own-family run; task resamples left out of the rank distribution because they "
        "drew no scored task of some agent; a model of a campaign that is not scripted "
        "which used tokens, has no price in the default table or the campaign's prices and "
        "was logged at $0 (its cost figures count it as 0)."
    ),
    "grouping": (
        "group_by=domain|phase|difficulty splits the tasks by that attribute and computes "
        "every statistic within each group, with its own task resamples (same seed)."
    ),
}
"""One precise definition per statistic or term, keyed by name."""


def definitions_markdown() -> str:
    """The definitions as a Markdown list."""
    return "\n".join(f"- **{k}**: {v}" for k, v in DEFINITIONS.items()) + "\n"
