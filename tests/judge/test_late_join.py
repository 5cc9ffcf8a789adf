"""A judge that joins a running stack late back-fills every sealed run of the campaigns it
is enabled for, says how far it got, never consumes a run without a verdict, resumes where
it stopped, and the report names it as joined late beside the declared jury's headline."""

from __future__ import annotations

import asyncio
import io
import os
import re
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path
from statistics import mean

import pytest
import yaml
from rich.console import Console

from assay.config import Settings
from assay_aggregator.rebuild import fold_stream
from assay_judge import build
from assay_report.projections import Projections
from assay_report.report import Report, build_report, report_json
from assay_report.terminal import print_report
from assay_schemas import JudgeRegistered, JudgmentFailed, JudgmentRecorded
from assay_testing.scripted import ScriptedModelServer, ScriptedSequence, ScriptReply

from .cases import SCRIPTED_KEY, Judging, of_type, outcomes, verdict

pytestmark = pytest.mark.timeout(240)

RUNS = 22
PROGRESS = re.compile(rb"(\d+) of (\d+) runs judged")


def _submitting(score: int) -> ScriptedSequence:
    """A judge that submits its verdict at once: one model request per sample."""
    return ScriptedSequence([ScriptReply.call("submit_verdict", verdict(score))])


async def _sealed_campaign(judging: Judging, runs: int = RUNS) -> None:
    for i in range(runs):
        out = {"out.csv": f"run,{i}\n".encode()}
        await judging.seal(f"r{i:02d}", files=out, final_message="see out.csv")


def _spec_file(tmp_path: Path, judge_id: str, model: str, server: ScriptedModelServer) -> Path:
    path = tmp_path / f"{judge_id}.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "judge": {
                    "judge_id": judge_id,
                    "model": model,
                    "family": "late-family",
                    "base_url": server.openai_base_url,
                    "api_key_env": SCRIPTED_KEY,
                    "max_concurrency": 1,
                }
            }
        )
    )
    return path


def _serve(settings: Settings, spec: Path, out: Path) -> subprocess.Popen[bytes]:
    """`assay serve judge --judge SPEC` in its own process, its output to `out`."""
    env = {
        **os.environ,
        "ASSAY_NATS_URL": settings.nats_url,
        "ASSAY_STREAM": settings.stream,
        "ASSAY_SUBJECT_PREFIX": settings.subject_prefix,
        "ASSAY_HOME": str(settings.home),
        "ASSAY_BLOB_DIR": str(settings.blob_dir),
        "ASSAY_STATE_DIR": str(settings.state_dir),
        "ASSAY_ACK_WAIT_S": str(settings.ack_wait_s),
        "COLUMNS": "200",
    }
    cmd = [sys.executable, "-m", "assay_cli", "serve", "judge", "--judge", str(spec)]
    return subprocess.Popen(cmd, env=env, stdout=out.open("ab"), stderr=subprocess.STDOUT)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=30)


def _late_outcomes(events: list[object]) -> list[JudgmentRecorded | JudgmentFailed]:
    return [o for o in outcomes(events) if o.judge_id == "late"]  # type: ignore[arg-type]


async def _report(judging: Judging) -> Report:
    bus = judging.bus
    state = await fold_stream(
        bus.js, bus.stream.name, bus.subjects.events, load=judging.store.get_bytes
    )
    return build_report(Projections(state), n_resamples=200)


async def test_late_serve_judge_backfills_every_sealed_run_and_is_named_late(
    judging: Judging,
    tmp_path: Path,
) -> None:
    declared, late_model = judging.scripted(_submitting(8)), judging.scripted(_submitting(5))
    jury = judging.spec("j1", declared)
    await judging.campaign([jury])
    first = judging.llm(jury)
    log = tmp_path / "late.log"
    async with judging.running(first):  # the running stack: its declared judge keeps judging
        await _sealed_campaign(judging)
        await judging.wait(lambda evs: len(outcomes(evs)) == RUNS, timeout=90)
        loop = asyncio.get_running_loop()
        began = loop.time()
        proc = _serve(
            judging.settings, _spec_file(tmp_path, "late", late_model, judging.server), log
        )
        try:
            events = await judging.wait(lambda evs: len(_late_outcomes(evs)) == RUNS, timeout=180)
            took = loop.time() - began
            # One more run sealed while it runs is judged by both, as any new run.
            await judging.seal("r-new", files={"o": b"1"}, final_message="ok")
            events = await judging.wait(
                lambda evs: len(outcomes(evs)) == 2 * (RUNS + 1), timeout=60
            )
        finally:
            _stop(proc)
    printed = log.read_bytes()
    assert took < 180
    assert proc.returncode == 0, printed.decode()
    progress = [(int(n), int(m)) for n, m in PROGRESS.findall(printed)]
    assert progress and progress[-1] == (RUNS, RUNS), printed.decode()
    assert len(progress) >= 2, printed.decode()  # it said how far it got on the way
    late = _late_outcomes(events)
    assert all(isinstance(o, JudgmentRecorded) for o in late)
    assert Counter((o.run_id, o.sample) for o in late).most_common(1)[0][1] == 1
    assert {
        r.campaign_id for r in of_type(events, JudgeRegistered) if r.judge.judge_id == "late"
    } == {"c1"}

    report = await _report(judging)
    [joined] = report.late_judges
    assert (joined.campaign_id, joined.judge_id, joined.n_runs) == ("c1", "late", RUNS + 1)
    assert joined.joined_at > "" and joined.n_backfilled == RUNS
    # The headline is the declared jury; the late judge's scores sit beside it.
    headline = {s.agent_id: s.estimate for s in report.statistics.agent_scores}
    assert report.with_late_judges is not None
    beside = {s.agent_id: s.estimate for s in report.with_late_judges.agent_scores}
    by_run: dict[str, list[float]] = {}
    for o in outcomes(events):
        assert isinstance(o, JudgmentRecorded)
        by_run.setdefault(o.run_id or "", []).append(mean(d.score for d in o.scores.values()))
    assert headline == {"agent-a": pytest.approx(8.0)}
    # Hand computation: each run's score is the mean over its judges, then over runs.
    assert beside == {"agent-a": pytest.approx(mean(mean(v) for v in by_run.values()))}
    assert beside["agent-a"] == pytest.approx(6.5)

    text = io.StringIO()
    print_report(report, Console(file=text, width=200, color_system=None))
    rendered = text.getvalue()
    assert "joined late" in rendered and "late" in rendered
    assert "including late judges" in rendered
    # A replay rebuilds the same report.
    assert report_json(await _report(judging)) == report_json(report)


async def test_killed_mid_backfill_resumes_and_judges_each_sample_once(
    judging: Judging,
    tmp_path: Path,
) -> None:
    model = judging.scripted(_submitting(6))
    judging.server.set_latency(model, 0.3)
    await judging.campaign([])
    await _sealed_campaign(judging)
    spec = _spec_file(tmp_path, "late", model, judging.server)
    log = tmp_path / "late.log"
    proc = _serve(judging.settings, spec, log)
    try:
        await judging.wait(lambda evs: len(_late_outcomes(evs)) >= 5, timeout=90)
    finally:
        proc.send_signal(signal.SIGKILL)  # no goodbye: mid back-fill
        proc.wait(timeout=10)
    before = len(_late_outcomes([e.event async for e in judging.bus.replay()]))
    assert 5 <= before < RUNS
    asked_before = len(judging.server.requests(model))
    restarted = _serve(judging.settings, spec, log)
    try:
        events = await judging.wait(lambda evs: len(_late_outcomes(evs)) == RUNS, timeout=120)
    finally:
        _stop(restarted)
    late = _late_outcomes(events)
    assert Counter((o.run_id, o.sample) for o in late) == {(f"r{i:02d}", 0): 1 for i in range(RUNS)}
    # Resumed: only the runs without a verdict were judged again (plus those in flight
    # when it was killed, whose verdicts never reached the log: the back-fill and the
    # durable each hold at most one).
    asked_after = len(judging.server.requests(model)) - asked_before
    assert RUNS - before <= asked_after <= RUNS - before + 2
    printed = log.read_bytes().decode()
    assert f"{before} already judged" in printed, printed


async def test_a_judge_outside_its_scope_leaves_the_runs_for_a_later_start(
    judging: Judging,
) -> None:
    model = judging.scripted(_submitting(7))
    spec = judging.spec("late", model)
    await judging.campaign([])
    await _sealed_campaign(judging, runs=3)
    # Started as the jury starts judges (only campaigns that name it): c1 does not.
    unnamed = judging.llm(spec)
    async with judging.running(unnamed):
        await asyncio.sleep(2)
    assert not _late_outcomes([e.event async for e in judging.bus.replay()])
    # Its durable has seen c1's runs; enabled for c1 now, it still judges every one.
    enabled = judging.llm(spec, campaigns={"c1"})
    progress: list[tuple[int, int]] = []
    enabled.on_progress = lambda done, total, already: progress.append((done, total))
    async with judging.running(enabled):
        events = await judging.wait(lambda evs: len(_late_outcomes(evs)) == 3, timeout=60)
    assert sorted(o.run_id for o in _late_outcomes(events)) == ["r00", "r01", "r02"]
    assert progress[-1] == (3, 3)
    # The registration enables it: restarted as the jury starts it, it judges c1's new runs.
    again = judging.llm(spec)
    async with judging.running(again):
        await judging.seal("r-new", files={"o": b"1"}, final_message="ok")
        await judging.wait(lambda evs: len(_late_outcomes(evs)) == 4, timeout=60)


async def test_a_run_that_keeps_failing_ends_in_judgment_failed_not_a_silent_ack(
    judging: Judging,
) -> None:
    def broken(spec: object) -> object:
        raise RuntimeError("the provider cannot be built")

    spec = judging.spec("late", next(judging.names))
    await judging.campaign([spec])
    service = build(judging.settings, spec, store=judging.store, providers=broken)  # type: ignore[arg-type]
    async with judging.running(service):
        await _sealed_campaign(judging, runs=1)
        events = await judging.wait(lambda evs: bool(_late_outcomes(evs)), timeout=90)
    [failed] = _late_outcomes(events)
    assert isinstance(failed, JudgmentFailed) and failed.infrastructure
    assert failed.error_info is not None and failed.error_info.error_class == "RuntimeError"


@pytest.mark.parametrize("command", [["serve", "judge", "--judge"], ["judge", "--spec"]])
@pytest.mark.parametrize("campaign", ["a.b", "*", "c 1"])
def test_both_commands_refuse_a_campaign_that_is_no_id(
    command: list[str], campaign: str, tmp_path: Path
) -> None:
    spec = tmp_path / "j.yaml"
    spec.write_text(yaml.safe_dump({"judge": {"judge_id": "j9", "model": "m"}}))
    env = {**os.environ, "ASSAY_NATS_URL": "nats://127.0.0.1:9"}  # never reached
    out = subprocess.run(
        [sys.executable, "-m", "assay_cli", *command, str(spec), "--campaign", campaign],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2, out.stdout + out.stderr
    [line] = out.stderr.strip().splitlines()
    assert "is not a campaign id" in line and "Traceback" not in out.stderr
