"""The verdicts where judges disagree most: the runs worth reading first."""

from __future__ import annotations

from typing import NamedTuple

from assay_report.projections import Projections
from assay_schemas import RULES_JUDGE_ID

__all__ = ["Disagreement", "disagreements"]


class Disagreement(NamedTuple):
    """One run and each LLM judge's mean score on it."""

    run_id: str
    task_id: str
    agent_id: str
    spread: float
    judge_scores: dict[str, float]


def disagreements(p: Projections, campaign: str, limit: int = 20) -> list[Disagreement]:
    """Runs rated by two or more LLM judges, widest gap between their mean scores first."""
    sums: dict[str, dict[str, list[int]]] = {}
    for v in p.state.verdicts.values():
        if v.campaign_id == campaign and v.judge_id != RULES_JUDGE_ID and v.scores:
            acc = sums.setdefault(v.run_id, {}).setdefault(v.judge_id, [0, 0])
            acc[0] += sum(v.scores.values())
            acc[1] += len(v.scores)
    out: list[Disagreement] = []
    for run_id, by_judge in sums.items():
        means = {j: s / n for j, (s, n) in sorted(by_judge.items())}
        if len(means) > 1:
            run = p.state.runs.get(run_id)
            out.append(
                Disagreement(
                    run_id,
                    run.task_id if run else "",
                    run.agent_id if run else "",
                    max(means.values()) - min(means.values()),
                    means,
                )
            )
    out.sort(key=lambda d: (-d.spread, d.run_id))
    return out[:limit]
