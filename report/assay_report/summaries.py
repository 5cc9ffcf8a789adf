"""One line a person can read for each kind of event, as `assay audit` lists a run's chain."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from assay_schemas import (
    AgentFinished,
    AgentStepLogged,
    ArtifactsSealed,
    CampaignStarted,
    Event,
    JudgeRegistered,
    JudgmentFailed,
    JudgmentRecorded,
    RunFailed,
    RunRequested,
    SandboxReady,
    TaskSubmitted,
)

__all__ = ["summarize"]


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _requested(e: RunRequested) -> str:
    scripted = ", scripted" if e.scripted else ""
    return f"agent {e.agent.agent_id} ({e.agent.model}), epoch {e.epoch}{scripted}"


def _sandbox(e: SandboxReady) -> str:
    return f"{e.backend} sandbox {e.sandbox_id}, {_n(len(e.workspace), 'workspace file')}"


def _step(e: AgentStepLogged) -> str:
    calls = ", ".join(c.name for c in e.tool_calls) or "no tool call"
    errors = sum(r.is_error for r in e.tool_results)
    failed = f", {_n(errors, 'tool error')}" if errors else ""
    tokens = f"{e.usage.input_tokens} in / {e.usage.output_tokens} out tokens"
    return f"step {e.step}: {calls}{failed}; {tokens}, model {e.latency_ms:.0f} ms"


def _finished(e: AgentFinished) -> str:
    return (
        f"{e.stop_reason} after {_n(e.steps, 'step')}, {e.duration_s:.1f} s, "
        f"{e.usage.input_tokens} in / {e.usage.output_tokens} out tokens, ${e.cost_usd:.4f}"
    )


def _failed(e: RunFailed) -> str:
    kind = "infrastructure" if e.infrastructure else "agent"
    return f"{e.stage} failed ({kind}): {e.error}"


def _sealed(e: ArtifactsSealed) -> str:
    excluded = f", {len(e.excluded)} excluded" if e.excluded else ""
    return f"{e.outcome}: {_n(len(e.files), 'file')} sealed{excluded}"


def _judged(e: JudgmentRecorded) -> str:
    scores = [s.score for s in e.scores.values()]
    mean = f", mean {sum(scores) / len(scores):.2f}" if scores else ""
    checks = f", {sum(c.passed for c in e.checks)}/{len(e.checks)} checks" if e.checks else ""
    tags = f"; tags {', '.join(e.failure_tags)}" if e.failure_tags else ""
    return f"{e.judge_id}#{e.sample}: {_n(len(scores), 'score')}{mean}{checks}{tags}"


def _judge_failed(e: JudgmentFailed) -> str:
    return f"{e.judge_id}#{e.sample}: {e.error} ({_n(e.attempts, 'attempt')})"


_SUMMARIES: dict[type[Any], Callable[[Any], str]] = {
    CampaignStarted: lambda e: f"campaign {e.campaign.name}",
    TaskSubmitted: lambda e: f"task {e.task.task_id}",
    RunRequested: _requested,
    SandboxReady: _sandbox,
    AgentStepLogged: _step,
    AgentFinished: _finished,
    RunFailed: _failed,
    ArtifactsSealed: _sealed,
    JudgeRegistered: lambda e: f"judge {e.judge.judge_id}",
    JudgmentRecorded: _judged,
    JudgmentFailed: _judge_failed,
}


def summarize(event: Event) -> str:
    """What happened, in one line (the event type alone for a kind with no summary)."""
    summary = _SUMMARIES.get(type(event))
    return summary(event) if summary is not None else event.event_type
