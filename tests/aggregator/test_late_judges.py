"""A judge the campaign's jury does not name: named as joined late, out of the headline,
counted in the statistics beside it; the same whatever order the fold sees the events in."""

from __future__ import annotations

import io
from collections.abc import Iterator
from statistics import mean

import pytest
from rich.console import Console

from assay_aggregator import fold
from assay_report import Projections, build_report, canonical_json, report_json
from assay_report.html import render_html
from assay_report.report import Report
from assay_report.terminal import print_report
from assay_schemas import (
    ArtifactsSealed,
    DimensionScore,
    Event,
    JudgeRegistered,
    JudgeSpec,
    JudgmentRecorded,
    Producer,
    RunRequested,
)
from assay_testing.synthetic_log import synthetic_events

from .conftest import SPEC

RESAMPLES = 200
LATE = JudgeSpec(judge_id="late", model="late-model", family="fam_late")


def _late_judge(events: list[Event], runs: set[str], *, joins: bool) -> Iterator[Event]:
    """`late` registers for the campaign (when it `joins`), then gives every rated run in
    `runs` a 0."""
    if joins:
        yield JudgeRegistered(
            event_id=JudgeRegistered.id_for("camp", "late"),
            campaign_id="camp",
            judge=LATE,
            producer=Producer(service="judge-late", version="0"),
        )
    seen: set[str] = set()
    for e in events:
        first = isinstance(e, JudgmentRecorded) and e.judge_id == "judge_a" and e.sample == 0
        if first and e.run_id in runs and e.run_id not in seen:
            seen.add(e.run_id or "")
            yield e.model_copy(
                update={
                    "event_id": JudgmentRecorded.id_for(e.run_id, "late", 0),
                    "judge_id": "late",
                    "judge_family": "fam_late",
                    "scores": {k: DimensionScore(score=0) for k in e.scores},
                    "failure_tags": [],
                }
            )


def _sealed(events: list[Event]) -> list[str]:
    return [e.run_id or "" for e in events if isinstance(e, ArtifactsSealed)]


@pytest.fixture(scope="module")
def logs() -> tuple[list[Event], list[Event]]:
    """The synthetic campaign, and the same with a late judge that joined after 2/3 of the
    seals: it back-fills those runs and judges the rest as they are sealed."""
    base = list(synthetic_events(SPEC))
    sealed = _sealed(base)
    cut = next(
        i
        for i, e in enumerate(base)
        if isinstance(e, ArtifactsSealed) and e.run_id == sealed[2 * len(sealed) // 3]
    )
    early = set(_sealed(base[:cut]))
    rest = set(sealed) - early
    late = [
        *base[:cut],
        *_late_judge(base, early, joins=True),
        *base[cut:],
        *_late_judge(base, rest, joins=False),
    ]
    return base, late


def _report(events: list[Event]) -> Report:
    return build_report(Projections(fold(enumerate(events, 1))), n_resamples=RESAMPLES)


def test_the_declared_jury_is_the_headline_and_late_judges_sit_beside_it(
    logs: tuple[list[Event], list[Event]],
) -> None:
    base, with_late = logs
    before, report = _report(base), _report(with_late)
    assert before.late_judges == () and before.with_late_judges is None
    # The headline equals the campaign without the late judge's verdicts.
    assert canonical_json(report.statistics.agent_scores) == canonical_json(
        before.statistics.agent_scores
    )
    [late] = report.late_judges
    rated = {
        e.run_id for e in with_late if isinstance(e, JudgmentRecorded) and e.judge_id == "late"
    }
    registered = next(
        i for i, e in enumerate(with_late, 1) if isinstance(e, JudgeRegistered) and e.judge is LATE
    )
    sealed_at = {e.run_id: i for i, e in enumerate(with_late, 1) if isinstance(e, ArtifactsSealed)}
    assert (late.campaign_id, late.judge_id, late.joined_sequence) == ("camp", "late", registered)
    assert late.n_runs == len(rated) and late.n_verdicts == len(rated)
    assert late.n_backfilled == sum(sealed_at[r] < registered for r in rated) > 0
    assert late.n_backfilled < late.n_runs
    assert late.joined_at == with_late[registered - 1].occurred_at.isoformat()
    # Beside it, its zeros pull every agent down, as a hand computation says.
    assert report.with_late_judges is not None
    headline = {s.agent_id: s.estimate for s in report.statistics.agent_scores}
    beside = {s.agent_id: s.estimate for s in report.with_late_judges.agent_scores}
    assert headline == pytest.approx(_by_hand(with_late, {"judge_a", "judge_b"}))
    assert beside == pytest.approx(_by_hand(with_late, {"judge_a", "judge_b", "late"}))
    assert all(beside[a] < headline[a] for a in headline)


def _by_hand(events: list[Event], judges: set[str]) -> dict[str, float]:
    """Run score: mean over judges of each judge's mean rating; agent score: mean over
    tasks of the mean over the task's runs (the report's definitions, in plain Python)."""
    ratings: dict[str, dict[str, list[int]]] = {}
    for e in events:
        if isinstance(e, JudgmentRecorded) and e.judge_id in judges and e.scores:
            by_judge = ratings.setdefault(e.run_id or "", {})
            by_judge.setdefault(e.judge_id, []).extend(d.score for d in e.scores.values())
    owner = {
        e.run_id: (e.agent.agent_id, e.task.task_id) for e in events if isinstance(e, RunRequested)
    }
    tasks: dict[str, dict[str, list[float]]] = {}
    for run, by_judge in ratings.items():
        agent, task = owner[run]
        score = mean(mean(v) for v in by_judge.values())
        tasks.setdefault(agent, {}).setdefault(task, []).append(score)
    return {a: mean(mean(runs) for runs in t.values()) for a, t in tasks.items()}


def test_late_judges_are_shown_and_rebuilt_identically(
    logs: tuple[list[Event], list[Event]],
) -> None:
    _, with_late = logs
    report = _report(with_late)
    text = io.StringIO()
    print_report(report, Console(file=text, width=240, color_system=None))
    shown = text.getvalue()
    assert "Judges that joined late" in shown and "Leaderboard including late judges" in shown
    assert "the declared jury" in shown
    html = render_html(report)
    assert "Judges that joined late" in html and "Leaderboard including late judges" in html
    # Any fold order gives the same report (the first fact of a judge counts by sequence).
    shuffled = list(enumerate(with_late, 1))
    shuffled = shuffled[1::2] + shuffled[::2]
    again = build_report(Projections(fold(shuffled)), n_resamples=RESAMPLES)
    assert report_json(again) == report_json(report)
