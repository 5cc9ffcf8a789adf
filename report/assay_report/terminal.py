"""The report in the terminal or a log file (`assay report`): tables that fit, else stacked.

A table is printed as a table only when it fits the console's width (80 columns when the
output is a file or a pipe); otherwise each row becomes a heading (its agent, judge, tag
or group) followed by `column: value` fields, broken only between fields; a field without
a value is left out, and a field of prose too long for a line wraps between its words.
Names and figures are never wrapped, folded or cut.
"""

from __future__ import annotations

import math

from rich.console import Console
from rich.panel import Panel

from .report import Report, cached_answers_line
from .stopping import ANYTIME_LABEL
from .terminal_problems import MACHINE_STAGES, print_problems
from .terminal_sections import _board, _check_matrix, _costs, _g, _late, _refused
from .terminal_table import cell as _f
from .terminal_table import ci as _ci
from .terminal_table import pct as _pct
from .terminal_table import print_table
from .terminal_validity import print_validity

__all__ = ["MACHINE_STAGES", "print_problems", "print_report", "print_table"]


def _integrity(report: Report) -> str:
    signed = (
        f"signatures checked against operator key {report.trust_root[:12]}…"
        if report.trust_root
        else "signatures not checked (no operator key)"
    )
    if not report.refused:
        return f"log: {signed}; no message refused"
    seqs = ", ".join(str(r.sequence) for r in report.refused[:5])
    more = ", …" if len(report.refused) > 5 else ""
    return (
        f"[yellow]log: {signed}; {len(report.refused)} message(s) refused, counted in no "
        f"figure (seq {seqs}{more}); listed under 'Refused messages' and in `assay dlq`[/yellow]"
    )


def print_report(
    report: Report, console: Console | None = None, *, doctor: str | None = None
) -> None:
    """Print every section of the report; `doctor`: the command that checks this machine's
    prerequisites, named under infrastructure failures."""
    c = console or Console()
    s = report.statistics
    gcol = ["group"] if report.group_by else []
    if report.scripted:
        c.print(
            Panel(
                "SCRIPTED CAMPAIGN: agents and judges are scripted stand-ins, not real models.",
                style="bold yellow",
            )
        )
    if report.cached_answers or report.cached_verdicts:
        line = cached_answers_line(report.cached_answers, report.cached_verdicts)
        c.print(Panel(line, style="bold yellow"))
    for info in report.campaigns:
        c.print(
            f"[bold]campaign {info.campaign_id}[/bold] {info.name}: {info.n_tasks} tasks, "
            f"{info.n_agents} agents, {info.epochs} epoch(s), rubric {info.rubric_id} "
            f"v{info.rubric_version}; log sequence {report.log_sequence}; "
            f"bootstrap seed {s.seed}, {s.n_resamples} resamples"
        )
    states = ", ".join(f"{r.state} {r.n_runs}" for r in report.run_states)
    c.print(f"runs: {states}")
    c.print(_integrity(report))
    print_table(
        c,
        "Warnings (figures the data cannot carry)",
        [*gcol, "warning", "subject", "detail", "affects"],
        [
            [*([w.group or ""] if gcol else []), w.kind, w.subject, w.message, ", ".join(w.affects)]
            for w in s.warnings
        ],
    )
    print_table(
        c,
        "Agents (declared)",
        ["agent", "family", "model", "runs", "scored", "infrastructure failures"],
        [
            [
                a.agent_id,
                a.family,
                a.model,
                str(a.n_runs),
                str(a.n_scored),
                str(a.n_infrastructure_failures),
            ]
            for a in report.agents
        ],
    )

    jury = "; the declared jury" if report.late_judges else ""
    print_table(
        c,
        f"Leaderboard (mean run score, {int(s.confidence * 100)}% task-bootstrap CI; pass = run score ≥ {report.anchor}{jury})",
        [*gcol, "agent", "score", "CI", "SE", "tasks", "runs", "pass", "pass CI %", "rank"],
        _board(s),
    )
    _late(c, report, gcol)

    dims = sorted({r.dimension for r in s.dimension_scores if r.dimension})
    by = {(r.group, r.agent_id, r.dimension): r.estimate for r in s.dimension_scores}
    cells = sorted(
        {(r.group, r.agent_id) for r in s.dimension_scores}, key=lambda x: (x[0] or "", x[1])
    )
    print_table(
        c,
        "Per-dimension scores",
        [*gcol, "agent", *dims],
        [[*_g(g), a, *(_f(by.get((g, a, d), math.nan), 1) for d in dims)] for g, a in cells],
    )

    print_table(
        c,
        "Communication − accuracy gap (communication − scientific accuracy)",
        [*gcol, "agent", "communication", "accuracy", "gap", "CI"],
        [
            [
                *_g(r.group),
                r.agent_id,
                _f(r.communication),
                _f(r.scientific_accuracy),
                _f(r.gap),
                _ci(r.ci_low, r.ci_high),
            ]
            for r in s.communication_gap
        ],
    )

    used = {t.tag for t in s.tag_rates if t.n_tagged > 0} | {"overclaiming"}
    print_table(
        c,
        "Failure tags (LLM judges; share of verdicts)",
        [*gcol, "tag", "agent", "rate", "CI", "tagged/verdicts"],
        [
            [
                *_g(r.group),
                r.tag,
                r.agent_id,
                _pct(r.rate),
                _ci(100 * r.ci_low, 100 * r.ci_high, 1),
                f"{r.n_tagged}/{r.n_verdicts}",
            ]
            for r in s.tag_rates
            if r.tag in used
        ],
    )
    print_table(
        c,
        "Rule judge tags (share of rule-checked runs)",
        [*gcol, "tag", "agent", "rate", "CI", "tagged/runs"],
        [
            [
                *_g(r.group),
                r.tag,
                r.agent_id,
                _pct(r.rate),
                _ci(100 * r.ci_low, 100 * r.ci_high, 1),
                f"{r.n_tagged}/{r.n_runs}",
            ]
            for r in report.rule_tags
        ],
    )
    print_table(
        c,
        "Empty-artifact rate",
        [*gcol, "agent", "rate", "CI", "empty/runs"],
        [
            [
                *_g(r.group),
                r.agent_id,
                _pct(r.rate),
                _ci(100 * r.ci_low, 100 * r.ci_high, 1),
                f"{r.n_empty}/{r.n_runs}",
            ]
            for r in s.empty_artifact_rates
        ],
    )
    for title, rates in (
        ("Reference checks (the tasks' own)", report.reference_checks),
        ("Rule judge's own checks", report.rule_checks),
    ):
        print_table(
            c,
            title,
            [*gcol, "agent", "pass rate", "CI", "weighted", "passed/checks", "runs"],
            [
                [
                    *_g(r.group),
                    r.agent_id,
                    _pct(r.pass_rate),
                    _ci(100 * r.ci_low, 100 * r.ci_high, 1),
                    _pct(r.weighted_pass_rate),
                    f"{r.n_passed}/{r.n_checks}",
                    str(r.n_runs),
                ]
                for r in rates
            ],
        )
    _check_matrix(c, report)

    print_table(
        c,
        f"Judge strictness (share of ratings below {report.anchor})",
        [*gcol, "judge", "share", "CI", "ratings"],
        [
            [
                *_g(r.group),
                r.judge_id or "all",
                _pct(r.share),
                _ci(100 * r.ci_low, 100 * r.ci_high, 1),
                str(r.n_ratings),
            ]
            for r in s.below_anchor_shares
        ],
    )
    print_table(
        c,
        "Self-preference (own-family extra points, net of run and judge effects)",
        [*gcol, "judge", "family", "coefficient", "CI", "leniency", "own/other runs"],
        [
            [
                *_g(r.group),
                r.judge_id,
                r.judge_family,
                _f(r.coefficient),
                "not estimable" if r.no_spread else _ci(r.ci_low, r.ci_high),
                _f(r.leniency),
                f"{r.n_own}/{r.n_other}",
            ]
            for r in s.self_preference
        ],
    )
    print_table(
        c,
        "Judge agreement",
        [*gcol, "judges", "α (interval)", "ICC(2,1)", "ICC(2,k)", "k_eff", "runs"],
        [
            [
                *_g(r.group),
                ", ".join(r.judges),
                _f(r.krippendorff_alpha),
                _f(r.icc2_1),
                _f(r.icc2_k),
                _f(r.k_eff),
                f"{r.n_complete_runs}/{r.n_runs}",
            ]
            for r in s.judge_agreement
        ],
    )
    print_table(
        c,
        "Rank stability (task bootstrap)",
        [*gcol, "agent", "rank", "mean rank", "rank CI", "P(rank 1)"],
        [
            [
                *_g(r.group),
                r.agent_id,
                _f(r.rank, 1),
                _f(r.mean_rank, 2),
                _ci(r.rank_ci_low, r.rank_ci_high, 0),
                _pct(r.p_rank_1),
            ]
            for r in sorted(s.agent_ranks, key=lambda r: (r.group or "", r.rank))
        ],
    )
    unpassed: dict[str | None, int] = {}
    for u in s.unpassed_tasks:
        unpassed[u.group] = unpassed.get(u.group, 0) + 1
    for g, n in sorted(unpassed.items(), key=lambda x: x[0] or ""):
        c.print(f"tasks no agent passes{f' ({g})' if g else ''}: {n}")
    print_table(
        c,
        "Infrastructure failures (never scored)",
        ["agent", "stage", "runs"],
        [[r.agent_id, r.stage, str(r.n_runs)] for r in report.infrastructure_failures],
    )
    print_table(
        c,
        f"Judges (repair and failure rates, {int(s.confidence * 100)}% Wilson CI; Clopper–Pearson at 0 or n)",
        [
            "judge",
            "kind",
            "family",
            "model",
            "verdicts",
            "runs",
            "failed",
            "repaired",
            "repair rate",
            "repair CI %",
            "failure rate",
            "failure CI %",
        ],
        [
            [
                j.judge_id,
                j.kind,
                j.family,
                j.model,
                str(j.n_verdicts),
                str(j.n_runs),
                str(j.n_failures),
                str(j.n_repaired),
                _pct(j.repair_rate),
                _ci(100 * j.repair_ci_low, 100 * j.repair_ci_high, 1),
                _pct(j.failure_rate),
                _ci(100 * j.failure_ci_low, 100 * j.failure_ci_high, 1),
            ]
            for j in report.judges
        ],
    )
    _costs(c, report, gcol)
    _refused(c, report)
    _stopping(c, report)

    print_validity(report.validity, c, report.statistics.confidence)
    print_problems(report.problems, c, doctor=doctor)


def _stopping(c: Console, report: Report) -> None:
    """When and why each campaign with ``stopping:`` stopped, and the intervals it read."""
    for s in report.stopping:
        if s.stopped:
            why = s.reason + ("" if s.settled else " (not settled)")
            c.print(
                f"\n[bold]{s.campaign_id} stopped early[/bold]: {why} after wave "
                f"{s.waves_checked} (log seq {s.decided_at_sequence}), leader {s.leader or '-'}; "
                f"{s.runs_done} of {s.runs_planned} runs done, {s.runs_cancelled} cancelled, "
                f"${s.cost_usd:.2f} spent, ~${s.cost_saved_usd:.2f} saved (estimate)",
                highlight=False,
            )
        else:
            c.print(f"\n{s.campaign_id}: stopping rule {s.rule} not met (yet)", highlight=False)
        if s.warnings:
            c.print(f"  [yellow]warning:[/yellow] {s.warnings}", highlight=False)
    if report.anytime_intervals:
        print_table(
            c,
            f"Intervals the stopping rule read: {ANYTIME_LABEL}, beside the bootstrap ones",
            ["campaign", "kind", "agent", "vs", "tasks", "estimate", "interval"],
            [
                [
                    i.campaign_id,
                    i.kind,
                    i.agent_id,
                    i.other,
                    str(i.n),
                    f"{i.estimate:.2f}",
                    _ci(i.low, i.high, 2),
                ]
                for i in report.anytime_intervals
            ],
        )
