"""One run's history: its events folded, in log order, into what every service asks of it.

Services read a run back from the log to decide what to do after a redelivery or a
restart (is the sandbox made? has the agent ended? is the run sealed? which samples has
this judge done?). `RunHistory` is the one fold that answers those questions, so no
handler scans a list of events by hand.

Pure, and applying an event twice changes nothing. Where the run is, and whether an end
counts, is decided by the one lifecycle (`_lifecycle.advance`): a second end of the run
is refused (kept in `refused`, folded nowhere) and a seal after a failure keeps the
failure. Events that open a phase (the request, the sandbox) keep the first one logged:
a later duplicate does not restart the phase. Events that fill a slot (a step number,
the seal, one judge's sample) keep the last one logged.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple, TypeVar

from ._domain import Task
from ._envelope import Event
from ._events import (
    AgentFinished,
    AgentStepLogged,
    ArtifactsSealed,
    JudgmentFailed,
    JudgmentRecorded,
    RunCancelled,
    RunFailed,
    RunRequested,
    SandboxReady,
)
from ._lifecycle import (
    RunOutcome,
    RunPhase,
    RunState,
    advance,
    lifecycle_step,
    run_state,
    scores_run,
)
from ._web import WebSource

__all__ = ["RunHistory", "RunStage", "SampleKey"]

RunStage = RunState
"""Where a run is (the lifecycle's `RunState`)."""


E = TypeVar("E")


def _first(kept: E | None, event: E) -> E:
    return event if kept is None else kept


class SampleKey(NamedTuple):
    """One sample of one judge's verdict on a run."""

    judge_id: str
    sample: int


@dataclass
class RunHistory:
    """The state of one run, folded from its events (`fold`, or `apply` one at a time)."""

    request: RunRequested | None = None
    sandbox: SandboxReady | None = None
    finish: AgentFinished | None = None
    failures: list[RunFailed] = field(default_factory=list)
    """Every RunFailed of the run, in log order."""
    ended: AgentFinished | RunFailed | RunCancelled | None = None
    """The event that ended the run (the agent finished, the run failed, or it was
    cancelled before it was requested): the first."""
    phase: RunPhase = "unknown"
    """Where the lifecycle has the run (see `stage` for the state with judging)."""
    refused: list[Event] = field(default_factory=list)
    """Ends of the run after its first (a second AgentFinished, ...), in log order: refused
    by the lifecycle, folded nowhere."""
    seal: ArtifactsSealed | None = None
    verdicts: dict[SampleKey, JudgmentRecorded] = field(default_factory=dict)
    judgment_failures: dict[SampleKey, JudgmentFailed] = field(default_factory=dict)
    """Samples a judge gave up on, in the order they were first logged."""
    _steps: dict[int, AgentStepLogged] = field(default_factory=dict)

    @classmethod
    def fold(cls, events: Iterable[Event]) -> RunHistory:
        """The history of a run from its events, in log order."""
        history = cls()
        for event in events:
            history.apply(event)
        return history

    def apply(self, event: Event) -> None:
        """Fold one event in; events about no run (a campaign, a task, a judge) are ignored."""
        step = lifecycle_step(event)
        if step is not None and not self._folded(event):
            phase = advance(self.phase, step)
            if phase is None:
                self.refused.append(event)
                return
            self.phase = phase
        if isinstance(event, RunRequested):
            self.request = _first(self.request, event)
        elif isinstance(event, SandboxReady):
            self.sandbox = _first(self.sandbox, event)
        elif isinstance(event, AgentStepLogged):
            self._steps[event.step] = event
        elif isinstance(event, AgentFinished):
            self.finish = _first(self.finish, event)
            self._end(event)
        elif isinstance(event, RunFailed):
            if event not in self.failures:
                self.failures.append(event)
            self._end(event)
        elif isinstance(event, RunCancelled):
            self._end(event)
        elif isinstance(event, ArtifactsSealed):
            self.seal = event
        elif isinstance(event, JudgmentRecorded):
            self.verdicts[SampleKey(event.judge_id, event.sample)] = event
        elif isinstance(event, JudgmentFailed):
            self.judgment_failures[SampleKey(event.judge_id, event.sample)] = event

    def _end(self, event: AgentFinished | RunFailed | RunCancelled) -> None:
        if self.ended is None:
            self.ended = event

    def _folded(self, event: Event) -> bool:
        """Whether this very event (by id) was folded in already: a redelivery moves nothing."""
        kept = (self.request, self.sandbox, self.ended, self.seal, *self.failures)
        return any(e is not None and e.event_id == event.event_id for e in kept)

    @property
    def task(self) -> Task | None:
        """The task the run was requested for (None when the request is not on the log)."""
        return self.request.task if self.request is not None else None

    @property
    def steps(self) -> list[AgentStepLogged]:
        """The agent's steps by step number; a step logged twice counts once (the last)."""
        return [self._steps[n] for n in sorted(self._steps)]

    @property
    def sources(self) -> list[WebSource]:
        """The web answers the agent received (its sources), in step order, each page once."""
        seen: set[str] = set()
        found: list[WebSource] = []
        for step in self.steps:
            for result in step.tool_results:
                for source in result.sources:
                    if source.text_sha256 not in seen:
                        seen.add(source.text_sha256)
                        found.append(source)
        return found

    @property
    def stage(self) -> RunStage:
        """Where the run is now (the lifecycle's state)."""
        return run_state(self.phase, any(scores_run(v) for v in self.verdicts.values()))

    @property
    def failure(self) -> RunFailed | None:
        """The failure that decided the run's outcome (the first), if it failed."""
        return self.failures[0] if self.phase == "failed" and self.failures else None

    @property
    def outcome(self) -> RunOutcome | None:
        """How the run ended: judged, or failed with stage and cause (None: not yet)."""
        return RunOutcome.of(self.stage, self.failure)

    @property
    def infrastructure_failure(self) -> bool:
        """The platform failed the run (sealed afterwards or not): it is never scored."""
        failure = self.failure
        return failure is not None and failure.infrastructure

    def samples_done(self, judge_id: str) -> set[int]:
        """Samples of this judge recorded or failed for the run: never judged again."""
        keys = [*self.verdicts, *self.judgment_failures]
        return {key.sample for key in keys if key.judge_id == judge_id}
