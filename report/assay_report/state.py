"""The aggregator's folded state: plain Python records, cheap to update, easy to snapshot.

The fold appends and updates these records one event at a time (the hot path); polars
frames are built from them only when asked for (see ``projections``). Every record is
JSON-serializable through :func:`state_to_json` / :func:`state_from_json`, which is
how the snapshot stores them.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from operator import attrgetter
from typing import Any

from assay.security.controls import ControlsKey
from assay_schemas import CampaignHistory, RunPhase

from .campaign_rosters import CampaignRosters
from .event_ids import EventIds

__all__ = [
    "ArtifactRecord",
    "ControlRecord",
    "FailureRecord",
    "JudgeRecord",
    "JudgeSampleRecord",
    "RefusedRecord",
    "RunRecord",
    "State",
    "StoppingRecord",
    "TaskRecord",
    "VerdictRecord",
    "state_from_json",
    "state_to_json",
]

SNAPSHOT_VERSION = 18
"""Bumped whenever a record or the layout changes: a snapshot of another version is
ignored and the state rebuilt from the log."""


@dataclass(slots=True)
class RunRecord:
    """One run as far as the log has told: who, what, how it went, what it cost."""

    campaign_id: str
    run_id: str
    task_id: str = ""
    agent_id: str = ""
    agent_family: str = ""
    agent_model: str = ""
    epoch: int = 0
    attempt: int = 0
    sandbox_ready: bool = False
    stop_reason: str = ""
    steps: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float = 0.0
    latency_s: float = 0.0
    finished: bool = False
    infrastructure_failure: bool = False
    failed: bool = False
    failure_stage: str = ""
    failure_error: str = ""
    sealed: bool = False
    """Its files were sealed (also after a failure: they are evidence; see `phase`)."""
    seal_outcome: str = ""
    n_files: int = 0
    work_sha256: str = ""
    """A digest of what its seal left (its files by path and content, and its answer):
    equal for runs that did the same work, so a reviewer is shown it once."""
    # Step summary, accumulated from AgentStepLogged (the finish event may never come).
    step_count: int = 0
    step_max: int = -1
    tool_calls: int = 0
    tool_errors: int = 0
    truncated_outputs: int = 0
    cached_steps: int = 0
    """Steps whose model answer came from the development cache (`cached_answer`)."""
    # Sums kept as integers (µs, nano-USD) so the fold is exact in any arrival order.
    step_latency_us: int = 0
    step_cost_nusd: int = 0
    step_input_tokens: int = 0
    step_output_tokens: int = 0
    first_sequence: int = 0
    last_sequence: int = 0
    control_plan: str = ""
    """The control plan this run plays ('' for an agent's run): from its
    ``ControlDeclared`` (never from the request), or the one of its task's plans its
    first step's sealed choice names."""
    chosen_plan: str = ""
    """The plan its first step's sealed choice names, opened ('' : none, or no key)."""
    phase: RunPhase = "unknown"
    """Where the one lifecycle has the run (`assay_schemas.walk` over `lifecycle`)."""
    lifecycle: list[list[Any]] = field(default_factory=list)
    """[sequence, step] of each counted event that moves the run, by sequence: walked
    again when one arrives out of log order, so arrival order changes nothing."""
    end_sequence: int = 0
    """Stream sequence of the event that ended the run (0 while it runs)."""
    failure_sequence: int = 0
    """Stream sequence of the failure that decided the run (0 when none did)."""


@dataclass(slots=True)
class ControlRecord:
    """A control run's declaration: what it is and the verdict it deserves."""

    campaign_id: str
    task_id: str
    run_id: str
    kind: str
    """The variant (e.g. 'reference', 'altered_numbers') or 'author:<folder>'."""
    expected: str
    """'pass' (known-good) or 'fail' (known-bad)."""
    plan_sha256: str
    sequence: int
    agent_id: str = ""
    """The control agent (listed in the published roster like an agent; the fold takes it
    out of the campaign's agents)."""


@dataclass(slots=True)
class TaskRecord:
    """A task as submitted to a campaign (or as carried by a run request)."""

    campaign_id: str
    task_id: str
    domain: str = ""
    phase: str = ""
    difficulty: str = ""
    n_attachments: int = 0
    n_reference_checks: int = 0
    attachments: list[list[str]] = field(default_factory=list)
    """[path, sha256] of each attachment (to tell artifacts from inputs)."""
    rubric_keys: list[str] = field(default_factory=list)
    """Dimension keys of the task's own rubric; empty when it is scored on the campaign's."""


@dataclass(slots=True)
class ArtifactRecord:
    """One sealed file of a run."""

    path: str
    sha256: str
    size: int
    media_type: str


@dataclass(slots=True)
class JudgeSampleRecord:
    """What a verdict and a failure both lead with: which judge sample on which run, and
    the stream sequence of the event that told it (the fold settles repeats by it)."""

    campaign_id: str
    run_id: str
    judge_id: str
    sample: int
    sequence: int


@dataclass(slots=True)
class VerdictRecord(JudgeSampleRecord):
    """One judge sample on one run: scores, tags, checks, evidence."""

    judge_family: str = ""
    judge_model: str = ""
    scores: dict[str, int] = field(default_factory=dict)
    tags: list[str] = field(default_factory=list)
    checks: list[list[Any]] = field(default_factory=list)
    """[name, passed, weight, detail] per rule check."""
    files_opened: list[str] = field(default_factory=list)
    files_cited: list[str] = field(default_factory=list)
    cost_usd: float = 0.0
    attempts: int = 1
    """Outputs the judge produced: 1 + the rejected ones it repaired."""
    rejected_sha256: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    cached: bool = False
    """Every model answer of the sample came from the development cache (`cached_answer`)."""


@dataclass(slots=True)
class FailureRecord(JudgeSampleRecord):
    """A judge that gave no valid verdict on a run."""

    error: str
    attempts: int
    infrastructure: bool
    raw_output_sha256: str = ""


@dataclass(slots=True)
class JudgeRecord:
    """A judge known to the log (from a campaign, a registration or its verdicts)."""

    judge_id: str
    family: str = ""
    model: str = ""
    campaigns: list[str] = field(default_factory=list)


@dataclass(slots=True)
class RefusedRecord:
    """A stored message that reached no number, and why (undecodable, forged, a repeat)."""

    sequence: int
    subject: str
    reason: str


@dataclass(slots=True)
class StoppingRecord:
    """A campaign with ``stopping:``: its runs as they were scored, the waves checked, and
    the decision (a function of the log up to `decision`'s ``decided_at_sequence``)."""

    campaign_id: str
    checked_waves: int = 0
    scored: list[list[Any]] = field(default_factory=list)
    """[sequence, run_id, agent_id, task_id, score, passed] of each run, in the order
    its outcome and every verdict it owed were in (the sequence that completed it)."""
    cells: dict[str, int] = field(default_factory=dict)
    """'agent_id/task_id' → runs scored (a task is complete at the campaign's epochs)."""
    decision: dict[str, Any] | None = None
    """The `CampaignStopped` fields this fold decides (None: not stopped)."""
    logged: dict[str, Any] | None = None
    """The same fields of the `CampaignStopped` on the log (the first), to compare."""
    logged_sequence: int = 0
    cancelled: int = 0
    """Runs cancelled (`RunCancelled`)."""


@dataclass(slots=True)
class State:
    """Everything folded so far, and where in the log the fold stands."""

    last_sequence: int = 0
    """Highest stream sequence applied."""
    applied: int = 0
    seen: EventIds = field(default_factory=EventIds)
    """Event id applied → its stream sequence (idempotence beyond JetStream's dedupe
    window: the same sequence again is a redelivery, another one a refused repeat)."""
    tasks: dict[str, TaskRecord] = field(default_factory=dict)
    """'campaign_id/task_id' → task."""
    runs: dict[str, RunRecord] = field(default_factory=dict)
    artifacts: dict[str, list[ArtifactRecord]] = field(default_factory=dict)
    """run_id → sealed files (the latest seal wins)."""
    seal_sequence: dict[str, int] = field(default_factory=dict)
    verdicts: dict[str, VerdictRecord] = field(default_factory=dict)
    """'run_id/judge_id/sample' → verdict (the first one stands; later ones are refused)."""
    human_verdicts: dict[str, VerdictRecord] = field(default_factory=dict)
    """'run_id/judge_id/sample' → a reviewer's verdict: kept apart from `verdicts`, so no
    jury figure can count it; it only measures the jury (`review.human_frames`)."""
    failures: dict[str, FailureRecord] = field(default_factory=dict)
    judges: dict[str, JudgeRecord] = field(default_factory=dict)
    trust_root: str = ""
    """Operator public key every counted event's signature was checked against ("" when
    signatures were not checked)."""
    refused: dict[int, RefusedRecord] = field(default_factory=dict)
    """sequence → message that was refused, with the reason."""
    refused_submissions: set[str] = field(default_factory=set)
    """Event ids of refused TaskSubmitted messages no counted one shares: their runs
    count for nothing (see `assay_aggregator.counting`)."""
    refused_runs: dict[str, str] = field(default_factory=dict)
    """run_id → why the run counts for nothing (its submission was refused)."""
    task_samples: dict[str, int] = field(default_factory=dict)
    """'campaign_id/task_id' → the task's own `sampling_times`."""
    judge_samples: dict[str, int] = field(default_factory=dict)
    """'campaign_id/judge_id' → the judge spec's `sampling_times` (campaign or registration)."""
    judge_joined: dict[str, tuple[int, str]] = field(default_factory=dict)
    """'campaign_id/judge_id' → (sequence, occurred_at) of the judge's first registration or
    verdict for the campaign: when it joined (the report marks judges the campaign did not
    name as joined late)."""
    controls: dict[str, ControlRecord] = field(default_factory=dict)
    """Control declarations by control run id (the first declaration of a run counts),
    as opened with `controls_key`."""
    declared_controls: dict[str, int] = field(default_factory=dict)
    """'campaign_id/task_id' → control declarations counted, opened or not: all that a
    reader without the controls secret knows of them."""
    histories: dict[str, CampaignHistory] = field(default_factory=dict)
    """campaign_id → the campaign's history, folded from counted events only: the one
    fold of a campaign (its spec: `campaigns`; expected runs, owed verdicts, failures by
    cause: the report's problems section)."""
    stopping: dict[str, StoppingRecord] = field(default_factory=dict)
    """campaign_id → its stopping record (campaigns with ``stopping:`` only)."""
    stream_created: str = ""
    """When the folded stream was created (as JetStream reports it): a snapshot of a
    stream deleted and made again under the same name does not fit the new one."""
    version: int = 0
    """Bumped on every applied event; invalidates cached frames."""
    frame_cache: object | None = field(default=None, compare=False, repr=False)
    """The verdict tables as of the snapshot this state was loaded from (a
    `frame_cache.FrameCache`, which reads states: typed loosely so that the state does not
    depend on its cache): beside the state, never part of it."""

    controls_key: ControlsKey | None = field(default=None, compare=False, repr=False)
    """Opens sealed control declarations (the deployment's controls secret; None: this
    reader cannot, and knows no run to be a control): beside the state, never in it."""
    rosters: CampaignRosters = field(default_factory=CampaignRosters, compare=False, repr=False)
    """Builds `campaigns` from the histories: beside the state, never in it."""

    @property
    def campaigns(self) -> dict[str, dict[str, Any]]:
        """campaign_id → its CampaignSpec as a JSON-mode dict, read from its history,
        without the control agents the opened declarations name."""
        return self.rosters.read(self.histories)

    def refuse(self, sequence: int, subject: str, reason: str) -> None:
        """Record a message that must not count, once per sequence."""
        if sequence not in self.refused:
            self.refused[sequence] = RefusedRecord(sequence, subject, reason)
            self.version += 1
        self.last_sequence = max(self.last_sequence, sequence)


def _columns(records: dict[str, Any], cls: type[Any]) -> dict[str, Any]:
    """Records as one field list and a row per key: no per-record field names, no deep
    copy (``asdict`` copied every nested list and took most of a 10x snapshot's time)."""
    names = [f.name for f in fields(cls)]
    get = attrgetter(*names)
    return {"fields": names, "rows": {k: list(get(r)) for k, r in records.items()}}


def _from_columns(data: dict[str, Any], cls: type[Any]) -> dict[str, Any]:
    names = [f.name for f in fields(cls)]
    if data["fields"] != names:
        raise ValueError(f"{cls.__name__} fields {data['fields']!r} are not {names!r}")
    return {k: cls(*row) for k, row in data["rows"].items()}


def state_to_json(state: State) -> dict[str, Any]:
    """The state as a JSON-ready dict (sets sorted so snapshots are reproducible)."""
    artifact_fields = [f.name for f in fields(ArtifactRecord)]
    get_artifact = attrgetter(*artifact_fields)
    return {
        "snapshot_version": SNAPSHOT_VERSION,
        "last_sequence": state.last_sequence,
        "applied": state.applied,
        "stream_created": state.stream_created,
        "seen": EventIds.to_json(state.seen),
        "tasks": _columns(state.tasks, TaskRecord),
        "runs": _columns(state.runs, RunRecord),
        "artifacts": {
            "fields": artifact_fields,
            "rows": {k: [list(get_artifact(a)) for a in v] for k, v in state.artifacts.items()},
        },
        "seal_sequence": state.seal_sequence,
        "verdicts": _columns(state.verdicts, VerdictRecord),
        "human_verdicts": _columns(state.human_verdicts, VerdictRecord),
        "failures": _columns(state.failures, FailureRecord),
        "judges": _columns(state.judges, JudgeRecord),
        "trust_root": state.trust_root,
        "refused": [[r.sequence, r.subject, r.reason] for r in state.refused.values()],
        "refused_submissions": sorted(state.refused_submissions),
        "refused_runs": state.refused_runs,
        "task_samples": state.task_samples,
        "judge_samples": state.judge_samples,
        "judge_joined": {k: list(v) for k, v in sorted(state.judge_joined.items())},
        "controls": _columns(dict(sorted(state.controls.items())), ControlRecord),
        "declared_controls": dict(sorted(state.declared_controls.items())),
        "histories": {k: h.model_dump(mode="json") for k, h in sorted(state.histories.items())},
        "stopping": _columns(dict(sorted(state.stopping.items())), StoppingRecord),
    }


def state_from_json(data: dict[str, Any]) -> State:
    """Rebuild a state from :func:`state_to_json` output; raises ValueError if foreign."""
    if data.get("snapshot_version") != SNAPSHOT_VERSION:
        raise ValueError(f"snapshot version {data.get('snapshot_version')!r} is not supported")
    artifacts = data["artifacts"]
    if artifacts["fields"] != [f.name for f in fields(ArtifactRecord)]:
        raise ValueError(f"artifact fields {artifacts['fields']!r} are not supported")
    return State(
        last_sequence=int(data["last_sequence"]),
        applied=int(data["applied"]),
        stream_created=str(data["stream_created"]),
        seen=EventIds.from_json(data["seen"]),
        tasks=_from_columns(data["tasks"], TaskRecord),
        runs=_from_columns(data["runs"], RunRecord),
        artifacts={k: [ArtifactRecord(*a) for a in v] for k, v in artifacts["rows"].items()},
        seal_sequence={k: int(v) for k, v in data["seal_sequence"].items()},
        verdicts=_from_columns(data["verdicts"], VerdictRecord),
        human_verdicts=_from_columns(data["human_verdicts"], VerdictRecord),
        failures=_from_columns(data["failures"], FailureRecord),
        judges=_from_columns(data["judges"], JudgeRecord),
        trust_root=str(data["trust_root"]),
        refused={
            int(r[0]): RefusedRecord(int(r[0]), str(r[1]), str(r[2])) for r in data["refused"]
        },
        refused_submissions=set(data["refused_submissions"]),
        refused_runs={str(k): str(v) for k, v in data["refused_runs"].items()},
        task_samples={str(k): int(v) for k, v in data["task_samples"].items()},
        judge_samples={str(k): int(v) for k, v in data["judge_samples"].items()},
        judge_joined={str(k): (int(v[0]), str(v[1])) for k, v in data["judge_joined"].items()},
        controls=_from_columns(data["controls"], ControlRecord),
        declared_controls={str(k): int(v) for k, v in data["declared_controls"].items()},
        histories={k: CampaignHistory.model_validate(h) for k, h in data["histories"].items()},
        stopping=_from_columns(data["stopping"], StoppingRecord),
    )
