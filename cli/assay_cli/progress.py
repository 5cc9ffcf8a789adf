"""Campaign progress as a fold over events: what `assay watch` and `assay run` show.

What is *expected* comes from the log itself: runs per task × agent × epoch (TaskSubmitted,
CampaignStarted), and for every run sealed as finished one verdict per judge × sample, the
samples being the larger of the judge's and the task's `sampling_times` (as the judge does
it), plus the rule judge's one. Counting verdicts against exactly that set is what keeps a
task that asks for more samples from ending the wait early.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from assay_schemas import (
    RULES_JUDGE_ID,
    AgentFinished,
    AgentStepLogged,
    ArtifactsSealed,
    CampaignSpec,
    CampaignStarted,
    Event,
    JudgmentFailed,
    JudgmentRecorded,
    RunFailed,
    RunRequested,
    SandboxReady,
    Task,
    TaskSubmitted,
    run_id_for,
)

__all__ = ["Progress", "VerdictKey"]

VerdictKey = tuple[str, str, int]
"""(run id, judge id, sample): one verdict owed or given."""


@dataclass
class Progress:
    """Counts per campaign, rebuilt from the log; `complete` says when nothing is pending."""

    campaign_id: str | None = None
    campaigns: dict[str, CampaignSpec] = field(default_factory=dict)
    tasks: dict[tuple[str, str], Task] = field(default_factory=dict)
    """(campaign id, task id) -> task."""
    run_task: dict[str, tuple[str, str]] = field(default_factory=dict)
    """run id -> (campaign id, task id)."""
    requested: set[str] = field(default_factory=set)
    ready: set[str] = field(default_factory=set)
    finished: set[str] = field(default_factory=set)
    failures: dict[str, RunFailed] = field(default_factory=dict)
    sealed: set[str] = field(default_factory=set)
    """Runs sealed as finished: the ones the jury owes verdicts on."""
    ended: set[str] = field(default_factory=set)
    """Runs that will not move on: sealed (either outcome) or failed."""
    expected: set[str] = field(default_factory=set)
    owed: set[VerdictKey] = field(default_factory=set)
    judged: set[VerdictKey] = field(default_factory=set)
    judge_failures: dict[VerdictKey, JudgmentFailed] = field(default_factory=dict)
    steps: int = 0
    cost_usd: float = 0.0
    scripted: bool = False

    def apply(self, event: Event) -> None:
        """Fold one event in (events of other campaigns are ignored when one is chosen)."""
        if self.campaign_id is not None and event.campaign_id != self.campaign_id:
            return
        run = event.run_id or ""
        if isinstance(event, CampaignStarted):
            self.campaigns[event.campaign_id] = event.campaign
            self.scripted = self.scripted or event.campaign.scripted
            self._reindex()
        elif isinstance(event, TaskSubmitted):
            self.tasks[(event.campaign_id, event.task.task_id)] = event.task
            self._reindex()
        elif isinstance(event, RunRequested):
            self.requested.add(run)
            self.expected.add(run)
            self.run_task[run] = (event.campaign_id, event.task.task_id)
        elif isinstance(event, SandboxReady):
            self.ready.add(run)
        elif isinstance(event, AgentStepLogged):
            self.steps += 1
            self.cost_usd += event.cost_usd
        elif isinstance(event, AgentFinished):
            self.finished.add(run)
        elif isinstance(event, RunFailed):
            self.failures[run] = event
            self.ended.add(run)
        elif isinstance(event, ArtifactsSealed):
            self._sealed(event)
        elif isinstance(event, JudgmentRecorded):
            self.judged.add((run, event.judge_id, event.sample))
            self.cost_usd += event.cost_usd
        elif isinstance(event, JudgmentFailed):
            self.judge_failures[(run, event.judge_id, event.sample)] = event

    def _sealed(self, event: ArtifactsSealed) -> None:
        run = event.run_id or ""
        self.ended.add(run)
        if run not in self.run_task and event.task_id:
            self.run_task[run] = (event.campaign_id, event.task_id)
        if event.outcome == "finished":
            self.sealed.add(run)
            self.owed |= self._owed_on(run)

    def _reindex(self) -> None:
        """Recompute what is expected (a campaign or task seen: rare, so done in full)."""
        self.expected = self._expected_runs()
        self.owed = set().union(*(self._owed_on(run) for run in self.sealed))

    @property
    def failed(self) -> dict[str, bool]:
        """run id -> infrastructure failure?"""
        return {r: f.infrastructure for r, f in self.failures.items()}

    def expected_runs(self) -> set[str]:
        """Every run the log asks for: submitted tasks × the campaign's agents × epochs."""
        return self.expected

    def _expected_runs(self) -> set[str]:
        runs = set(self.requested)
        for campaign_id, task_id in self.tasks:
            spec = self.campaigns.get(campaign_id)
            if spec is None:
                continue
            runs |= {
                run_id_for(campaign_id, task_id, a.agent_id, epoch)
                for a in spec.agents
                for epoch in range(spec.epochs)
            }
        return runs

    def owed_verdicts(self) -> set[VerdictKey]:
        """Every verdict owed on the runs sealed so far (LLM judges' samples and the rules')."""
        return self.owed

    def _owed_on(self, run: str) -> set[VerdictKey]:
        campaign_id, task_id = self.run_task.get(run, ("", ""))
        spec = self.campaigns.get(campaign_id)
        task = self.tasks.get((campaign_id, task_id))
        task_samples = task.judge.sampling_times if task is not None else 1
        owed = {(run, RULES_JUDGE_ID, 0)}
        for judge in spec.judges if spec is not None else []:
            samples = max(judge.sampling_times, task_samples)
            owed |= {(run, judge.judge_id, s) for s in range(samples)}
        return owed

    def given_verdicts(self) -> set[VerdictKey]:
        """Verdicts given or given up on."""
        return self.judged | set(self.judge_failures)

    @property
    def expected_judgments(self) -> int:
        """Verdicts owed so far."""
        return len(self.owed_verdicts())

    @property
    def verdicts(self) -> int:
        """Owed verdicts given or given up on (extra ones are not counted)."""
        return len(self.owed_verdicts() & self.given_verdicts())

    @property
    def runs_done(self) -> int:
        """Expected runs that ended."""
        return len(self.expected_runs() & self.ended)

    def pending_runs(self) -> set[str]:
        """Expected runs that have not ended."""
        return self.expected_runs() - self.ended

    def pending_verdicts(self) -> set[VerdictKey]:
        """Owed verdicts not given yet."""
        return self.owed_verdicts() - self.given_verdicts()

    @property
    def complete(self) -> bool:
        """Every expected run ended and every owed verdict is in."""
        # The counts first: the set checks only when they could pass (cheap on long logs).
        return (
            bool(self.expected)
            and len(self.ended) >= len(self.expected)
            and len(self.judged) + len(self.judge_failures) >= len(self.owed)
            and self.expected <= self.ended
            and not self.pending_verdicts()
        )

    def state_counts(self) -> dict[str, int]:
        """Runs by their furthest state."""
        infra = {r for r, f in self.failures.items() if f.infrastructure}
        return {
            "expected": len(self.expected_runs()),
            "requested": len(self.requested),
            "running": len(self.ready - self.finished - set(self.failures)),
            "finished": len(self.finished),
            "sealed": len(self.sealed),
            "failed (infra)": len(infra),
            "failed (agent)": len(set(self.failures) - infra),
        }
