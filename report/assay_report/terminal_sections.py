"""The terminal report's sections after the headline tables: judges that joined late,
refused messages, reference checks and costs."""

from __future__ import annotations

import math

from rich.console import Console

from .report import Report
from .statistics import StatisticsReport
from .terminal_table import cell as _f
from .terminal_table import ci as _ci
from .terminal_table import pct as _pct
from .terminal_table import print_table


def _g(group: str | None) -> list[str]:
    return [] if group is None else [group]


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
