"""Realistic synthetic event logs with planted effects, for tests and the aggregator bench.

One campaign of ``n_tasks × n_agents × n_epochs`` runs, each with its full event chain
(RunRequested, SandboxReady, AgentStepLogged × steps, AgentFinished or RunFailed,
ArtifactsSealed, one JudgmentRecorded per judge × sample plus the rule judge's). Scores
follow the model of ``statistics.synthetic_tables``: base + agent skill − task difficulty
+ run noise + judge leniency + self-preference (same family) ± half the communication
gap + rating noise, rounded and clipped to 0-10. Everything is drawn from one seeded
generator and timestamps advance one second per event, so the same spec gives the same
log, byte for byte. Blob contents are derived from their paths; pass a store to put
them there (audits then find them).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

from assay.store import BlobStore
from assay_schemas import (
    AgentFinished,
    AgentSpec,
    AgentStepLogged,
    ArtifactsSealed,
    CampaignSpec,
    CampaignStarted,
    Event,
    FileExistsCheck,
    FileRef,
    JudgeRegistered,
    JudgeSpec,
    Limits,
    NumberNearCheck,
    Producer,
    RunFailed,
    RunRequested,
    SandboxReady,
    SandboxSpec,
    Task,
    TaskSubmitted,
    ToolCallRecord,
    ToolResultRecord,
    Usage,
    default_rubric,
    run_id_for,
)

from .synthetic_judgments import _judgments
from .synthetic_publish import publish_events, writer_of

__all__ = ["LogSpec", "publish_events", "synthetic_events", "writer_of"]

PRODUCER = Producer(service="synthetic", version="0")
_T0 = datetime(2025, 1, 1, tzinfo=UTC)
_DOMAINS = ("biology", "chemistry", "physics")
_PHASES = ("analysis", "design")
_LEVELS = ("easy", "medium", "hard")


@dataclass(frozen=True, kw_only=True)
class LogSpec:
    """Shape and planted effects of a synthetic campaign."""

    campaign_id: str = "synthetic"
    n_tasks: int = 12
    n_agents: int = 3
    n_epochs: int = 1
    judges: Sequence[tuple[str, str]] = (("judge_a", "fam_a"), ("judge_b", "fam_b"))
    """(judge_id, family) of the LLM judges; the rule judge is added when ``rules``."""
    n_samples: int = 1
    steps_per_run: int = 4
    rules: bool = True
    scripted: bool = False
    agent_skill: Sequence[float] | None = None
    """Per agent; defaults to an even spread over −1..1."""
    judge_leniency: Mapping[str, float] = field(default_factory=dict)
    self_preference: Mapping[str, float] = field(default_factory=dict)
    communication_gap: Mapping[str, float] = field(default_factory=dict)
    """Per agent id: communication − scientific_accuracy, in score points."""
    overclaim_rate: Mapping[str, float] = field(default_factory=dict)
    infrastructure_failure_rate: float = 0.03
    empty_artifact_rate: float = 0.06
    output_chars: int = 240
    """Size of each step's model output (bench realism)."""
    seed: int = 0

    def agent_ids(self) -> list[str]:
        """Agent ids in order."""
        return [f"agent_{i}" for i in range(self.n_agents)]


def clean_log(
    *, n_tasks: int, n_agents: int, n_samples: int, seed: int, campaign_id: str = "camp"
) -> LogSpec:
    """A small log with nothing planted: no infrastructure failures, no empty artifacts,
    two steps a run."""
    return LogSpec(
        campaign_id=campaign_id,
        n_tasks=n_tasks,
        n_agents=n_agents,
        n_samples=n_samples,
        steps_per_run=2,
        infrastructure_failure_rate=0.0,
        empty_artifact_rate=0.0,
        seed=seed,
    )


def _ref(path: str, content: bytes, store: BlobStore | None) -> FileRef:
    sha = store.put_bytes(content).sha256 if store else hashlib.sha256(content).hexdigest()
    media = "text/csv" if path.endswith(".csv") else "text/plain"
    return FileRef(path=path, sha256=sha, size=len(content), media_type=media)


class _Clock:
    """Deterministic event times: one second apart."""

    def __init__(self) -> None:
        self.n = 0

    def __call__(self) -> datetime:
        self.n += 1
        return _T0 + timedelta(seconds=self.n)


def _campaign(spec: LogSpec, agents: list[AgentSpec]) -> CampaignSpec:
    judges = [
        JudgeSpec(judge_id=j, model=f"model-{j}", family=f, sampling_times=spec.n_samples)
        for j, f in spec.judges
    ]
    return CampaignSpec(
        campaign_id=spec.campaign_id,
        name=f"synthetic {spec.n_tasks}x{spec.n_agents}",
        agents=agents,
        judges=judges,
        epochs=spec.n_epochs,
        scripted=spec.scripted,
    )


def _tasks(spec: LogSpec, store: BlobStore | None) -> list[Task]:
    tasks = []
    for t in range(spec.n_tasks):
        tid = f"task_{t:04d}"
        data = f"sample,value\n{t},1.5\n{t + 1},2.5\n".encode()
        tasks.append(
            Task(
                task_id=tid,
                prompt=f"Please analyse data.csv for task {t} and report the estimate.",
                attachments=[_ref("data.csv", data, store)],
                domain=_DOMAINS[t % 3],
                phase=_PHASES[t % 2],
                difficulty=_LEVELS[t % 3],
                reference_checks=[
                    FileExistsCheck(name="results_table", path="results.csv"),
                    NumberNearCheck(
                        name="estimate",
                        path="report.md",
                        pattern=r"estimate = ([0-9.]+)",
                        expected=2.0,
                        tolerance=0.1,
                    ),
                ],
            )
        )
    return tasks


def synthetic_events(
    spec: LogSpec = LogSpec(), *, store: BlobStore | None = None
) -> Iterator[Event]:
    """Yield the campaign's events in a realistic order (each run's chain in sequence)."""
    rng = np.random.Generator(np.random.PCG64(spec.seed))
    clock = _Clock()
    cid = spec.campaign_id
    fams = [f for _, f in spec.judges] or ["fam_a"]
    agents = [
        AgentSpec(agent_id=a, model=f"model-{a}", family=fams[i % len(fams)])
        for i, a in enumerate(spec.agent_ids())
    ]
    campaign = _campaign(spec, agents)
    dims = default_rubric().dimension_keys
    yield CampaignStarted(
        event_id=CampaignStarted.id_for(cid),
        campaign_id=cid,
        campaign=campaign,
        producer=PRODUCER,
        occurred_at=clock(),
    )
    for judge in campaign.judges:
        yield JudgeRegistered(
            event_id=JudgeRegistered.id_for(cid, judge.judge_id),
            campaign_id=cid,
            judge=judge,
            producer=PRODUCER,
            occurred_at=clock(),
        )
    tasks = _tasks(spec, store)
    for task in tasks:
        yield TaskSubmitted(
            event_id=TaskSubmitted.id_for(cid, task.task_id),
            campaign_id=cid,
            task_id=task.task_id,
            task=task,
            producer=PRODUCER,
            occurred_at=clock(),
        )
    skill = np.asarray(
        spec.agent_skill if spec.agent_skill is not None else np.linspace(-1, 1, spec.n_agents)
    )
    difficulty = rng.normal(0.0, 1.0, spec.n_tasks)
    for t, task in enumerate(tasks):
        for a, agent in enumerate(agents):
            for epoch in range(spec.n_epochs):
                latent = 6.8 + skill[a] - difficulty[t] + rng.normal(0.0, 0.5)
                yield from _run(spec, rng, clock, task, agent, epoch, latent, dims, store)


def _run(
    spec: LogSpec,
    rng: np.random.Generator,
    clock: _Clock,
    task: Task,
    agent: AgentSpec,
    epoch: int,
    latent: float,
    dims: list[str],
    store: BlobStore | None,
) -> Iterator[Event]:
    cid = spec.campaign_id
    rid = run_id_for(cid, task.task_id, agent.agent_id, epoch)
    env: dict[str, Any] = {
        "campaign_id": cid,
        "run_id": rid,
        "task_id": task.task_id,
        "producer": PRODUCER,
    }
    yield RunRequested(
        event_id=RunRequested.id_for(rid),
        task=task,
        agent=agent,
        epoch=epoch,
        limits=Limits(),
        sandbox=SandboxSpec(),
        scripted=spec.scripted,
        occurred_at=clock(),
        **env,
    )
    if rng.random() < spec.infrastructure_failure_rate:
        yield RunFailed(
            event_id=RunFailed.id_for(rid, "sandbox"),
            stage="sandbox",
            error="sandbox host unreachable",
            infrastructure=True,
            occurred_at=clock(),
            **env,
        )
        return
    yield SandboxReady(
        event_id=SandboxReady.id_for(rid),
        sandbox_id=f"sb-{rid}",
        backend="bubblewrap",
        instance="local",
        image_digest="sha256:" + "0" * 64,
        workspace=task.attachments,
        occurred_at=clock(),
        **env,
    )
    text = ("Reading data.csv and fitting the model. " * 40)[: spec.output_chars]
    total = Usage()
    cost = 0.0
    for step in range(spec.steps_per_run):
        usage = Usage(input_tokens=1500 + 200 * step, output_tokens=120, cached_tokens=1000)
        total = total + usage
        step_cost = usage.input_tokens * 2e-6 + usage.output_tokens * 8e-6
        cost += step_cost
        blob = (
            _ref(f"tool-output-{step}.txt", f"{rid} step {step} full output\n".encode(), store)
            if step % 5 == 4
            else None
        )
        call = ToolCallRecord(
            call_id=f"c{step}", name="bash", arguments='{"cmd": "python3 analysis.py"}'
        )
        result = ToolResultRecord(
            call_id=f"c{step}",
            name="bash",
            output="estimate = 2.01\n",
            exit_code=0,
            truncated=blob is not None,
            output_blob=blob,
            duration_ms=350.0,
        )
        yield AgentStepLogged(
            event_id=AgentStepLogged.id_for(rid, step),
            step=step,
            model_output=text,
            tool_calls=[call],
            tool_results=[result],
            usage=usage,
            latency_ms=float(rng.lognormal(7.0, 0.3)),
            cost_usd=step_cost,
            occurred_at=clock(),
            **env,
        )
    final = "Done: estimate = 2.01, see report.md and results.csv."
    yield AgentFinished(
        event_id=AgentFinished.id_for(rid),
        stop_reason="submitted",
        final_message=final,
        steps=spec.steps_per_run,
        usage=total,
        cost_usd=cost,
        duration_s=float(rng.lognormal(4.0, 0.4)),
        occurred_at=clock(),
        **env,
    )
    empty = bool(rng.random() < spec.empty_artifact_rate)
    files = list(task.attachments)
    if not empty:
        for path in ("analysis.py", "results.csv", "report.md"):
            files.append(_ref(path, f"{rid} {path}\nestimate = 2.01\n".encode(), store))
    sealed = ArtifactsSealed(
        event_id=ArtifactsSealed.id_for(rid),
        files=files,
        final_message=final,
        agent_id=agent.agent_id,
        epoch=epoch,
        sandbox_id=f"sb-{rid}",
        occurred_at=clock(),
        **env,
    )
    yield sealed
    yield from _judgments(spec, rng, clock, agent, latent, empty, dims, files, env, sealed.event_id)
