"""bench.stopping: its fast path is decide() itself, and its seeded figures meet the issue's."""

from __future__ import annotations

import numpy as np
import pytest

from assay_report.statistics import ScoredRun, decide
from assay_schemas import StoppingSpec
from bench.stopping import (
    CHECK_EVERY,
    CONFIDENCE,
    MIN_TASKS,
    SCENARIOS,
    TASKS,
    Scenario,
    _campaign,
    _scores,
    simulate,
)


def _by_decide(means: tuple[float, ...], scores: np.ndarray) -> tuple[int | None, int | None]:
    """The first wave at which decide() stops a campaign of these scores, and its leader."""
    spec = StoppingSpec(
        when="ranking_settled",
        confidence=CONFIDENCE,
        min_tasks_per_agent=MIN_TASKS,
        check_every=CHECK_EVERY,
    )
    agents = [str(a) for a in range(len(means))]
    runs = [
        ScoredRun(agents[a], f"t{t}", float(scores[a, t]), bool(scores[a, t] >= 5))
        for t in range(TASKS)
        for a in range(len(means))
    ]
    for t in range(CHECK_EVERY, TASKS + 1, CHECK_EVERY):
        d = decide(spec, agents, runs[: t * len(means)], runs_per_task=1)
        if d.stop:
            assert d.leader is not None
            return t, int(d.leader)
    return None, None


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_bench_stops_where_decide_stops(scenario: Scenario, seed: int) -> None:
    scores = _scores(np.random.default_rng([len(scenario.name), seed]), scenario.means)
    outcome = _campaign(scenario, seed)
    assert (outcome.stopped_at, outcome.winner) == _by_decide(scenario.means, scores)


def test_seeded_figures_meet_the_targets_and_naive_peeking_does_not() -> None:
    gap, none = (simulate(s, 60) for s in SCENARIOS)
    right = sum(o.winner == 0 for o in gap) / len(gap)
    false = sum(o.winner is not None for o in none) / len(none)
    naive = sum(o.naive_winner is not None for o in none) / len(none)
    covered = sum(o.covered_at_stop for o in gap + none) / (3 * len(gap + none))
    assert right >= 0.95 and false <= 0.05 and covered >= 0.95
    assert naive > 0.05  # the contrast the issue asks to show
    assert np.mean([o.stopped_at or TASKS for o in gap]) < TASKS
