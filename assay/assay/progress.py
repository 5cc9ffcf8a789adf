"""Campaign progress as a fold over events: what `assay watch` and `assay run` show."""

from __future__ import annotations

from dataclasses import dataclass, field

from assay_schemas import (
    RULES_JUDGE_ID,
    AgentFinished,
    AgentStepLogged,
    ArtifactsSealed,
    CampaignStarted,
    Event,
    JudgmentFailed,
    JudgmentRecorded,
    RunFailed,
    RunRequested,
    SandboxReady,
)

__all__ = ["Progress"]


@dataclass
class Progress:
    """Counts per campaign, rebuilt from the log; `complete` says when nothing is pending."""

    campaign_id: str | None = None
    judges: set[str] = field(default_factory=set)
    """Judge ids expected to judge every sealed run (the rule judge included)."""
    samples: dict[str, int] = field(default_factory=dict)
    requested: set[str] = field(default_factory=set)
    ready: set[str] = field(default_factory=set)
    finished: set[str] = field(default_factory=set)
    failed: dict[str, bool] = field(default_factory=dict)
    """run id -> infrastructure failure?"""
    sealed: set[str] = field(default_factory=set)
    judged: set[tuple[str, str, int]] = field(default_factory=set)
    judge_failures: set[tuple[str, str, int]] = field(default_factory=set)
    steps: int = 0
    cost_usd: float = 0.0
    scripted: bool = False

    def apply(self, event: Event) -> None:
        """Fold one event in (events of other campaigns are ignored when one is chosen)."""
        if self.campaign_id is not None and event.campaign_id != self.campaign_id:
            return
        run = event.run_id or ""
        if isinstance(event, CampaignStarted):
            self.judges |= {j.judge_id for j in event.campaign.judges} | {RULES_JUDGE_ID}
            self.samples.update({j.judge_id: j.sampling_times for j in event.campaign.judges})
            self.scripted = self.scripted or event.campaign.scripted
        elif isinstance(event, RunRequested):
            self.requested.add(run)
        elif isinstance(event, SandboxReady):
            self.ready.add(run)
        elif isinstance(event, AgentStepLogged):
            self.steps += 1
            self.cost_usd += event.cost_usd
        elif isinstance(event, AgentFinished):
            self.finished.add(run)
        elif isinstance(event, RunFailed):
            self.failed[run] = event.infrastructure
        elif isinstance(event, ArtifactsSealed):
            if event.outcome == "finished":
                self.sealed.add(run)
        elif isinstance(event, JudgmentRecorded):
            self.judged.add((run, event.judge_id, event.sample))
            self.cost_usd += event.cost_usd
        elif isinstance(event, JudgmentFailed):
            self.judge_failures.add((run, event.judge_id, event.sample))

    @property
    def expected_judgments(self) -> int:
        """Verdicts owed: every sealed run × every judge × its samples."""
        per_run = sum(self.samples.get(j, 1) for j in self.judges)
        return len(self.sealed) * per_run

    @property
    def verdicts(self) -> int:
        """Verdicts given or given up on."""
        return len(self.judged | self.judge_failures)

    @property
    def runs_done(self) -> int:
        """Runs that ended: sealed, or failed without a seal to judge."""
        return len(self.sealed | set(self.failed))

    @property
    def complete(self) -> bool:
        """Every requested run ended and every owed verdict is in."""
        return (
            bool(self.requested)
            and self.runs_done >= len(self.requested)
            and self.verdicts >= self.expected_judgments
        )

    def state_counts(self) -> dict[str, int]:
        """Runs by their furthest state."""
        infra = {r for r, i in self.failed.items() if i}
        return {
            "requested": len(self.requested),
            "running": len(self.ready - self.finished - set(self.failed)),
            "finished": len(self.finished),
            "sealed": len(self.sealed),
            "failed (infra)": len(infra),
            "failed (agent)": len(set(self.failed) - infra),
        }
