"""Warnings that need the context's panel: judges left out of the agreement panel,
self-preference that is not identified, resamples left out of the ranks."""

from __future__ import annotations

import numpy as np

from ._agreement import MIN_COMPLETE_RUNS, judge_panel
from ._context import Context
from ._results import StatisticsWarning
from ._self_preference import identified
from ._warnings import _warn

__all__ = ["context_warnings"]


_PANEL = ("judge_agreement", "judge_correlations")


def _panel(ctx: Context) -> list[StatisticsWarning]:
    """A judge left out of ICC/k_eff/correlations, or why they stay undefined."""
    p = ctx.panel
    s = p.judge_score
    if len(p.judge_ids) < 2:  # one judge: already "agreement_undefined"
        return []
    choice = judge_panel(s)
    scored = (~np.isnan(s)).sum(axis=0)
    r_n = len(p.run_ids)
    if choice.blocking:
        j = choice.blocking[0]
        return [
            _warn(
                ctx.group,
                "panel_statistics_undefined",
                "",
                "ICC, k_eff and the judge "
                f"correlations are undefined: judge {p.judge_ids[j]} scored only "
                f"{scored[j]} of {r_n} runs, and fewer than 2 judges remain without it",
                _PANEL,
            )
        ]
    kept = [p.judge_ids[j] for j in np.flatnonzero(choice.keep)]
    n = int((~np.isnan(s[:, choice.keep]).any(axis=1)).sum())
    return [
        _warn(
            ctx.group,
            "judge_dropped_from_panel",
            p.judge_ids[j],
            f"judge {p.judge_ids[j]} "
            f"scored only {scored[j]} of {r_n} runs, which left {before} run(s) scored by "
            f"every judge (fewer than {MIN_COMPLETE_RUNS}): it is left out of ICC, k_eff "
            f"and the judge correlations, computed on the {n} runs judges "
            f"{', '.join(kept)} all scored",
            _PANEL,
        )
        for j, before in choice.dropped
    ]


def _self_preference(ctx: Context) -> list[StatisticsWarning]:
    """Families whose judges' self-preference the data do not identify, and judges with no
    own-family run (no coefficient either way)."""
    p = ctx.panel
    if len(p.judge_ids) == 0:
        return []
    gam_ok, _ = identified(ctx)
    fam_of_run = np.array(p.agent_families, dtype=object)[p.run_agent]
    jfam = np.array(p.judge_families, dtype=object)
    scored = ~np.isnan(p.judge_score)
    out = []
    for fam in sorted(set(p.judge_families)):
        own_runs = fam_of_run == fam
        mine = [j for j in range(len(p.judge_ids)) if jfam[j] == fam]
        # A judge with no own-family run has no such effect to speak of (n_own = 0 says so).
        lost = [j for j in mine if not gam_ok[j] and (scored[own_runs, j]).any()]
        if not lost:
            continue
        others = scored[own_runs][:, jfam != fam].any()
        reason = (
            "its judges' own-family effect cannot be told apart from the runs' quality and "
            "the judges' leniency in these data"
            if others
            else "no judge of another family scored its agents' runs, so its judges' "
            "own-family effect cannot be told from the runs' quality"
        )
        names = ", ".join(p.judge_ids[j] for j in lost)
        out.append(
            _warn(
                ctx.group,
                "self_preference_not_identified",
                fam,
                "self-preference "
                f"of family {fam} (judges {names}) is not identified: {reason}; "
                "no coefficient is reported",
                ("self_preference",),
            )
        )
    # A judge that scored runs but none of its own family (n_own = 0) has nothing to prefer.
    for j in range(len(p.judge_ids)):
        if scored[:, j].any() and not scored[fam_of_run == jfam[j], j].any():
            out.append(
                _warn(
                    ctx.group,
                    "self_preference_without_own_family",
                    p.judge_ids[j],
                    f"judge {p.judge_ids[j]} (family {jfam[j]}) scored no run of an "
                    "agent of its own family: no self-preference coefficient",
                    ("self_preference",),
                )
            )
    return out


def _rank_resamples(ctx: Context) -> list[StatisticsWarning]:
    """Resamples left out of the rank distribution because a scored agent had no task."""
    draws = ctx.overall.draws
    ranked = ~np.isnan(ctx.overall.estimate)
    missing = np.isnan(draws[:, ranked])
    lost = int(missing.any(axis=1).sum())
    if not lost:
        return []
    b_n, t_n = draws.shape[0], len(ctx.panel.task_ids)
    tasks = ctx.overall.n_clusters
    names = ", ".join(
        f"{ctx.panel.agent_ids[a]} ({tasks[a]} of {t_n} tasks)"
        for a in np.flatnonzero(ranked)
        if np.isnan(draws[:, a]).any()
    )
    tail = (
        "rank intervals, mean ranks and P(rank 1) are undefined"
        if lost == b_n
        else "rank intervals, mean ranks and P(rank 1) hold for the resamples that drew them"
    )
    return [
        _warn(
            ctx.group,
            "rank_resamples_left_out",
            "",
            f"{lost} of {b_n} resamples are "
            f"left out of the rank distribution because they drew no scored task of "
            f"{names}: {tail}",
            ("agent_ranks",),
        )
    ]


def context_warnings(ctx: Context) -> list[StatisticsWarning]:
    """Warnings that need the context's panel: judges left out of the agreement panel,
    self-preference that is not identified, resamples left out of the ranks. Listed after
    :func:`warning_rows`'s."""
    return _panel(ctx) + _self_preference(ctx) + _rank_resamples(ctx)
