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

from assay_schemas import Problems

from .report import Report
from .statistics import StatisticsReport
from .stopping import ANYTIME_LABEL
from .terminal_table import cell as _f
from .terminal_table import ci as _ci
from .terminal_table import pct as _pct
from .terminal_table import print_table
from .terminal_validity import print_validity

__all__ = ["MACHINE_STAGES", "print_problems", "print_report", "print_table"]


def _g(group: str | None) -> list[str]:
    return [] if group is None else [group]


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


def _board(s: StatisticsReport) -> list[list[str]]:
    """The leaderboard's rows, best first within each group."""
    ranks = {(r.group, r.agent_id): r for r in s.agent_ranks}
    passes = {(r.group, r.agent_id): r for r in s.pass_rates}
    board = sorted(
        s.agent_scores,
        key=lambda r: (r.group or "", -r.estimate if not math.isnan(r.estimate) else math.inf),
    )
    rows = []
    for r in board:
        p, k = passes.get((r.group, r.agent_id)), ranks.get((r.group, r.agent_id))
        rows.append(
            [
                *_g(r.group),
                r.agent_id,
                _f(r.estimate),
                _ci(r.ci_low, r.ci_high),
                _f(r.se),
                str(r.n_tasks),
                str(r.n_runs),
                _pct(p.pass_rate) if p else "–",
                _ci(100 * p.ci_low, 100 * p.ci_high, 1) if p else "–",
                _f(k.rank, 1) if k else "–",
            ]
        )
    return rows


def _late(c: Console, report: Report, gcol: list[str]) -> None:
    """Judges that joined late, and the leaderboard counting them too."""
    if not report.late_judges or report.with_late_judges is None:
        return
    print_table(
        c,
        "Judges that joined late (not in the campaign's declared jury; left out of the figures above)",
        [
            "campaign",
            "judge",
            "joined late at",
            "log seq",
            "runs judged",
            "back-filled",
            "verdicts",
        ],
        [
            [
                j.campaign_id,
                j.judge_id,
                j.joined_at,
                str(j.joined_sequence),
                str(j.n_runs),
                str(j.n_backfilled),
                str(j.n_verdicts),
            ]
            for j in report.late_judges
        ],
    )
    w = report.with_late_judges
    print_table(
        c,
        "Leaderboard including late judges (the declared jury's is the headline above)",
        [*gcol, "agent", "score", "CI", "SE", "tasks", "runs", "pass", "pass CI %", "rank"],
        _board(w),
    )


MACHINE_STAGES = frozenset({"sandbox"})
"""Stages whose infrastructure failures a check of this machine (`assay doctor`: the
sandbox runtime, bubblewrap, user namespaces, Docker, cgroups, disk) can explain; a run
that failed elsewhere (a web cache unread, a sandbox-manager gone) is not the machine's."""


def print_problems(problems: Problems, c: Console, *, doctor: str | None = None) -> None:
    """What did not go as planned, as lines and a table (nothing when all went well);
    `doctor`: the command that checks this machine, named under the infrastructure failures
    it can explain (`MACHINE_STAGES`)."""
    if problems.ok:
        return
    c.print("\n[bold red]This campaign did not go as planned.[/bold red]")
    for line in problems.lines():
        c.print(f"  [red]•[/red] {line}")
    print_table(
        c,
        "Infrastructure failures by cause (never scored)",
        ["stage", "error class", "first message", "count"],
        [[x.stage, x.error_class, x.first_message, str(x.count)] for x in problems.causes],
    )
    if doctor is not None and any(x.stage in MACHINE_STAGES for x in problems.causes):
        c.print(f"run `{doctor}` to check this machine's prerequisites", highlight=False)


_REFUSED_SHOWN = 10
"""Refused messages listed in the terminal; the HTML and JSON reports list them all."""


def _refused(c: Console, report: Report) -> None:
    shown = report.refused[:_REFUSED_SHOWN]
    print_table(
        c,
        "Refused messages (counted in no figure)",
        ["seq", "subject", "reason"],
        [[str(r.sequence), r.subject, _cut(r.reason, 160)] for r in shown],
    )
    if len(report.refused) > len(shown):
        rest = len(report.refused) - len(shown)
        c.print(f"and {rest} more refused message(s): the HTML and JSON reports list them all")


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _check_matrix(c: Console, report: Report) -> None:
    cells = {(r.task_id, r.agent_id): r for r in report.reference_check_matrix}
    agents = sorted({a for _, a in cells})
    tasks = sorted({t for t, _ in cells})
    print_table(
        c,
        "Reference checks per task and agent (passed/checks)",
        ["task", *agents],
        [
            [
                t,
                *(
                    f"{cells[t, a].n_passed}/{cells[t, a].n_checks}" if (t, a) in cells else "–"
                    for a in agents
                ),
            ]
            for t in tasks
        ],
    )
    print_table(
        c,
        "Failed reference checks (value found)",
        ["task", "agent", "run", "check", "value found"],
        [
            [r.task_id, r.agent_id, *_failed_check(f)]
            for r in report.reference_check_matrix
            for f in r.failed
        ],
    )


def _failed_check(text: str) -> list[str]:
    """Run, check and value found of one failed check, as the report writes it
    ("run: check — detail"), each its own column."""
    run, _, rest = text.partition(": ")
    check, _, detail = rest.partition(" — ")
    return [run, check, detail]


def _costs(c: Console, report: Report, gcol: list[str]) -> None:
    s = report.statistics
    print_table(
        c,
        "Cost and effort per agent run (mean / median / p95; infrastructure failures excluded)",
        [*gcol, "agent", "metric", "mean", "median", "p95", "runs"],
        [
            [
                *_g(r.group),
                r.agent_id,
                r.metric,
                _f(r.mean, 4 if r.metric == "cost_usd" else 1),
                _f(r.p50, 4 if r.metric == "cost_usd" else 1),
                _f(r.p95, 4 if r.metric == "cost_usd" else 1),
                str(r.n_runs),
            ]
            for r in s.run_costs
        ],
    )
    print_table(
        c,
        f"Cost per passed task (a task passed = a run at ≥ {report.anchor})",
        [*gcol, "agent", "cost USD", "passed tasks", "USD per passed task", "runs"],
        [
            [
                *_g(r.group),
                r.agent_id,
                _f(r.cost_usd, 4),
                str(r.n_passed_tasks),
                _f(r.cost_per_passed_task, 4),
                str(r.n_runs),
            ]
            for r in s.agent_costs
        ],
    )
    # One row per judge (its metrics side by side), not one per judge and metric.
    metrics = list(dict.fromkeys(r.metric for r in report.judge_costs))
    by_judge: dict[str, dict[str, str]] = {}
    verdicts: dict[str, int] = {}
    for r in report.judge_costs:
        digits = 4 if r.metric == "cost_usd" else 0
        by_judge.setdefault(r.judge_id, {})[r.metric] = " / ".join(
            _f(x, digits) for x in (r.total, r.mean, r.p50, r.p95)
        )
        verdicts[r.judge_id] = max(verdicts.get(r.judge_id, 0), r.n_verdicts)
    print_table(
        c,
        "Judge cost and tokens per verdict (total / mean / median / p95)",
        ["judge", "verdicts", *(_METRIC_NAMES.get(m, m) for m in metrics)],
        [
            [j, str(verdicts[j]), *(cells.get(m, "–") for m in metrics)]
            for j, cells in by_judge.items()
        ],
    )
    print_table(
        c,
        "Prompt caching (cached share of input tokens; saved: the cost without the cache less the cost)",
        [
            "role",
            "agent or judge",
            "model",
            "input tokens",
            "cached",
            "written",
            "share",
            "cost USD",
            "saved USD",
        ],
        [
            [
                r.role,
                r.member_id,
                r.model,
                str(r.input_tokens),
                str(r.cached_tokens),
                str(r.cache_write_tokens),
                _f(r.cached_share, 2),
                _f(r.cost_usd, 4),
                _f(r.saved_usd, 4),
            ]
            for r in report.prompt_cache
        ],
    )


_METRIC_NAMES = {
    "input_tokens": "input tokens",
    "output_tokens": "output tokens",
    "cached_tokens": "cached tokens",
    "cost_usd": "cost USD",
}
