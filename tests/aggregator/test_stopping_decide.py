"""The ``stopping:`` spec at the edge and the pure stopping rule over scored runs."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from assay_report.statistics import ScoredRun, StatisticsInputError, decide
from assay_schemas import CampaignSpec, StoppingSpec


def _runs(means: dict[str, float], tasks: int, epochs: int = 1, seed: int = 0) -> list[ScoredRun]:
    """Runs in task-major log order: every agent's epochs of task 0, then task 1, ..."""
    rng = np.random.default_rng(seed)
    out = []
    for t in range(tasks):
        task_bias = rng.normal(0, 1)
        for agent, mean in means.items():
            for _ in range(epochs):
                score = float(np.clip(mean + task_bias + rng.normal(0, 0.5), 0, 10))
                out.append(ScoredRun(agent, f"t{t}", score, score >= 5))
    return out


# -- the spec at the edge --------------------------------------------------------------


@pytest.mark.parametrize(
    "bad",
    [
        {"when": "ci_width"},  # no width
        {"when": "decided"},  # no threshold
        {"when": "ranking_settled", "width": 1.0},  # a figure of another rule
        {"when": "ranking_settled", "threshold": 0.5},
        {"when": "someday"},
        {"when": "ci_width", "width": 0},
        {"when": "ci_width", "width": 11},
        {"when": "decided", "threshold": 1.0},
        {"when": "ranking_settled", "confidence": 1.0},
        {"when": "ranking_settled", "min_tasks_per_agent": 1},
        {"when": "ranking_settled", "check_every": 0},
        {"when": "ranking_settled", "max_cost_usd": -1},
        {"when": "ranking_settled", "check_every": "epoch"},  # waves count tasks
        {"when": "ranking_settled", "surprise": 1},
    ],
)
def test_a_malformed_stopping_spec_is_refused(bad: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        StoppingSpec.model_validate(bad)


def test_ranking_settled_needs_two_agents() -> None:
    one = {"campaign_id": "c", "agents": [{"agent_id": "a", "model": "m"}]}
    assert CampaignSpec.model_validate(one).stopping is None
    with pytest.raises(ValidationError):
        CampaignSpec.model_validate({**one, "stopping": {"when": "ranking_settled"}})
    width = CampaignSpec.model_validate({**one, "stopping": {"when": "ci_width", "width": 1}})
    assert width.stopping == StoppingSpec(when="ci_width", width=1.0)


def test_a_campaign_without_stopping_runs_everything() -> None:
    spec = StoppingSpec(when="ci_width", width=2.0)
    assert (spec.confidence, spec.min_tasks_per_agent, spec.check_every) == (0.95, 10, 10)


# -- the rule ----------------------------------------------------------------------------


RANKING = StoppingSpec(when="ranking_settled", min_tasks_per_agent=5)


def test_a_clear_gap_settles_the_ranking_with_the_right_leader() -> None:
    d = decide(RANKING, ["a", "b"], _runs({"a": 7.0, "b": 4.0}, 60), runs_per_task=1)
    assert (d.stop, d.reason, d.settled, d.leader) == (True, "ranking_settled", True, "a")
    assert d.pairs[0].difference.low > 0
    assert d.pairs[0].difference.low < 3.0 < d.pairs[0].difference.high


def test_no_gap_does_not_settle() -> None:
    d = decide(RANKING, ["a", "b"], _runs({"a": 5.0, "b": 5.0}, 60), runs_per_task=1)
    assert not d.stop and d.reason is None
    assert d.pairs[0].difference.low <= 0


def test_never_before_min_tasks_per_agent() -> None:
    spec = StoppingSpec(when="ranking_settled", min_tasks_per_agent=200)
    d = decide(spec, ["a", "b"], _runs({"a": 9.0, "b": 1.0}, 60), runs_per_task=1)
    assert not d.stop
    assert d.pairs[0].difference.low > 0  # the figures alone would have stopped it


def test_a_task_counts_only_once_all_its_epochs_are_scored() -> None:
    runs = _runs({"a": 7.0, "b": 4.0}, 20, epochs=3)
    d = decide(RANKING, ["a", "b"], runs[:-1], runs_per_task=3)
    assert [a.score.n for a in d.agents] == [20, 19]
    assert d.agents[0].score.estimate == pytest.approx(
        np.mean([r.score for r in runs if r.agent_id == "a"])
    )


def test_ci_width_and_decided() -> None:
    runs = _runs({"a": 8.0, "b": 2.0}, 150)
    wide = decide(StoppingSpec(when="ci_width", width=0.5), ["a", "b"], runs, runs_per_task=1)
    narrow = decide(StoppingSpec(when="ci_width", width=4.0), ["a", "b"], runs, runs_per_task=1)
    assert (wide.stop, narrow.reason) == (False, "ci_width")
    decided = decide(StoppingSpec(when="decided", threshold=0.5), ["a", "b"], runs, runs_per_task=1)
    assert decided.reason == "decided"
    assert decided.agents[0].pass_share.low > 0.5 > decided.agents[1].pass_share.high


def test_max_cost_stops_unsettled_and_says_so() -> None:
    spec = StoppingSpec(when="ranking_settled", max_cost_usd=1.0)
    d = decide(spec, ["a", "b"], _runs({"a": 5.0, "b": 5.0}, 30), runs_per_task=1, cost_usd=1.5)
    assert (d.stop, d.reason, d.settled) == (True, "max_cost", False)
    assert any("max_cost_usd" in w for w in d.warnings)


def test_an_agent_with_too_few_tasks_is_not_estimable_never_zero_width() -> None:
    runs = _runs({"a": 7.0, "b": 4.0}, 20)
    d = decide(RANKING, ["a", "b", "c"], runs, runs_per_task=1)
    c = d.agents[2]
    assert (c.score.estimable, c.score.low, c.score.high) == (False, 0.0, 10.0)
    assert not d.stop and len(d.warnings) == 1


@pytest.mark.parametrize("score", [-0.5, 10.5, float("nan")])
def test_a_score_outside_the_scale_is_refused(score: float) -> None:
    with pytest.raises(StatisticsInputError):
        decide(RANKING, ["a"], [ScoredRun("a", "t", score, False)], runs_per_task=1)
