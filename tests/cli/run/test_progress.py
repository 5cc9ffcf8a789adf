"""Completion from what the log says is expected, and failures grouped by cause."""

from __future__ import annotations

from typing import Any

from assay.security.controls import ControlsKey
from assay_cli.problems import Problems, problems_of
from assay_cli.progress import Progress, advance
from assay_report.pages import environment
from assay_schemas import (
    AgentSpec,
    ArtifactsSealed,
    CampaignSpec,
    CampaignStarted,
    ControlDetails,
    ControlsSpec,
    ErrorInfo,
    Event,
    JudgeSpec,
    JudgmentRecorded,
    Limits,
    Producer,
    RunFailed,
    RunRequested,
    SandboxReady,
    SandboxSpec,
    Task,
    TaskJudgeConfig,
    TaskSubmitted,
    parse_event,
    run_id_for,
)

P = Producer(service="test", version="0")
C = "c1"
KEY = ControlsKey(b"k" * 32)
SPEC = CampaignSpec(
    campaign_id=C,
    agents=[AgentSpec(agent_id="a", model="m")],
    judges=[JudgeSpec(judge_id="j", model="m", sampling_times=1)],
)


def _ev(cls: type[Event], n: int, **fields: Any) -> Event:
    return cls(event_id=f"e{n}", campaign_id=C, producer=P, **fields)


def _task(task_id: str, samples: int) -> Task:
    return Task(task_id=task_id, prompt="p", judge=TaskJudgeConfig(sampling_times=samples))


def _verdict(n: int, run: str, judge: str, sample: int) -> Event:
    return _ev(
        JudgmentRecorded,
        n,
        run_id=run,
        judge_id=judge,
        sample=sample,
        rubric_id="r",
        rubric_version=1,
    )


def render_problems(problems: Problems) -> str:
    """The report's HTML problems section alone."""
    macro = environment().get_template("problems.html.j2").module.problems  # type: ignore[attr-defined]
    return str(macro(problems))


def test_task_sampling_above_the_judges_is_waited_for() -> None:
    p = Progress(campaign_id=C)
    run = run_id_for(C, "t", "a", 0)
    p.apply(_ev(CampaignStarted, 1, campaign=SPEC))
    p.apply(_ev(TaskSubmitted, 2, task=_task("t", samples=3)))
    assert p.expected == {run} and not p.complete
    p.apply(_ev(ArtifactsSealed, 3, run_id=run, task_id="t", files=[], agent_id="a", epoch=0))
    p.apply(_verdict(4, run, "j", 0))
    p.apply(_verdict(5, run, "rules", 0))
    p.apply(_verdict(6, run, "other", 0))  # not owed: never counted
    assert (p.verdicts, p.expected_judgments) == (2, 4)
    assert not p.complete
    assert problems_of(p).pending_verdicts == {"j": 2}
    p.apply(_verdict(7, run, "j", 1))
    p.apply(_verdict(8, run, "j", 2))
    assert p.complete and p.verdicts == p.expected_judgments == 4
    assert problems_of(p).ok


def test_every_submitted_task_is_expected_before_its_runs_are_requested() -> None:
    p = Progress(campaign_id=C)
    p.apply(_ev(CampaignStarted, 1, campaign=SPEC))
    for n, t in enumerate(("t1", "t2")):
        p.apply(_ev(TaskSubmitted, 2 + n, task=_task(t, samples=1)))
    first = run_id_for(C, "t1", "a", 0)
    p.apply(_ev(RunFailed, 5, run_id=first, stage="agent", error="x", infrastructure=False))
    assert not p.complete and problems_of(p).pending_runs == 1


def _failed_in_its_sandbox(p: Progress, run: str) -> None:
    """A run whose sandbox was made and whose model could not be reached."""
    p.apply(_ev(CampaignStarted, 1, campaign=SPEC))
    p.apply(_ev(TaskSubmitted, 2, task=_task("t", samples=1)))
    p.apply(
        _ev(
            SandboxReady,
            3,
            run_id=run,
            sandbox_id="s",
            backend="bubblewrap",
            instance="i",
            image_digest="d",
            workspace=[],
        )
    )
    p.apply(
        _ev(
            RunFailed,
            4,
            run_id=run,
            stage="agent",
            error="ProviderError: connection refused",
            infrastructure=True,
        )
    )


def test_a_failed_run_is_waited_for_until_its_files_are_sealed() -> None:
    p = Progress(campaign_id=C)
    run = run_id_for(C, "t", "a", 0)
    _failed_in_its_sandbox(p, run)
    # The sandbox-manager still seals what the run left: the run has not reached its outcome.
    assert p.awaiting_seal() == {run}
    assert not p.complete and problems_of(p).pending_runs == 1
    assert "never sealed" in problems_of(p).lines()[0]
    sealed = _ev(
        ArtifactsSealed,
        5,
        run_id=run,
        task_id="t",
        files=[],
        agent_id="a",
        epoch=0,
        outcome="failed",
    )
    p.apply(sealed)
    assert p.complete and not p.awaiting_seal()
    problems = problems_of(p)
    assert problems.pending_runs == 0 and problems.pending_verdicts == {}
    assert [(c.stage, c.error_class) for c in problems.causes] == [("agent", "ProviderError")]


def test_a_seal_declared_lost_settles_a_failed_run() -> None:
    p = Progress(campaign_id=C)
    run = run_id_for(C, "t", "a", 0)
    _failed_in_its_sandbox(p, run)
    p.apply(
        _ev(
            RunFailed,
            6,
            run_id=run,
            stage="seal",
            error="SealLost: owner gone",
            infrastructure=True,
        )
    )
    assert p.complete and not p.awaiting_seal()


def test_infrastructure_failures_are_grouped_by_stage_and_class() -> None:
    p = Progress(campaign_id=C)
    p.apply(_ev(CampaignStarted, 1, campaign=SPEC))
    for n, t in enumerate(("t1", "t2", "t3")):
        p.apply(_ev(TaskSubmitted, 10 + n, task=_task(t, samples=1)))
        error = f"SandboxBackendUnavailable: no runtime rootfs ({t})"
        p.apply(
            _ev(
                RunFailed,
                20 + n,
                run_id=run_id_for(C, t, "a", 0),
                stage="sandbox",
                error=error,
                infrastructure=True,
            )
        )
    problems = problems_of(p)
    assert p.complete and not problems.ok
    [cause] = problems.causes
    assert (cause.stage, cause.error_class, cause.count) == (
        "sandbox",
        "SandboxBackendUnavailable",
        3,
    )
    assert cause.first_message == "no runtime rootfs (t1)"
    assert "no runtime rootfs (t1)" in render_problems(problems)


def test_failures_are_grouped_by_their_structured_error_not_by_parsing_its_text() -> None:
    p = Progress(campaign_id=C)
    p.apply(_ev(CampaignStarted, 1, campaign=SPEC))
    for n, t in enumerate(("t1", "t2")):
        p.apply(_ev(TaskSubmitted, 10 + n, task=_task(t, samples=1)))
    # The flat text names no class the old parse could find; the structured field does.
    gone = ErrorInfo(error_class="SandboxGone", message="Looks: like a class")
    p.apply(
        _ev(
            RunFailed,
            20,
            run_id=run_id_for(C, "t1", "a", 0),
            stage="agent",
            error="sandbox disappeared: Looks: like a class",
            error_info=gone,
            infrastructure=True,
        )
    )
    # An event logged before `error_info` existed still decodes, given the info its text meant.
    old = _ev(
        RunFailed,
        21,
        run_id=run_id_for(C, "t2", "a", 0),
        stage="agent",
        error="ProviderError: 503",
        infrastructure=True,
    )
    payload = old.model_dump(mode="json", exclude={"error_info"})
    decoded = parse_event(payload)
    assert isinstance(decoded, RunFailed)
    assert decoded.error_info == ErrorInfo(error_class="ProviderError", message="503")
    p.apply(decoded)
    causes = {(c.stage, c.error_class): c.first_message for c in problems_of(p).causes}
    assert causes == {
        ("agent", "SandboxGone"): "Looks: like a class",
        ("agent", "ProviderError"): "503",
    }


def test_error_info_keeps_the_flat_text_events_always_carried() -> None:
    info = ErrorInfo.of(KeyError("k"))
    assert (info.error_class, info.text) == ("KeyError", "KeyError: 'k'")
    assert ErrorInfo(message="no valid verdict: x").text == "no valid verdict: x"


def _roster_log() -> tuple[list[Event], list[ControlDetails], set[str]]:
    """A campaign whose published roster lists control agent 'k' like agent 'a': 'k' has
    one declared run on t1 (epoch 0 of 2) and none on t2. Returns the log (campaign,
    sealed declaration, tasks), the declaration opened, and every run the log asks for."""
    spec = CampaignSpec(
        campaign_id=C,
        epochs=2,
        agents=[AgentSpec(agent_id="a", model="m"), AgentSpec(agent_id="k", model="m")],
        judges=[JudgeSpec(judge_id="j", model="m")],
        controls=ControlsSpec(agents=1),
    )
    control = run_id_for(C, "t1", "k", 0)
    details = ControlDetails(
        campaign_id=C,
        task_id="t1",
        control_run_id=control,
        variant="prose_only",
        expected="fail",
        plan_sha256="a" * 64,
        agent_id="k",
        like="a",
    )
    events: list[Event] = [
        _ev(CampaignStarted, 1, campaign=spec),
        KEY.declare(details, causation_id=None, producer=P),
        _ev(TaskSubmitted, 3, task=_task("t1", 1)),
        _ev(TaskSubmitted, 4, task=_task("t2", 1)),
    ]
    runs = {run_id_for(C, t, "a", e) for t in ("t1", "t2") for e in (0, 1)} | {control}
    return events, [details], runs


def _ended(p: Progress, runs: set[str]) -> None:
    for n, run in enumerate(sorted(runs), 10):
        task = "t1" if run in {run_id_for(C, "t1", a, e) for a in "ak" for e in (0, 1)} else "t2"
        p.apply(
            _ev(
                RunRequested,
                100 + n,
                run_id=run,
                task_id=task,
                task=_task(task, 1),
                agent=AgentSpec(agent_id="x", model="m"),
                epoch=0,
                limits=Limits(),
                sandbox=SandboxSpec(),
            )
        )
        p.apply(
            _ev(
                RunFailed,
                n,
                run_id=run,
                task_id=task,
                stage="agent",
                error="x",
                infrastructure=False,
            )
        )


def test_control_agents_in_the_roster_run_only_their_declared_runs() -> None:
    """Issue #47: a reader that opens the declarations expects exactly the runs the runner
    requests: the agents' runs and the control agent's declared ones, not its roster runs."""
    events, _, runs = _roster_log()
    p = Progress(campaign_id=C)
    for e in events:
        advance(p, e, KEY)
    assert p.expected == runs and p.expected_runs == 5
    _ended(p, runs)
    assert p.complete and p.runs_done == 5


def test_a_reader_without_the_controls_key_counts_the_runs_a_task_asks_for() -> None:
    """Without the key: the roster less its control agents × epochs, plus each task's
    declarations; complete only once that many runs were requested and ended."""
    events, _, runs = _roster_log()
    p = Progress(campaign_id=C)
    for e in events:
        advance(p, e, None)
    assert p.expected_runs == 5 and p.state_counts()["expected"] == 5
    _ended(p, set(sorted(runs)[:4]))
    assert not p.complete
    _ended(p, set(sorted(runs)[4:]))
    assert p.complete and p.runs_done == 5
