"""Whether a campaign's ``stopping:`` rule is met by the runs scored so far.

:func:`decide` is pure: scored runs in log order in, a :class:`StoppingDecision` out.
A task counts for an agent once all ``runs_per_task`` of its runs are scored; its
observation is their mean score (0-10) and pass share, and tasks enter each agent's
sequence in the order they completed. Intervals are the hedged betting confidence
sequences of :mod:`._sequential`, valid whenever the campaign stops.

- ``ranking_settled``: the leader (highest mean) beats every other agent: the CS of the
  paired per-task difference (leader − other, over tasks both completed) lies above 0.
  Each of the k(k−1)/2 pairs gets α / (k(k−1)/2), so all pairs hold at once and a
  wrong winner is declared with probability at most α, whichever pair leads.
- ``ci_width``: every agent's score CS (at the stated confidence each) is narrower than
  ``width`` points.
- ``decided``: every agent's pass-share CS (α/k each, all at once) excludes ``threshold``.

No rule stops before every agent has ``min_tasks_per_agent`` tasks; ``max_cost_usd``
stops whether or not the rule is met, and says so.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Literal, NamedTuple

import numpy as np

from assay_schemas import StoppingSpec

from ._sequential import BREAKS, SequentialInterval, mean_interval
from ._tables import StatisticsInputError

__all__ = [
    "AgentSequence",
    "PairSequence",
    "ScoredRun",
    "StopReason",
    "StoppingDecision",
    "decide",
]

StopReason = Literal["ranking_settled", "ci_width", "decided", "max_cost"]
SCORE_MAX = 10.0


class ScoredRun(NamedTuple):
    """One scored run, as the log gave it."""

    agent_id: str
    task_id: str
    score: float
    """The run's overall score, 0-10."""
    passed: bool


class AgentSequence(NamedTuple):
    """One agent's anytime-valid intervals after its complete tasks."""

    agent_id: str
    score: SequentialInterval
    """Mean score, 0-10."""
    pass_share: SequentialInterval
    """Share of runs passed, 0-1 (its confidence is the rule's: α/k under ``decided``)."""


class PairSequence(NamedTuple):
    """The paired per-task difference ``leader − other`` in score points."""

    leader: str
    other: str
    difference: SequentialInterval


class StoppingDecision(NamedTuple):
    """What the rule says now, with the figures it read."""

    stop: bool
    reason: StopReason | None
    settled: bool
    """True when the rule itself is met (False when only the cost cap stopped it)."""
    agents: tuple[AgentSequence, ...]
    pairs: tuple[PairSequence, ...]
    leader: str | None
    warnings: tuple[str, ...]


class _Task(NamedTuple):
    order: int
    """Index in the log of the run that completed the task."""
    score: float
    passed: float


def _complete_tasks(runs: Sequence[ScoredRun], runs_per_task: int) -> dict[str, dict[str, _Task]]:
    """Per agent, per task with all its runs scored: the mean score and pass share."""
    seen: dict[tuple[str, str], list[tuple[float, bool]]] = {}
    done: dict[str, dict[str, _Task]] = {}
    for i, run in enumerate(runs):
        if not 0.0 <= run.score <= SCORE_MAX:
            raise StatisticsInputError(
                f"run of {run.agent_id} on {run.task_id}: score {run.score} not 0-10"
            )
        cell = seen.setdefault((run.agent_id, run.task_id), [])
        cell.append((run.score, run.passed))
        if len(cell) == runs_per_task:  # later extra runs never revise an entered task
            scores, passes = zip(*cell, strict=True)
            task = _Task(i, float(np.mean(scores)), float(np.mean(passes)))
            done.setdefault(run.agent_id, {})[run.task_id] = task
    return done


def _ordered(tasks: Iterable[_Task]) -> list[_Task]:
    return sorted(tasks, key=lambda t: t.order)


def _agent(
    agent_id: str, tasks: dict[str, _Task], confidence: float, share_confidence: float
) -> AgentSequence:
    ordered = _ordered(tasks.values())
    scores = np.array([t.score for t in ordered], dtype=np.float64)
    passes = np.array([t.passed for t in ordered], dtype=np.float64)
    return AgentSequence(
        agent_id,
        mean_interval(scores, 0.0, SCORE_MAX, confidence, BREAKS),
        mean_interval(passes, 0.0, 1.0, share_confidence, BREAKS),
    )


def _pair(
    leader: str, other: str, done: dict[str, dict[str, _Task]], confidence: float
) -> PairSequence:
    a, b = done.get(leader, {}), done.get(other, {})
    both = sorted(a.keys() & b.keys(), key=lambda k: max(a[k].order, b[k].order))
    diff = np.array([a[k].score - b[k].score for k in both], dtype=np.float64)
    return PairSequence(leader, other, mean_interval(diff, -SCORE_MAX, SCORE_MAX, confidence))


def decide(
    spec: StoppingSpec,
    agent_ids: Sequence[str],
    runs: Sequence[ScoredRun],
    *,
    runs_per_task: int,
    cost_usd: float = 0.0,
) -> StoppingDecision:
    """Whether ``spec``'s rule is met by ``runs`` (scored runs, in log order), and how."""
    if runs_per_task < 1:
        raise StatisticsInputError("runs_per_task must be at least 1")
    done = _complete_tasks(runs, runs_per_task)
    k = len(agent_ids)
    alpha = 1 - spec.confidence
    share_confidence = 1 - alpha / k if spec.when == "decided" else spec.confidence
    agents = tuple(_agent(a, done.get(a, {}), spec.confidence, share_confidence) for a in agent_ids)
    leader = _leader(agents)
    pairs: tuple[PairSequence, ...] = ()
    if spec.when == "ranking_settled" and leader is not None:
        pair_confidence = 1 - alpha / max(1, k * (k - 1) // 2)
        pairs = tuple(
            _pair(leader, other, done, pair_confidence) for other in agent_ids if other != leader
        )
    enough = all(a.score.n >= spec.min_tasks_per_agent for a in agents)
    met = enough and _met(spec, agents, pairs)
    capped = spec.max_cost_usd is not None and cost_usd >= spec.max_cost_usd
    warnings = [
        f"{a.agent_id}: not estimable ({a.score.n} tasks)" for a in agents if not a.score.estimable
    ]
    if capped and not met:
        warnings.append(f"stopped on max_cost_usd ({spec.max_cost_usd}) before {spec.when}")
    reason: StopReason | None = spec.when if met else ("max_cost" if capped else None)
    return StoppingDecision(met or capped, reason, met, agents, pairs, leader, tuple(warnings))


def _leader(agents: Sequence[AgentSequence]) -> str | None:
    scored = [a for a in agents if a.score.n > 0]
    if not scored:
        return None
    return max(scored, key=lambda a: a.score.estimate).agent_id


def _met(
    spec: StoppingSpec, agents: Sequence[AgentSequence], pairs: Sequence[PairSequence]
) -> bool:
    if spec.when == "ranking_settled":
        return bool(pairs) and all(p.difference.low > 0 for p in pairs)
    if spec.when == "ci_width":
        assert spec.width is not None  # the spec's validator requires it
        return all(a.score.high - a.score.low < spec.width for a in agents)
    assert spec.threshold is not None
    t = spec.threshold
    return all(a.pass_share.low > t or a.pass_share.high < t for a in agents)
