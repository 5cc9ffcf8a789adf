"""One campaign's history: its events folded, in log order, into what is expected of it.

`RunHistory` answers for one run; `CampaignHistory` answers for the whole campaign: which
runs the log asks for, where they stand, which verdicts the jury owes, and what failed
and why. `assay watch` and `assay run` show it live, `assay run` decides its exit code
from it, and the aggregator folds the same history (counted events only) for the
report's problems section, so all of them agree.

What is *expected* comes from the log itself: runs per task × agent × epoch (TaskSubmitted,
CampaignStarted), and for every run sealed as finished one verdict per judge × sample, the
samples being the larger of the judge's and the task's `sampling_times` (as the judge does
it), plus the rule judge's one. Counting verdicts against exactly that set is what keeps a
task that asks for more samples from ending the wait early. A control agent listed in the
roster runs only its declared runs: a reader that opens the declarations says so
(`declare_control`); one that cannot counts a task's runs as the roster less
`controls.agents`, × epochs, plus the task's declarations (`expected_runs`).

The lifecycle's rules (`_lifecycle`) hold here too: a second end of a run changes
nothing, the first failure of a run decides it, and a run that failed and was sealed
afterwards stays failed (it owes no verdict), whatever order the events arrive in.

Pure and JSON-serializable (the aggregator snapshots it). Feed each event once, in log
order: the caller dedupes (the aggregator by event id, a log reader by sequence).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_serializer

from . import _events as ev
from ._controls import ControlDeclared
from ._domain import RULES_JUDGE_ID, CampaignSpec, Task
from ._envelope import Event
from ._lifecycle import END_STEPS, lifecycle_step
from ._rules import expected_runs, samples_owed

__all__ = ["CampaignHistory", "VerdictKey"]

VerdictKey = tuple[str, str, int]
"""(run id, judge id, sample): one verdict owed or given."""

_SETS = (
    "requested",
    "cancelled",
    "ready",
    "finished",
    "sealed",
    "ended",
    "settled",
    "expected",
    "owed",
    "judged",
    "control_agents",
)


class CampaignHistory(BaseModel):
    """Counts and failures of one campaign (or of every campaign in the log when
    `campaign_id` is None), rebuilt from the log; `complete` says when nothing is pending."""

    model_config = ConfigDict(extra="forbid")

    campaign_id: str | None = None
    campaigns: dict[str, CampaignSpec] = {}
    tasks: dict[str, Task] = {}
    """'campaign id/task id' -> task."""
    run_task: dict[str, str] = {}
    """run id -> 'campaign id/task id'."""
    requested: set[str] = set()
    ready: set[str] = set()
    cancelled: set[str] = set()
    """Planned runs never requested, cancelled when the campaign stopped early: ended,
    never failed, owing no verdict."""
    stopped: bool = False
    """The campaign logged `CampaignStopped`: what was not requested will not be."""
    finished: set[str] = set()
    failures: dict[str, ev.RunFailed] = {}
    """run id -> the RunFailed that decided its outcome (its first)."""
    ends: dict[str, str] = {}
    """run id -> the event id of its end that counts (the first)."""
    sealed: set[str] = set()
    """Runs sealed as finished: the ones the jury owes verdicts on."""
    ended: set[str] = set()
    """Runs whose agent will not move on: sealed (either outcome) or failed."""
    settled: set[str] = set()
    """Runs whose files are settled: sealed (either outcome), or their seal declared lost."""
    expected: set[str] = set()
    owed: set[VerdictKey] = set()
    control_agents: set[str] = set()
    """'campaign id/agent id' of the roster's control agents, as the declarations opened
    (`declare_control`) say: they run only their declared runs."""
    control_runs: dict[str, set[str]] = {}
    """'campaign id/task id' -> the task's control runs, from the opened declarations."""
    declared: dict[str, int] = {}
    """'campaign id/task id' -> control declarations in the log, opened or not: what a
    reader without the controls secret counts the task's control runs by."""
    judged: set[VerdictKey] = set()
    judgment_failures: dict[str, ev.JudgmentFailed] = {}
    """'run id/judge id/sample' -> the judge's last failure on that sample."""
    steps: int = Field(default=0, ge=0)
    cost_usd: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    scripted: bool = False

    @field_serializer(*_SETS)
    def _sorted(self, value: set[Any]) -> list[Any]:
        # Sorted, so that a snapshot of the same history is the same bytes.
        return sorted(value)

    @field_serializer("control_runs")
    def _sorted_runs(self, value: dict[str, set[str]]) -> dict[str, list[str]]:
        return {k: sorted(v) for k, v in sorted(value.items())}

    def apply(self, event: Event) -> None:
        """Fold one event in (events of other campaigns are ignored when one is chosen)."""
        if self.campaign_id is not None and event.campaign_id != self.campaign_id:
            return
        if type(event) is ev.AgentStepLogged:
            # Most of any log, and moves no run: counted before the lifecycle is asked, in
            # the fields' own storage (pydantic's __setattr__, unvalidated here anyway, was
            # a tenth of what a rebuild spends on a step past decoding it).
            fields = self.__dict__
            fields["steps"] += 1
            fields["cost_usd"] += event.cost_usd
            return
        run = event.run_id or ""
        is_end = lifecycle_step(event) in END_STEPS
        if is_end and self.ends.setdefault(run, event.event_id) != event.event_id:
            return  # a second end of the run: refused, it changes nothing
        if isinstance(event, ev.CampaignStarted):
            self.campaigns[event.campaign_id] = event.campaign
            self.scripted = self.scripted or event.campaign.scripted
            self._reindex()
        elif isinstance(event, ev.TaskSubmitted):
            self._task(event)
        elif isinstance(event, ev.RunRequested):
            self.requested.add(run)
            self.expected.add(run)
            self.run_task[run] = f"{event.campaign_id}/{event.task.task_id}"
        elif isinstance(event, ev.RunCancelled):
            self.cancelled.add(run)
            self.ended.add(run)
            self.settled.add(run)
            self.expected.add(run)
            self.run_task.setdefault(run, f"{event.campaign_id}/{event.task_id}")
        elif isinstance(event, ev.CampaignStopped):
            self.stopped = True
        elif isinstance(event, ev.SandboxReady):
            self.ready.add(run)
        elif isinstance(event, ev.AgentFinished):
            self.finished.add(run)
        elif isinstance(event, ev.RunFailed):
            self._failed(event)
            if event.stage == "seal":
                self.settled.add(run)  # no seal will come (sandbox-manager's failover)
        elif isinstance(event, ev.ArtifactsSealed):
            self.settled.add(run)
            self._sealed(event, failed=run in self.failures)
        elif isinstance(event, ev.JudgmentRecorded):
            self.judged.add((run, event.judge_id, event.sample))
            self.cost_usd += event.cost_usd
        elif isinstance(event, ev.JudgmentFailed):
            self.judgment_failures[f"{run}/{event.judge_id}/{event.sample}"] = event
        elif isinstance(event, ControlDeclared):
            key = f"{event.campaign_id}/{event.task_id}"
            self.declared[key] = self.declared.get(key, 0) + 1

    def _failed(self, event: ev.RunFailed) -> None:
        run = event.run_id or ""
        self.failures.setdefault(run, event)
        self.ended.add(run)
        if run in self.sealed:  # its seal arrived first: a failed run owes no verdict
            self.sealed.discard(run)
            self.owed -= self._owed_on(run)

    def _sealed(self, event: ev.ArtifactsSealed, *, failed: bool) -> None:
        run = event.run_id or ""
        self.ended.add(run)
        if run not in self.run_task and event.task_id:
            self.run_task[run] = f"{event.campaign_id}/{event.task_id}"
        if event.outcome == "finished" and not failed:
            self.sealed.add(run)
            self.owed |= self._owed_on(run)

    def _task(self, event: ev.TaskSubmitted) -> None:
        """A task adds its runs; its sampling can only raise what its sealed runs owe.
        (Incremental: a campaign of many tasks must not recount them all per task.)"""
        key = f"{event.campaign_id}/{event.task.task_id}"
        self.tasks[key] = event.task
        self.expected |= self._runs_of(key)
        for run in self.sealed:
            if self.run_task.get(run) == key:
                self.owed |= self._owed_on(run)

    def _reindex(self) -> None:
        """Recompute what is expected (a campaign or task seen: rare, so done in full)."""
        self.expected = self._expected_runs()
        self.owed = set().union(*(self._owed_on(run) for run in self.sealed))

    def _expected_runs(self) -> set[str]:
        return set(self.requested).union(*(self._runs_of(key) for key in self.tasks))

    def _runs_of(self, key: str) -> set[str]:
        """The runs a submitted task asks for: the campaign's agents × epochs, its control
        agents' declared runs instead of theirs (where the declarations opened)."""
        campaign_id, task_id = key.split("/", 1)
        spec = self.campaigns.get(campaign_id)
        if spec is None:
            return set()
        controls = {
            a.split("/", 1)[1] for a in self.control_agents if a.startswith(f"{campaign_id}/")
        }
        roster = {run.run_id for run in expected_runs(spec, task_id, skip=controls)}
        return roster | self.control_runs.get(key, set())

    def declare_control(self, campaign_id: str, task_id: str, agent_id: str, run_id: str) -> None:
        """An opened control declaration: the run is expected, its agent a control agent."""
        key = f"{campaign_id}/{task_id}"
        self.control_runs.setdefault(key, set()).add(run_id)
        agent = f"{campaign_id}/{agent_id}"
        if agent not in self.control_agents:
            self.control_agents.add(agent)
            if self.tasks:  # declarations come before the tasks: this is rare
                self._reindex()
        if key in self.tasks:
            self.expected.add(run_id)

    def _blind(self, campaign_id: str) -> bool:
        """Whether this reader cannot tell the campaign's control agents (it could not open
        their declarations): then it counts expected runs instead of naming them."""
        spec = self.campaigns.get(campaign_id)
        if spec is None or spec.controls is None or not spec.controls.agents:
            return False
        known = sum(1 for a in self.control_agents if a.split("/", 1)[0] == campaign_id)
        return known < spec.controls.agents

    def _any_blind(self) -> bool:
        return any(self._blind(c) for c in self.campaigns)

    @property
    def expected_runs(self) -> int:
        """How many runs the log asks for. Where this reader cannot open the control
        declarations: per task, the roster less its control agents × epochs, plus the
        task's declarations (or the runs requested, when more)."""
        blind = {c for c in self.campaigns if self._blind(c)}
        if not blind:
            return len(self.expected)
        on_task: dict[str, set[str]] = {}
        for run in self.requested:
            on_task.setdefault(self.run_task.get(run, ""), set()).add(run)
        out = sum(len(runs) for key, runs in on_task.items() if key not in self.tasks)
        for key in self.tasks:
            spec = self.campaigns.get(key.split("/", 1)[0])
            requested = on_task.get(key, set())
            if spec is None or spec.campaign_id not in blind:
                out += len(self._runs_of(key) | requested)
                continue
            controls = spec.controls.agents if spec.controls else 0
            asked = (len(spec.agents) - controls) * spec.epochs + self.declared.get(key, 0)
            out += max(asked, len(requested))
        return out

    def owed_on(self, run: str) -> set[VerdictKey]:
        """The verdicts a run sealed as finished owes: the rule judge's, each judge's samples."""
        return self._owed_on(run)

    def _owed_on(self, run: str) -> set[VerdictKey]:
        key = self.run_task.get(run, "/")
        spec = self.campaigns.get(key.split("/", 1)[0])
        task = self.tasks.get(key)
        task_samples = task.judge.sampling_times if task is not None else 1
        owed = {(run, RULES_JUDGE_ID, 0)}
        for judge in spec.judges if spec is not None else []:
            samples = samples_owed(judge.sampling_times, task_samples)
            owed |= {(run, judge.judge_id, s) for s in range(samples)}
        return owed

    @property
    def failed(self) -> dict[str, bool]:
        """run id -> infrastructure failure?"""
        return {r: f.infrastructure for r, f in self.failures.items()}

    def given_verdicts(self) -> set[VerdictKey]:
        """Verdicts given or given up on."""
        failed = {(f.run_id or "", f.judge_id, f.sample) for f in self.judgment_failures.values()}
        return self.judged | failed

    @property
    def expected_judgments(self) -> int:
        """Verdicts owed so far."""
        return len(self.owed)

    @property
    def verdicts(self) -> int:
        """Owed verdicts given or given up on (extra ones are not counted)."""
        return len(self.owed & self.given_verdicts())

    @property
    def runs_done(self) -> int:
        """Expected runs that ended."""
        return len((self.expected | self.requested) & self.ended)

    def awaiting_seal(self) -> set[str]:
        """Runs that failed after their sandbox was made and are not sealed yet: the
        sandbox-manager seals what a run left however it ended (or its seal is declared
        lost), and until then the run has not reached its outcome."""
        return self.ready.intersection(self.failures) - self.settled

    def pending_runs(self) -> set[str]:
        """Expected runs that have not ended, or ended and still await their seal (a reader
        that cannot open control declarations names only the runs requested)."""
        if self._any_blind():
            return (self.requested - self.ended) | (self.requested & self.awaiting_seal())
        return (self.expected - self.ended) | (self.expected & self.awaiting_seal())

    def run_settled(self, run: str) -> bool:
        """Whether the run reached its outcome and every verdict it owes is in (or given
        up on): what the runner's waves and the aggregator's stopping check count."""
        if run not in self.ended:
            return False
        if run in self.ready and run in self.failures and run not in self.settled:
            return False  # failed in its sandbox: its seal is still to come
        if run not in self.sealed:
            return True
        failed = {
            (f.run_id or "", f.judge_id, f.sample)
            for key, f in self.judgment_failures.items()
            if key.startswith(f"{run}/")
        }
        return not (self._owed_on(run) - self.judged - failed)

    def pending_verdicts(self) -> set[VerdictKey]:
        """Owed verdicts not given yet."""
        return self.owed - self.given_verdicts()

    @property
    def complete(self) -> bool:
        """Every expected run reached its outcome (ended, its files sealed whenever it had a
        sandbox) and every owed verdict is in."""
        # The counts first: the set checks only when they could pass (cheap on long logs).
        expected = self.expected_runs
        return (
            bool(expected)
            and len(self.ended) >= expected
            and len(self.judged) + len(self.judgment_failures) >= len(self.owed)
            and not self.pending_runs()
            # Blind to the controls: every run asked for was requested (pending names those).
            and (not self._any_blind() or len(self.requested & self.ended) >= expected)
            and not self.pending_verdicts()
            and not self.awaiting_seal()
        )

    def state_counts(self) -> dict[str, int]:
        """Runs by their furthest state."""
        infra = {r for r, f in self.failures.items() if f.infrastructure}
        return {
            "expected": self.expected_runs,
            "requested": len(self.requested),
            "running": len(self.ready - self.finished - set(self.failures)),
            "finished": len(self.finished),
            "cancelled": len(self.cancelled),
            "sealed": len(self.sealed),
            "failed (infra)": len(infra),
            "failed (agent)": len(set(self.failures) - infra),
        }
