"""`assay retry` that retries nothing says why: no such run, it did not fail, it failed on
the agent's side (a result, not retried), or a later attempt exists already."""

from __future__ import annotations

from pathlib import Path

from assay.bus import Bus
from assay.config import Settings
from assay.retry import retry_failed, why_none_retried
from assay_schemas import RunFailed, RunRequested, same_run
from assay_testing.synthetic_log import LogSpec, synthetic_events
from tests.backbone.test_cli import run_cli


def _failed(request: RunRequested, *, infrastructure: bool) -> RunFailed:
    stage = "sandbox" if infrastructure else "agent"
    error = "sandbox host unreachable" if infrastructure else "agent exited 1"
    return RunFailed(
        event_id=RunFailed.id_for(request.run_id, stage),
        stage=stage,
        error=error,
        infrastructure=infrastructure,
        producer=request.producer,
        **same_run(request),
    )


async def _log(bus: Bus) -> list[RunRequested]:
    """Three requested runs: one still going, one the agent failed, one the sandbox failed."""
    spec = LogSpec(campaign_id="c1", n_tasks=3, n_agents=1, infrastructure_failure_rate=0.0)
    requests = [e for e in synthetic_events(spec) if isinstance(e, RunRequested)]
    for event in (
        *requests,
        _failed(requests[1], infrastructure=False),
        _failed(requests[2], infrastructure=True),
    ):
        await bus.publish(event)
    return requests


async def test_each_reason_for_retrying_nothing_is_named(bus: Bus) -> None:
    going, agent_failed, infra_failed = [r.run_id or "" for r in await _log(bus)]
    assert await why_none_retried(bus, campaign="*", run="nope") == (
        "no run nope in the log (see `assay events --type RunRequested`)"
    )
    reason = await why_none_retried(bus, campaign="c1", run=going)
    assert reason == (
        f"run {going} did not fail (its latest event is RunRequested); "
        "only runs that ended in an infrastructure failure are retried"
    )
    reason = await why_none_retried(bus, campaign="*", run=agent_failed)
    assert reason == (
        f"run {agent_failed} failed on the agent's side (agent: agent exited 1), a result "
        "that is scored, not retried; only infrastructure failures are retried"
    )
    [again] = await retry_failed(bus, run=infra_failed)
    assert await retry_failed(bus, run=infra_failed) == []
    assert await why_none_retried(bus, campaign="*", run=infra_failed) == (
        f"run {infra_failed} was retried already: attempt {again.attempt} is run {again.run_id}"
    )
    assert await why_none_retried(bus, campaign="c1", run=None) == (
        "no infrastructure-failed run without a later attempt in campaign c1 "
        "(1 infrastructure failure, retried already)"
    )
    assert await why_none_retried(bus, campaign="other", run=None) == (
        "no infrastructure-failed run in campaign other"
    )


async def test_the_cli_prints_the_reason(bus: Bus, settings: Settings, tmp_path: Path) -> None:
    going = (await _log(bus))[0].run_id or ""
    out = run_cli(["retry", "--run", going], settings, tmp_path)
    assert out.returncode == 0, out.stderr
    assert "0 run(s) retried: run" in out.stdout and "did not fail" in out.stdout
