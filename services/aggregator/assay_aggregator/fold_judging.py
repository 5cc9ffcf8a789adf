"""What the judging events (judgments recorded or failed, judges registered) change in the
fold's state. Called by `fold.apply` only."""

from __future__ import annotations

from assay_report.state import FailureRecord, RunRecord, State, VerdictRecord
from assay_schemas import JudgeRegistered, JudgmentFailed, JudgmentRecorded

from .fold_runs import _joined, _judge, _run


def _sample(
    e: JudgmentRecorded | JudgmentFailed, run: RunRecord, seq: int
) -> tuple[str, str, str, int, int]:
    """The leading fields of the event's verdict or failure record (JudgeSampleRecord)."""
    return e.campaign_id, run.run_id, e.judge_id, e.sample, seq


def _judgment(state: State, e: JudgmentRecorded, seq: int) -> None:
    key = f"{e.run_id}/{e.judge_id}/{e.sample}"
    if e.judge_kind == "human":
        _human_judgment(state, e, seq, key)
        return
    old = state.verdicts.get(key)
    if old is not None and old.sequence > seq:
        # The counting rule refuses a later verdict for a sample; one that arrives after a later
        # one (out of log order) takes its place, and the later one is refused instead.
        state.refuse(
            old.sequence,
            "JudgmentRecorded",
            f"JudgmentRecorded: second verdict for run {e.run_id}, judge {e.judge_id}, "
            f"sample {e.sample} (the first is at seq {seq})",
        )
    run = _run(state, e, seq)
    state.verdicts[key] = VerdictRecord(
        *_sample(e, run, seq),
        judge_family=e.judge_family,
        judge_model=e.judge_model,
        scores={k: v.score for k, v in e.scores.items()},
        tags=list(e.failure_tags),
        checks=[[c.name, c.passed, c.weight, c.detail] for c in e.checks],
        files_opened=list(e.files_opened),
        files_cited=list(e.files_cited),
        cost_usd=e.cost_usd,
        attempts=e.attempts,
        rejected_sha256=e.rejected_outputs.sha256 if e.rejected_outputs else "",
        input_tokens=e.usage.input_tokens,
        output_tokens=e.usage.output_tokens,
        cached_tokens=e.usage.cached_tokens,
        cache_write_tokens=e.usage.cache_write_tokens,
        cached=e.cached_answer,
    )
    judge = _judge(state, e.judge_id, e.campaign_id)
    judge.family = judge.family or e.judge_family
    judge.model = judge.model or e.judge_model
    _joined(state, e, seq)


def _human_judgment(state: State, e: JudgmentRecorded, seq: int, key: str) -> None:
    """A reviewer's verdict: a reference, so it touches no run, judge or jury record."""
    old = state.human_verdicts.get(key)
    if old is not None and old.sequence < seq:
        return
    state.human_verdicts[key] = VerdictRecord(
        e.campaign_id,
        e.run_id or "",
        e.judge_id,
        e.sample,
        seq,
        scores={k: v.score for k, v in e.scores.items()},
    )


def _judgment_failed(state: State, e: JudgmentFailed, seq: int) -> None:
    run = _run(state, e, seq)
    key = f"{run.run_id}/{e.judge_id}/{e.sample}"
    old = state.failures.get(key)
    if old is not None and old.sequence > seq:
        return
    state.failures[key] = FailureRecord(
        *_sample(e, run, seq),
        error=e.error,
        attempts=e.attempts,
        infrastructure=e.infrastructure,
        raw_output_sha256=e.raw_output.sha256 if e.raw_output else "",
    )
    _judge(state, e.judge_id, e.campaign_id)
    _joined(state, e, seq)


def _judge_registered(state: State, e: JudgeRegistered, seq: int) -> None:
    judge = _judge(state, e.judge.judge_id, e.campaign_id)
    judge.family, judge.model = e.judge.family, e.judge.model
    state.judge_samples[f"{e.campaign_id}/{e.judge.judge_id}"] = e.judge.sampling_times
    _joined(state, e, seq)
