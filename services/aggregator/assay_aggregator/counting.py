"""The counting rule: the one decision on which stored events count, for every reader of the log.

The aggregator, `assay report`, `replay`, `audit`, `events`, the viewer and the Parquet
export all fold the log through :func:`counts` (via ``rebuild.fold_stream`` or the live
consumer), so they cannot disagree on what counts. An event is refused when:

- its signature check failed (unsigned, forged, a role that may not write it);
- it is a TaskSubmitted that `assay submit` would have refused (an RE2-invalid pattern,
  a path outside /workspace, two attachment names that differ only in case);
- it belongs to a run whose submission was refused: the task, its runs, their steps and
  verdicts count nowhere;
- it repeats the id of an event folded from another message;
- it ends a run that has ended already (a second AgentFinished, AgentFinished after
  RunFailed, ...: the run's lifecycle, `assay_schemas.advance`, refuses it; the first
  end stands, like the first verdict);
- it is a verdict that is not whole: a second one for a sample (the first stands), one
  scoring dimensions outside the rubric or missing some, an LLM verdict with no scores,
  a rule verdict with scores, or a sample index past the judge's ``sampling_times``;
- it is a human verdict that is not a reviewer's grade of a sealed run (see `_human`),
  or a machine verdict under a reviewer's judge id;
- it is a sealed control declaration that does not open with the reader's controls key
  (another deployment's, or tampered with: `SealBroken`). A reader without the key
  counts declarations without opening any.

:func:`refusal` is pure (it reads what the log held before the event); :func:`counts`
records the refusal in the state, which is how every reader learns of it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from assay.security.controls import SealBroken
from assay.security.signing import SignatureCheck
from assay.tasks import check_task
from assay_report.state import RunRecord, State
from assay_schemas import (
    HUMAN_SAMPLE,
    RULES_JUDGE_ID,
    ControlDeclared,
    Event,
    JudgmentFailed,
    JudgmentRecorded,
    LifecycleWalk,
    RunRequested,
    TaskInputError,
    TaskSubmitted,
    is_reviewer_id,
    lifecycle_step,
    samples_owed,
    walk,
)

__all__ = ["counts", "moved", "refusal", "rubric_keys"]


def rubric_keys(state: State, campaign_id: str, task_id: str | None) -> set[str] | None:
    """Dimension keys a verdict on the task must score: the task's own rubric, else the
    campaign's (None when neither is known: then only the other checks apply)."""
    task = state.tasks.get(f"{campaign_id}/{task_id}")
    if task is not None and task.rubric_keys:
        return set(task.rubric_keys)
    campaign = state.campaigns.get(campaign_id)
    if campaign is None:
        return None
    return {d["key"] for d in campaign.get("rubric", {}).get("dimensions", [])}


def _samples(state: State, e: JudgmentRecorded | JudgmentFailed) -> int | None:
    """Samples the judge takes of this run: the larger of its spec's and the task's
    `sampling_times`, as the judge does (1 for the rule judge; None when unknown)."""
    if e.judge_id == RULES_JUDGE_ID:
        return 1
    judge = state.judge_samples.get(f"{e.campaign_id}/{e.judge_id}")
    if judge is None:
        return None
    return samples_owed(judge, state.task_samples.get(f"{e.campaign_id}/{e.task_id}", 1))


def _human(state: State, e: JudgmentRecorded, where: str) -> str | None:
    """A human verdict counts when a reviewer graded a sealed run once, every rubric
    dimension and nothing else (no checks: those are the rule judge's)."""
    if not is_reviewer_id(e.judge_id):
        return f"human {where}: a human judge's id is reviewer-<name>"
    if e.sample != HUMAN_SAMPLE:
        return f"human {where}: a reviewer grades a run once (sample {HUMAN_SAMPLE})"
    run = state.runs.get(e.run_id or "")
    if run is None or not run.sealed:
        return f"human {where}: the run was never sealed"
    if e.checks:
        return f"human {where} records rule checks"
    old = state.human_verdicts.get(f"{e.run_id}/{e.judge_id}/{e.sample}")
    if old is not None:
        return f"second human {where} (the first is at seq {old.sequence})"
    return None


def _verdict(state: State, sequence: int, e: JudgmentRecorded) -> str | None:
    where = f"verdict for run {e.run_id}, judge {e.judge_id}, sample {e.sample}"
    if e.judge_kind == "human":
        problem = _human(state, e, where)
        if problem is not None:
            return problem
    elif is_reviewer_id(e.judge_id):
        return f"machine {where}: reviewer-<name> ids are reserved for human verdicts"
    if e.judge_id == RULES_JUDGE_ID:
        if e.scores:
            return f"{where} scores dimensions; the rule judge records checks only"
    elif not e.scores:
        return f"{where} scores no dimension"
    else:
        keys = rubric_keys(state, e.campaign_id, e.task_id)
        if keys is not None:
            outside = sorted(set(e.scores) - keys)
            if outside:
                return f"{where} scores dimensions outside the rubric: {', '.join(outside)}"
            missing = sorted(keys - set(e.scores))
            if missing:
                return f"{where} leaves rubric dimensions unscored: {', '.join(missing)}"
    problem = None if e.judge_kind == "human" else _sample_problem(state, e)
    if problem is not None:
        return problem
    old = state.verdicts.get(f"{e.run_id}/{e.judge_id}/{e.sample}")
    if old is not None and old.sequence < sequence:
        # A verdict is evidence: the first one for a sample stands. Changing a judgment
        # means a new judge version (rejudge), never a second event for the same sample.
        return f"second {where} (the first is at seq {old.sequence})"
    return None


def _sample_problem(state: State, e: JudgmentRecorded | JudgmentFailed) -> str | None:
    limit = _samples(state, e)
    if limit is not None and e.sample >= limit:
        return (
            f"sample {e.sample} of judge {e.judge_id} on run {e.run_id} is past the "
            f"{limit} sample(s) it takes"
        )
    return None


def _second_end(state: State, sequence: int, event: Event) -> str | None:
    """Why the event may not move its run (it ends a run that ended before it), or None.

    The run's steps are walked in sequence order, so an event of the run delivered late
    (a redelivery) lands in its place. Two ends of one run are settled by the first to
    arrive: the live consumer and every rebuild hand the log over in sequence order (a
    redelivery repeats a message already folded), so that is the first in the log."""
    step = lifecycle_step(event)
    if step is None:
        return None  # most events (steps, verdicts): no run lookup
    run = state.runs.get(event.run_id or "")
    if run is None:
        return None
    steps, where = moved(run, sequence, event)
    if steps.index([sequence, step]) not in where.refused:
        return None
    at = f"seq {steps[where.ended][0]}" if where.ended is not None else "its seal"
    return f"second end of run {event.run_id} (it is {where.phase}; it ended at {at})"


def moved(run: RunRecord, sequence: int, event: Event) -> tuple[list[list[Any]], LifecycleWalk]:
    """The run's lifecycle steps with the event's among them (by sequence), and where
    they leave it (`walk`): what the counting rule asks before, and the fold records after."""
    step = lifecycle_step(event)
    steps = run.lifecycle if step is None else sorted([*run.lifecycle, [sequence, step]])
    return steps, walk(s for _, s in steps)


def refusal(state: State, sequence: int, event: Event) -> str | None:
    """Why `event`, stored at `sequence`, must count for nothing given what the log held
    before it (signatures aside); None when it counts. Reads the state, changes nothing."""
    if event.run_id and event.run_id in state.refused_runs:
        return state.refused_runs[event.run_id]
    second = _second_end(state, sequence, event)
    if second is not None:
        return second
    # By exact type, as the fold dispatches: most events (steps) have no check of their
    # own, and a chain of isinstance checks asked five questions of each to learn that.
    check = _CHECKS.get(type(event))
    return None if check is None else check(state, sequence, event)


def _invalid_task(state: State, sequence: int, event: TaskSubmitted) -> str | None:
    try:
        check_task(event.task)
    except TaskInputError as e:
        return str(e)
    return None


def _of_refused_submission(state: State, sequence: int, event: RunRequested) -> str | None:
    cause = event.causation_id or ""
    if cause in state.refused_submissions:
        return f"run {event.run_id} of refused submission {cause}: counted nowhere"
    return None


def _failure_sample(state: State, sequence: int, event: JudgmentFailed) -> str | None:
    return _sample_problem(state, event)


def _unopened_declaration(state: State, sequence: int, event: ControlDeclared) -> str | None:
    if state.controls_key is None:
        return None  # a reader without the key counts declarations without opening any
    try:
        state.controls_key.open(event)
    except SealBroken as e:
        return f"{type(e).__name__}: {e}"
    return None


_CHECKS: dict[type[Event], Callable[[State, int, Any], str | None]] = {
    TaskSubmitted: _invalid_task,
    RunRequested: _of_refused_submission,
    JudgmentRecorded: _verdict,
    JudgmentFailed: _failure_sample,
    ControlDeclared: _unopened_declaration,
}
"""Each event type's own refusal check, after the checks every event of a run takes."""


def counts(
    state: State, sequence: int, subject: str, event: Event, signature: SignatureCheck | None = None
) -> bool:
    """Whether the event may be folded in. `signature` is its signature check (None when
    signatures are not checked). A refusal is recorded with its why; the message an event
    was folded from, delivered again, is skipped without one."""
    first = state.seen.get(event.event_id)
    if signature is not None and not signature.ok:
        reason = signature.reason
    elif first == sequence:
        return False  # a redelivery of what was folded already
    elif first is not None:
        # Skipping it silently would leave a reader of one run (the audit) to count it.
        reason = f"repeat of event {event.event_id} (first stored at seq {first})"
    else:
        found = refusal(state, sequence, event)
        if found is None:
            if type(event) is TaskSubmitted:
                state.refused_submissions.discard(event.event_id)
            return True
        reason = found
        if isinstance(event, RunRequested) and event.run_id:
            # Only a genuine request (its signature held) condemns its run: a forged one
            # aimed at a real run must not take the real run's events down with it.
            state.refused_runs.setdefault(event.run_id, reason)
    if isinstance(event, TaskSubmitted) and event.event_id not in state.seen:
        state.refused_submissions.add(event.event_id)
    state.refuse(sequence, subject, f"{event.event_type}: {reason}")
    return False
