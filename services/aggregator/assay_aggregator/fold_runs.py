"""What the campaign, task, control and run events change in the fold's state, and the
records (run, task, judge) they open. Called by `fold.apply` only."""

from __future__ import annotations

import hashlib

from assay.security.controls import SealBroken
from assay_report.state import (
    ArtifactRecord,
    ControlRecord,
    JudgeRecord,
    RunRecord,
    State,
    StoppingRecord,
    TaskRecord,
)
from assay_schemas import (
    AgentFinished,
    AgentStepLogged,
    ArtifactsSealed,
    CampaignHistory,
    CampaignStarted,
    CampaignStopped,
    ControlDeclared,
    Event,
    JudgeRegistered,
    JudgmentFailed,
    JudgmentRecorded,
    RunCancelled,
    RunFailed,
    RunRequested,
    SandboxReady,
    Task,
    TaskSubmitted,
)

from . import stopping


def _run(state: State, event: Event, sequence: int) -> RunRecord:
    rid = event.run_id or ""
    run = state.runs.get(rid)
    if run is None:
        run = RunRecord(campaign_id=event.campaign_id, run_id=rid, first_sequence=sequence)
        state.runs[rid] = run
    if event.task_id and not run.task_id:
        run.task_id = event.task_id
    # Compared, not min()/max(): this runs for most events of a log.
    if sequence < run.first_sequence:
        run.first_sequence = sequence
    if sequence > run.last_sequence:
        run.last_sequence = sequence
    return run


def _task(state: State, campaign_id: str, task: Task) -> None:
    key = f"{campaign_id}/{task.task_id}"
    if key in state.tasks:
        return
    state.task_samples[key] = task.judge.sampling_times
    state.tasks[key] = TaskRecord(
        campaign_id=campaign_id,
        task_id=task.task_id,
        domain=task.domain,
        phase=task.phase,
        difficulty=task.difficulty,
        n_attachments=len(task.attachments),
        n_reference_checks=len(task.reference_checks),
        attachments=[[a.path, a.sha256] for a in task.attachments],
        rubric_keys=task.judge.rubric.dimension_keys if task.judge.rubric else [],
    )


def _judge(state: State, judge_id: str, campaign_id: str) -> JudgeRecord:
    judge = state.judges.get(judge_id)
    if judge is None:
        judge = state.judges[judge_id] = JudgeRecord(judge_id=judge_id)
    if campaign_id not in judge.campaigns:
        judge.campaigns.append(campaign_id)
        judge.campaigns.sort()
    return judge


def _joined(state: State, e: JudgeRegistered | JudgmentRecorded | JudgmentFailed, seq: int) -> None:
    """Keep the judge's first fact in the campaign (by sequence, whatever the fold order)."""
    judge_id = e.judge.judge_id if isinstance(e, JudgeRegistered) else e.judge_id
    key = f"{e.campaign_id}/{judge_id}"
    first = state.judge_joined.get(key)
    if first is None or seq < first[0]:
        state.judge_joined[key] = (seq, e.occurred_at.isoformat())


def _campaign_started(state: State, e: CampaignStarted, seq: int) -> None:
    for spec in e.campaign.judges:
        judge = _judge(state, spec.judge_id, e.campaign_id)
        judge.family, judge.model = spec.family, spec.model
        state.judge_samples[f"{e.campaign_id}/{spec.judge_id}"] = spec.sampling_times


def _task_submitted(state: State, e: TaskSubmitted, seq: int) -> None:
    _task(state, e.campaign_id, e.task)


def _run_requested(state: State, e: RunRequested, seq: int) -> None:
    _task(state, e.campaign_id, e.task)
    run = _run(state, e, seq)
    run.task_id = e.task.task_id
    run.agent_id = e.agent.agent_id
    run.agent_family = e.agent.family
    run.agent_model = e.agent.model
    run.epoch = e.epoch
    run.attempt = e.attempt
    run.control_plan = _declared_plan(state, run)


def _campaign_agent(state: State, run: RunRecord) -> bool:
    """Whether the run's agent is one of its campaign's own (never a control)."""
    campaign = state.campaigns.get(run.campaign_id) or {}
    return any(a.get("agent_id") == run.agent_id for a in campaign.get("agents", ()))


def _attempt_of(state: State, c: ControlRecord, run: RunRecord) -> bool:
    """Whether `run` is an attempt of the declared control `c`: its run, or a later
    attempt (`assay retry`) of the same task, agent and epoch."""
    if run.campaign_id != c.campaign_id or run.task_id != c.task_id or not run.agent_id:
        return False
    if run.run_id == c.run_id:
        return True
    first = state.runs.get(c.run_id)
    return first is not None and (first.agent_id, first.epoch) == (run.agent_id, run.epoch)


def _declaration_of(state: State, run: RunRecord) -> ControlRecord | None:
    """The declared control `run` is an attempt of (None: none)."""
    c = state.controls.get(run.run_id)
    if c is not None and _attempt_of(state, c, run):
        return c
    if run.attempt:  # `assay retry`: a later attempt under a new run id
        return next((c for c in state.controls.values() if _attempt_of(state, c, run)), None)
    return None


def _declared_plan(state: State, run: RunRecord) -> str:
    """The plan the control `run` is an attempt of plays ('' for an agent's run). A
    request carries nothing of it: the declaration alone makes a run a control, and
    never one of the campaign's own agents' runs. A control that chose (its first
    step's sealed choice) plays the plan it chose, if that is one of its task's."""
    if _campaign_agent(state, run):
        return ""
    c = _declaration_of(state, run)
    if c is None:
        return ""
    if run.chosen_plan and any(
        (d.campaign_id, d.task_id, d.plan_sha256) == (c.campaign_id, c.task_id, run.chosen_plan)
        for d in state.controls.values()
    ):
        return run.chosen_plan
    return c.plan_sha256


def _control_declared(state: State, sealed: ControlDeclared, seq: int) -> None:
    # The first declaration of a run counts; whether it names a control agent's run
    # (the same plan) is checked where controls are read, when both events are in.
    key = f"{sealed.campaign_id}/{sealed.task_id}"
    state.declared_controls[key] = state.declared_controls.get(key, 0) + 1
    if state.controls_key is None:
        return  # a reader without the secret knows a control was declared, no more
    e = state.controls_key.open(sealed)  # the counting rule opened it already: it opens
    if e.control_run_id in state.controls:
        return
    c = state.controls[e.control_run_id] = ControlRecord(
        e.campaign_id,
        e.task_id,
        e.control_run_id,
        e.kind,
        e.expected,
        e.plan_sha256,
        seq,
        e.agent_id,
    )
    history = state.histories.get(e.campaign_id)
    if history is None:
        history = state.histories[e.campaign_id] = CampaignHistory(campaign_id=e.campaign_id)
    history.declare_control(e.campaign_id, e.task_id, e.agent_id, e.control_run_id)
    if e.control_run_id in state.runs:  # requested first (any order folds the same)
        for run in state.runs.values():
            if not run.control_plan and run.agent_id and _attempt_of(state, c, run):
                run.control_plan = _declared_plan(state, run)


def _sandbox_ready(state: State, e: SandboxReady, seq: int) -> None:
    _run(state, e, seq).sandbox_ready = True


def _step(state: State, e: AgentStepLogged, seq: int) -> None:
    run = _run(state, e, seq)
    run.step_count += 1
    run.step_max = max(run.step_max, e.step)
    run.tool_calls += len(e.tool_calls)
    for r in e.tool_results:  # one pass: this runs for most events of a log
        run.tool_errors += r.is_error
        run.truncated_outputs += r.truncated
    run.cached_steps += e.cached_answer
    run.step_latency_us += round(e.latency_ms * 1000)
    run.step_cost_nusd += round(e.cost_usd * 1e9)
    run.step_input_tokens += e.usage.input_tokens
    run.step_output_tokens += e.usage.output_tokens
    if e.step == 0 and e.sealed_choice is not None and state.controls_key is not None:
        _chose(state, run, e.sealed_choice)


def _chose(state: State, run: RunRecord, sealed: str) -> None:
    """A model run's first step: the plan it chose, if it is a control (an agent's
    names none). A choice that does not open here leaves the declared plan: the step
    itself is the run's evidence and counts, whoever reads it."""
    assert state.controls_key is not None
    try:
        plan = state.controls_key.open_choice(run.campaign_id, run.run_id, sealed)
    except SealBroken:
        return
    run.chosen_plan = plan or ""
    if run.agent_id:  # requested already (else the request reads it)
        run.control_plan = _declared_plan(state, run)


def _finished(state: State, e: AgentFinished, seq: int) -> None:
    run = _run(state, e, seq)
    run.finished = True
    run.stop_reason = e.stop_reason
    run.steps = e.steps
    run.input_tokens = e.usage.input_tokens
    run.output_tokens = e.usage.output_tokens
    run.cached_tokens = e.usage.cached_tokens
    run.cache_write_tokens = e.usage.cache_write_tokens
    run.cost_usd = e.cost_usd
    run.latency_s = e.duration_s


def _failed(state: State, e: RunFailed, seq: int) -> None:
    run = _run(state, e, seq)
    if run.failed and run.failure_sequence < seq:
        return  # a seal declared lost after the run failed: the first failure decided it
    run.failed = True
    run.failure_sequence = seq
    run.infrastructure_failure = e.infrastructure
    run.failure_stage = e.stage
    run.failure_error = e.error


def _cancelled(state: State, e: RunCancelled, seq: int) -> None:
    run = _run(state, e, seq)
    run.agent_id, run.epoch = e.agent_id, e.epoch
    record = state.stopping.setdefault(e.campaign_id, StoppingRecord(e.campaign_id))
    record.cancelled += 1


def _stopped(state: State, e: CampaignStopped, seq: int) -> None:
    stopping.logged(state, seq, e)


def _work(e: ArtifactsSealed) -> str:
    """The digest of a seal's work (`RunRecord.work_sha256`): files and answer."""
    h = hashlib.blake2b(digest_size=16)
    for f in sorted(e.files, key=lambda f: f.path):
        h.update(f"{f.path}\x1f{f.sha256}\x1e".encode())
    h.update(b"\x1d" + e.final_message.encode())
    return h.hexdigest()


def _sealed(state: State, e: ArtifactsSealed, seq: int) -> None:
    run = _run(state, e, seq)
    if not run.agent_id:
        run.agent_id, run.epoch = e.agent_id, e.epoch
    if state.seal_sequence.get(run.run_id, 0) > seq:
        return
    state.seal_sequence[run.run_id] = seq
    run.sealed = True
    run.seal_outcome = e.outcome
    run.n_files = e.n_files
    run.work_sha256 = _work(e)
    state.artifacts[run.run_id] = [
        ArtifactRecord(path=f.path, sha256=f.sha256, size=f.size, media_type=f.media_type)
        for f in e.files
    ]
