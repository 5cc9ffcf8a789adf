"""The report as ONE self-contained HTML file: inline SVG plots, no script, no network.

Plots: leaderboard with CI whiskers, per-dimension heatmap, accuracy vs communication
per agent, failure tags, the judge agreement (correlation) matrix and the rank
distribution; then the key tables and every statistic's written definition. This module
only picks what to show (`plots`, `tables`); `templates/report.html.j2` draws it.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from .charts import Chart, heatmap, intervals, scatter
from .pages import Table, render_page
from .report import Report, cached_answers_line
from .statistics import DEFINITIONS, VALIDITY_DEFINITIONS

__all__ = ["PlotSection", "plots", "render_html", "tables"]


class PlotSection(NamedTuple):
    """The charts of one group (or of the whole report)."""

    heading: str
    charts: list[Chart]


def _nan(x: float) -> bool:
    return isinstance(x, float) and math.isnan(x)


def _groups(report: Report) -> list[str | None]:
    return sorted({r.group for r in report.statistics.agent_scores}, key=lambda g: g or "")


def _plots(report: Report, group: str | None) -> list[Chart]:
    s = report.statistics
    suffix = f" — {report.group_by} = {group}" if group is not None else ""
    out: list[Chart] = []
    board = sorted(
        (r for r in s.agent_scores if r.group == group),
        key=lambda r: -r.estimate if not _nan(r.estimate) else math.inf,
    )
    passes = {r.agent_id: r.pass_rate for r in s.pass_rates if r.group == group}
    out.append(
        intervals(
            [r.agent_id for r in board],
            [r.estimate for r in board],
            [r.ci_low for r in board],
            [r.ci_high for r in board],
            title=f"Leaderboard: mean run score with {int(s.confidence * 100)}% CI{suffix}",
            lo=0,
            hi=10,
            marker=report.anchor,
            note=[f"pass {100 * passes.get(r.agent_id, math.nan):.0f}%" for r in board],
        )
    )
    dims = sorted({r.dimension for r in s.dimension_scores if r.dimension and r.group == group})
    agents = [r.agent_id for r in board]
    by = {(r.agent_id, r.dimension): r.estimate for r in s.dimension_scores if r.group == group}
    out.append(
        heatmap(
            agents,
            dims,
            [[by.get((a, d), math.nan) for d in dims] for a in agents],
            title=f"Per-dimension scores{suffix}",
            vmin=0,
            vmax=10,
        )
    )
    gap = [r for r in s.communication_gap if r.group == group]
    if gap:
        out.append(
            scatter(
                [(r.agent_id, r.scientific_accuracy, r.communication) for r in gap],
                title=f"Accuracy vs communication{suffix} (above the line: communicates better than it is right)",
                xlabel="scientific accuracy",
                ylabel="communication",
                lo=0,
                hi=10,
            )
        )
    tags = [r for r in s.tag_rates if r.group == group]
    names = list(dict.fromkeys(r.tag for r in tags if r.n_tagged > 0 or r.tag == "overclaiming"))
    rate = {(r.agent_id, r.tag): r.rate for r in tags}
    rule = [r for r in report.rule_tags if r.group == group]
    rule_names = list(dict.fromkeys(f"rules: {r.tag}" for r in rule))
    rate.update({(r.agent_id, f"rules: {r.tag}"): r.rate for r in rule})
    cols = names + rule_names
    if cols:
        out.append(
            heatmap(
                agents,
                cols,
                [[rate.get((a, t), math.nan) for t in cols] for a in agents],
                title=f"Failure tags (share of verdicts; rule judge: of runs){suffix}",
                vmin=0,
                vmax=1,
                fmt="{:.0%}",
            )
        )
    corr = [r for r in s.judge_correlations if r.group == group]
    judges = sorted({r.judge_a for r in corr} | {r.judge_b for r in corr})
    if judges:
        m = {(r.judge_a, r.judge_b): r.score_correlation for r in corr}
        m.update({(b, a): v for (a, b), v in list(m.items())})
        grid = [[1.0 if a == b else m.get((a, b), math.nan) for b in judges] for a in judges]
        agree = next((r for r in s.judge_agreement if r.group == group), None)
        extra = f" — α {agree.krippendorff_alpha:.2f}, ICC(2,1) {agree.icc2_1:.2f}" if agree else ""
        out.append(
            heatmap(
                judges,
                judges,
                grid,
                title=f"Judge agreement: run-score correlation{extra}{suffix}",
                vmin=0,
                vmax=1,
                fmt="{:.2f}",
            )
        )
    ranks = sorted((r for r in s.agent_ranks if r.group == group), key=lambda r: r.rank)
    if ranks:
        out.append(
            intervals(
                [r.agent_id for r in ranks],
                [r.mean_rank for r in ranks],
                [r.rank_ci_low for r in ranks],
                [r.rank_ci_high for r in ranks],
                title=f"Rank distribution under task resampling (mean and CI){suffix}",
                lo=1,
                hi=max(2, len(ranks)),
                bars=False,
                note=[f"P(1st) {100 * r.p_rank_1:.0f}%" for r in ranks],
            )
        )
    return out


def _check_heatmap(report: Report) -> list[Chart]:
    cells = {(r.task_id, r.agent_id): r.pass_rate for r in report.reference_check_matrix}
    if not cells:
        return []
    tasks, agents = sorted({t for t, _ in cells}), sorted({a for _, a in cells})
    grid = [[cells.get((t, a), math.nan) for a in agents] for t in tasks]
    return [
        heatmap(
            tasks,
            agents,
            grid,
            title="Reference checks passed (task × agent)",
            vmin=0,
            vmax=1,
            fmt="{:.0%}",
        )
    ]


def plots(report: Report) -> list[PlotSection]:
    """Every chart of the report, one section per group; then the reference-check matrix."""
    sections = [
        PlotSection("Plots" if g is None else f"Plots — {report.group_by} = {g}", _plots(report, g))
        for g in _groups(report)
    ]
    checks = _check_heatmap(report)
    if checks:
        sections.append(PlotSection("Reference checks per task and agent", checks))
    return sections


def tables(report: Report) -> list[Table]:
    """The report's tables, in order; a table with no rows is left out of the page."""
    s, late = report.statistics, report.with_late_judges
    listed = [
        (
            "Warnings (figures the data cannot carry)",
            s.warnings,
            ["group", "kind", "subject", "message", "affects"],
        ),
        (
            "Agents (declared)",
            report.agents,
            ["agent_id", "family", "model", "n_runs", "n_scored", "n_infrastructure_failures"],
        ),
        (
            "Leaderboard (the declared jury)" if report.late_judges else "Leaderboard",
            s.agent_scores,
            ["group", "agent_id", "estimate", "ci_low", "ci_high", "se", "n_tasks", "n_runs"],
        ),
        (
            "Judges that joined late (not in the campaign's declared jury; left out of the figures above)",
            report.late_judges,
            [
                "campaign_id",
                "judge_id",
                "joined_at",
                "joined_sequence",
                "n_runs",
                "n_backfilled",
                "n_verdicts",
            ],
        ),
        (
            "Leaderboard including late judges",
            late.agent_scores if late else (),
            ["group", "agent_id", "estimate", "ci_low", "ci_high", "se", "n_tasks", "n_runs"],
        ),
        (
            "Pass rates",
            s.pass_rates,
            ["group", "agent_id", "pass_rate", "ci_low", "ci_high", "n_passed", "n_runs"],
        ),
        (
            "Communication gap",
            s.communication_gap,
            [
                "group",
                "agent_id",
                "communication",
                "scientific_accuracy",
                "gap",
                "ci_low",
                "ci_high",
            ],
        ),
        (
            "Empty-artifact rate",
            s.empty_artifact_rates,
            ["group", "agent_id", "rate", "ci_low", "ci_high", "n_empty", "n_runs"],
        ),
        (
            "Reference checks (the tasks' own)",
            report.reference_checks,
            [
                "group",
                "agent_id",
                "pass_rate",
                "ci_low",
                "ci_high",
                "weighted_pass_rate",
                "n_passed",
                "n_checks",
                "n_runs",
            ],
        ),
        (
            "Rule judge's own checks",
            report.rule_checks,
            [
                "group",
                "agent_id",
                "pass_rate",
                "ci_low",
                "ci_high",
                "weighted_pass_rate",
                "n_passed",
                "n_checks",
                "n_runs",
            ],
        ),
        (
            "Reference checks per task and agent",
            report.reference_check_matrix,
            ["task_id", "agent_id", "n_passed", "n_checks", "pass_rate", "failed"],
        ),
        (
            "Judge strictness",
            s.below_anchor_shares,
            ["group", "judge_id", "share", "ci_low", "ci_high", "n_ratings"],
        ),
        (
            "Self-preference",
            s.self_preference,
            [
                "group",
                "judge_id",
                "judge_family",
                "coefficient",
                "ci_low",
                "ci_high",
                "leniency",
                "n_own",
                "n_other",
            ],
        ),
        (
            "Judge agreement",
            s.judge_agreement,
            ["group", "judges", "krippendorff_alpha", "icc2_1", "icc2_k", "k_eff", "n_runs"],
        ),
        (
            "Rank stability",
            s.agent_ranks,
            ["group", "agent_id", "rank", "mean_rank", "rank_ci_low", "rank_ci_high", "p_rank_1"],
        ),
        (
            "Infrastructure failures (never scored)",
            report.infrastructure_failures,
            ["agent_id", "stage", "n_runs"],
        ),
        (
            "Judges",
            report.judges,
            [
                "judge_id",
                "kind",
                "family",
                "model",
                "n_verdicts",
                "n_runs",
                "n_failures",
                "n_repaired",
                "repair_rate",
                "repair_ci_low",
                "repair_ci_high",
                "failure_rate",
                "failure_ci_low",
                "failure_ci_high",
            ],
        ),
        (
            "Cost and effort per agent run",
            s.run_costs,
            ["group", "agent_id", "metric", "mean", "p50", "p95", "n_runs"],
        ),
        (
            "Cost per passed task",
            s.agent_costs,
            ["group", "agent_id", "cost_usd", "n_passed_tasks", "cost_per_passed_task", "n_runs"],
        ),
        (
            "Judge cost and tokens per verdict",
            report.judge_costs,
            ["judge_id", "metric", "total", "mean", "p50", "p95", "n_verdicts"],
        ),
        (
            "Prompt caching: cached share of input tokens and what it saved",
            report.prompt_cache,
            [
                "role",
                "member_id",
                "model",
                "n",
                "input_tokens",
                "cached_tokens",
                "cache_write_tokens",
                "cached_share",
                "cost_usd",
                "saved_usd",
            ],
        ),
        (
            "Refused messages (counted in no figure)",
            report.refused,
            ["sequence", "subject", "reason"],
        ),
    ]
    return [Table(title, [r.model_dump() for r in rows], cols) for title, rows, cols in listed]


def render_html(report: Report) -> str:
    """The whole report as one HTML document."""
    return render_page(
        "report.html.j2",
        report=report,
        campaigns=", ".join(c.campaign_id for c in report.campaigns),
        plots=plots(report),
        tables=tables(report),
        cached_line=cached_answers_line(report.cached_answers, report.cached_verdicts),
        # The validity terms (and what the correction assumes) where the section is shown.
        definitions=DEFINITIONS if report.validity is None else DEFINITIONS | VALIDITY_DEFINITIONS,
    )
