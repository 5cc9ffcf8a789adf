"""The counting rule (issue #24, findings 8, 9 and 15): what counts is decided once, by the
fold's counting rule, and every reader takes that decision. Each attack lands on a real log."""

from __future__ import annotations

import json
from typing import Any

import pytest

from assay.bus import Bus
from assay_aggregator import fold
from assay_aggregator.audit import audit_run, load_run_events
from assay_report import Projections
from assay_report.report import build_report
from assay_schemas import (
    RULES_JUDGE_ID,
    DimensionScore,
    Event,
    FileRef,
    JudgmentRecorded,
    RunRequested,
    Task,
    TaskSubmitted,
    TextContainsCheck,
)
from assay_testing.events import judgment_failed

from .conftest import Published


def figures(events: list[Event]) -> tuple[dict[str, Any], dict[int, str]]:
    """The report's figures of a fold of `events`, and what it refused."""
    state = fold(enumerate(events, 1))
    doc = json.loads(build_report(Projections(state), n_resamples=200).model_dump_json())
    for key in ("log_sequence", "refused"):
        doc.pop(key)
    return doc, {seq: r.reason for seq, r in state.refused.items()}


def _llm(events: list[Event], n: int = 0) -> JudgmentRecorded:
    return [e for e in events if isinstance(e, JudgmentRecorded) and e.scores][n]


def _unrated(events: list[Event], v: JudgmentRecorded) -> JudgmentRecorded:
    """`v` moved to a sample of a judge no verdict was recorded for (judge_c, off the jury,
    so only the rubric checks apply)."""
    return v.model_copy(update={"event_id": "attack", "judge_id": "judge_c"})


def _incomplete(events: list[Event]) -> dict[str, Event]:
    v = _llm(events)
    keys = sorted(v.scores)
    zeros = {k: DimensionScore(score=0) for k in keys}
    rules = next(e for e in events if isinstance(e, JudgmentRecorded) and not e.scores)
    return {
        "a rubric dimension unscored": _unrated(events, v).model_copy(
            update={"scores": {k: v.scores[k] for k in keys[1:]}}
        ),
        "only one dimension scored": _unrated(events, v).model_copy(
            update={"scores": {keys[0]: DimensionScore(score=0)}}
        ),
        "no scores at all": _unrated(events, v).model_copy(update={"scores": {}}),
        "a dimension outside the rubric": _unrated(events, v).model_copy(
            update={"scores": {**v.scores, "charisma": DimensionScore(score=10)}}
        ),
        # The case: an extra all-zero sample moved an agent's mean 6.046 → 6.000.
        "a sample past sampling_times": v.model_copy(
            update={"event_id": "attack", "sample": 2, "scores": zeros}
        ),
        "a sample far past sampling_times": v.model_copy(
            update={"event_id": "attack", "sample": 19, "scores": zeros}
        ),
        "a rule verdict with scores": rules.model_copy(
            update={"event_id": "attack", "judge_id": RULES_JUDGE_ID, "scores": zeros}
        ),
        "a rule verdict past its one sample": rules.model_copy(
            update={"event_id": "attack", "sample": 1}
        ),
        "a failure past sampling_times": judgment_failed(v, v.judge_id, 2, event_id="attack"),
    }


INCOMPLETE = {
    "a rubric dimension unscored": "unscored",
    "only one dimension scored": "unscored",
    "no scores at all": "scores no dimension",
    "a dimension outside the rubric": "outside the rubric: charisma",
    "a sample past sampling_times": "past the 2 sample(s)",
    "a sample far past sampling_times": "past the 2 sample(s)",
    "a rule verdict with scores": "the rule judge records checks only",
    "a rule verdict past its one sample": "past the 1 sample(s)",
    "a failure past sampling_times": "past the 2 sample(s)",
}
"""Each attack and what its refusal says."""


@pytest.mark.parametrize("attack", INCOMPLETE)
def test_an_incomplete_verdict_is_refused_and_counts_nowhere(
    published: Published, attack: str
) -> None:
    events = published.events
    clean, refused = figures(events)
    assert refused == {}
    hostile, refused = figures([*events, _incomplete(events)[attack]])
    assert list(refused) == [len(events) + 1], attack
    assert INCOMPLETE[attack] in refused[len(events) + 1]
    assert hostile == clean, attack


def test_a_task_asking_for_more_samples_raises_the_limit(published: Published) -> None:
    """The judge takes max(its own, the task's) samples: a sample within that counts."""
    events = list(published.events)
    v = _llm(events)
    at = next(
        i for i, e in enumerate(events) if isinstance(e, TaskSubmitted) and e.task_id == v.task_id
    )
    submitted = events[at]
    assert isinstance(submitted, TaskSubmitted)
    judge = submitted.task.judge.model_copy(update={"sampling_times": 3})
    events[at] = submitted.model_copy(
        update={"task": submitted.task.model_copy(update={"judge": judge})}
    )
    extra = v.model_copy(update={"event_id": "third-sample", "sample": 2})
    _, refused = figures([*events, extra])
    assert refused == {}
    _, refused = figures([*events, extra.model_copy(update={"event_id": "x", "sample": 3})])
    assert list(refused) == [len(events) + 1]


def _outside(events: list[Event], task: Task) -> list[Event]:
    """A submission of `task` and a run (request, verdict) scheduled from it."""
    submitted = next(e for e in events if isinstance(e, TaskSubmitted))
    request = next(e for e in events if isinstance(e, RunRequested))
    sub = submitted.model_copy(
        update={"event_id": "outside", "task_id": task.task_id, "task": task}
    )
    where = {"run_id": "outside-run", "task_id": task.task_id}
    run = request.model_copy(
        update={**where, "event_id": "outside-rq", "task": task, "causation_id": "outside"}
    )
    verdict = _llm(events).model_copy(update={**where, "event_id": "outside-v"})
    return [sub, run, verdict]


def _pattern(p: str) -> Task:
    check = TextContainsCheck(name="says", path="out/r.md", pattern=p)
    return Task(task_id="outside", prompt="p", reference_checks=[check])


def _attached(*paths: str) -> Task:
    refs = [FileRef(path=p, sha256="0" * 64, size=1) for p in paths]
    return Task(task_id="outside", prompt="p", attachments=refs)


@pytest.mark.parametrize(
    "task",
    [
        _pattern(r"(?<=total: )\d+"),
        _pattern(r"growth(?= rate)"),
        _pattern(r"(\w+) \1"),
        _attached("../outside.csv"),
        _attached("/etc/passwd"),
        _attached("Data.csv", "data.csv"),
    ],
    ids=["look-behind", "look-ahead", "backreference", "dot-dot", "absolute", "case-twins"],
)
def test_a_refused_submission_counts_nowhere_nor_do_its_runs(
    published: Published, task: Task
) -> None:
    events = published.events
    clean, _ = figures(events)
    hostile, refused = figures([*events, *_outside(events, task)])
    n = len(events)
    assert list(refused) == [n + 1, n + 2, n + 3]
    assert "refused submission outside" in refused[n + 2]
    assert hostile == clean  # task count, per-task checks, scores: all as before


async def test_audit_and_report_decide_from_one_counting_rule(
    bus: Bus, published: Published
) -> None:
    """Finding 9 without signatures: a second verdict scoring all tens is refused by the
    report and shown as refused by the audit, whose score stays the first verdict's."""
    v = _llm(published.events)
    logged, signers = await load_run_events(bus, v.run_id or "")
    before = audit_run(logged, published.store, signers=signers).contribution
    second = v.model_copy(
        update={"event_id": "second", "scores": {k: DimensionScore(score=10) for k in v.scores}}
    )
    await bus.publish(second)
    logged, signers = await load_run_events(bus, v.run_id or "")
    audit = audit_run(logged, published.store, signers=signers)
    assert audit.contribution == before
    [(seq, why)] = [(s, w) for s, w in signers.items() if w]
    assert seq == logged[-1].sequence and "second verdict" in why
