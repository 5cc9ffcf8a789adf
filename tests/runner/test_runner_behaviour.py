"""Runner behaviour: limits, provider faults, bad tool arguments, large outputs."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from assay.bus import Bus
from assay.config import Settings
from assay.providers import Usage, prompt_cache_key
from assay.store import LocalBlobStore
from assay_schemas import (
    AgentFinished,
    AgentStepLogged,
    ArtifactsSealed,
    Event,
    Limits,
    Price,
    RunFailed,
)
from assay_testing import pipeline
from assay_testing.scripted import (
    Fault,
    ScriptedModelServer,
    ScriptedSequence,
    ScriptedToolCall,
    ScriptReply,
)

LOOP = ScriptedSequence([ScriptReply.call("bash", {"command": "echo working"})], repeat_last=True)


def ended(events: list[Event]) -> bool:
    return any(isinstance(e, ArtifactsSealed) for e in events) or any(
        isinstance(e, RunFailed) for e in events
    )


async def run_one(
    bus: Bus,
    settings: Settings,
    tmp_path: Path,
    server: ScriptedModelServer,
    model: str,
    **campaign_extra: object,
) -> list[Event]:
    store = LocalBlobStore(settings.blob_dir)
    folder = pipeline.write_task(tmp_path / "tasks", "t1", "analyse pls", {"data.csv": "x\n1\n"})
    spec = pipeline.campaign(
        "c1", [pipeline.scripted_agent("a1", model, server.openai_base_url)], **campaign_extra
    )
    async with pipeline.services(settings, store):
        await pipeline.submit_folder(bus, store, spec, folder, max_bytes=10_000)
        return await pipeline.wait_for_events(bus, ended, timeout=90)


def finished(events: list[Event]) -> AgentFinished:
    [done] = [e for e in events if isinstance(e, AgentFinished)]
    return done


async def test_max_steps_stops_the_run(
    bus: Bus, settings: Settings, tmp_path: Path, scripted: ScriptedModelServer
) -> None:
    scripted.add_script("looper", LOOP)
    events = await run_one(
        bus, settings, tmp_path, scripted, "looper", limits=Limits(max_steps=3, tool_timeout_s=20)
    )
    assert finished(events).stop_reason == "max_steps"
    assert [e.step for e in events if isinstance(e, AgentStepLogged)] == [0, 1, 2]


Looping = Callable[[str, Usage, Limits], Awaitable[AgentFinished]]


@pytest.fixture
def looping(bus: Bus, settings: Settings, tmp_path: Path, scripted: ScriptedModelServer) -> Looping:
    """How a run ends whose agent (a model) loops on the same tool call, each turn costing
    the usage given, under the limits given."""

    async def run(model: str, usage: Usage, limits: Limits) -> AgentFinished:
        turn = ScriptReply(tool_calls=LOOP.replies[0].tool_calls, usage=usage)  # type: ignore[union-attr]
        scripted.add_script(model, ScriptedSequence([turn], repeat_last=True))
        return finished(await run_one(bus, settings, tmp_path, scripted, model, limits=limits))

    return run


async def test_max_tokens_stops_the_run(looping: Looping) -> None:
    done = await looping(
        "heavy",
        Usage(input_tokens=600, output_tokens=10),
        Limits(max_tokens=1500, tool_timeout_s=20),
    )
    assert done.stop_reason == "max_tokens" and done.steps == 3
    assert done.usage.input_tokens == 1800


async def test_cost_budget_stops_the_run(looping: Looping) -> None:
    done = await looping(
        "gpt-4o",
        Usage(input_tokens=200_000, output_tokens=0),
        Limits(cost_budget_usd=1.0, max_tokens=10_000_000, tool_timeout_s=20),
    )
    assert done.stop_reason == "cost_budget"
    assert done.steps == 2 and done.cost_usd == pytest.approx(
        1.0
    )  # 2 × 200k tokens × $2.50/M reaches $1


async def test_wall_clock_stops_the_run(
    bus: Bus, settings: Settings, tmp_path: Path, scripted: ScriptedModelServer
) -> None:
    scripted.add_script("slow", LOOP)
    scripted.set_latency("slow", 0.4)
    events = await run_one(
        bus,
        settings,
        tmp_path,
        scripted,
        "slow",
        limits=Limits(wall_clock_s=1.0, tool_timeout_s=20),
    )
    done = finished(events)
    assert done.stop_reason == "wall_clock" and 1 <= done.steps <= 5


async def test_model_that_stops_talking_ends_the_run(
    bus: Bus, settings: Settings, tmp_path: Path, scripted: ScriptedModelServer
) -> None:
    scripted.add_script("chatty", ScriptedSequence(["I think the answer is 42."]))
    events = await run_one(bus, settings, tmp_path, scripted, "chatty")
    done = finished(events)
    assert done.stop_reason == "model_stopped" and done.final_message == "I think the answer is 42."


async def test_rate_limit_storm_is_ridden_out(
    bus: Bus, settings: Settings, tmp_path: Path, scripted: ScriptedModelServer
) -> None:
    scripted.add_script("busy", ScriptedSequence([ScriptReply.call("submit", {"answer": "done"})]))
    scripted.inject("busy", [Fault.rate_limit(retry_after=0.05)] * 5 + [Fault.server_error()])
    events = await run_one(bus, settings, tmp_path, scripted, "busy")
    assert finished(events).stop_reason == "submitted"
    statuses = [r.status for r in scripted.requests("busy")]
    assert statuses == [429] * 5 + [500, 200]


async def test_dead_provider_is_an_infrastructure_failure(
    bus: Bus, settings: Settings, tmp_path: Path, scripted: ScriptedModelServer
) -> None:
    scripted.add_script("dead", LOOP)
    scripted.fail_always("dead")
    events = await run_one(bus, settings, tmp_path, scripted, "dead")
    [failed] = [e for e in events if isinstance(e, RunFailed)]
    assert failed.infrastructure and failed.stage == "agent"
    assert "ProviderUnavailable" in failed.error
    await pipeline.wait_for_events(
        bus, lambda evs: any(isinstance(e, ArtifactsSealed) for e in evs)
    )


async def test_bad_tool_arguments_go_back_to_the_model(
    bus: Bus, settings: Settings, tmp_path: Path, scripted: ScriptedModelServer
) -> None:
    script = ScriptedSequence(
        [
            ScriptReply.call("bash", "{not json"),
            ScriptReply.call("no_such_tool", {}),
            ScriptReply.call("read_file", {"path": "../../etc/shadow"}),
            ScriptReply.call("bash", {"command": "seq 1 100000"}),
            ScriptReply.call("submit", {"answer": "ok"}),
        ]
    )
    scripted.add_script("clumsy", script)
    events = await run_one(
        bus,
        settings,
        tmp_path,
        scripted,
        "clumsy",
        limits=Limits(tool_output_chars=1000, tool_timeout_s=20),
    )
    steps = [e for e in events if isinstance(e, AgentStepLogged)]
    results = [s.tool_results[0] for s in steps]
    assert results[0].is_error and "not a JSON object" in results[0].output
    assert results[1].is_error and "unknown tool" in results[1].output
    assert results[2].is_error and "shadow" in results[2].output
    big = results[3]
    assert big.truncated and "[... truncated" in big.output and big.output_blob is not None
    store = LocalBlobStore(settings.blob_dir)
    assert store.get_bytes(big.output_blob.sha256).decode().count("\n") > 100_000
    assert finished(events).stop_reason == "submitted"


async def test_campaign_price_table_sets_the_cost(
    bus: Bus, settings: Settings, tmp_path: Path, scripted: ScriptedModelServer
) -> None:
    one_step = ScriptReply(
        tool_calls=(ScriptedToolCall(name="submit", arguments={"answer": "ok"}),),
        usage=Usage(input_tokens=1000, output_tokens=500, cached_tokens=400),
    )
    scripted.add_script("house-model", ScriptedSequence([one_step]))
    prices = {
        "house-model": Price(input_per_mtok=10.0, output_per_mtok=40.0, cached_input_per_mtok=1.0)
    }
    events = await run_one(bus, settings, tmp_path, scripted, "house-model", prices=prices)
    # 600 uncached input × $10/M + 400 cached × $1/M + 500 output × $40/M
    assert finished(events).cost_usd == pytest.approx(0.006 + 0.0004 + 0.02)


async def test_every_request_of_a_run_carries_its_prompt_cache_key(
    bus: Bus, settings: Settings, tmp_path: Path, scripted: ScriptedModelServer
) -> None:
    """The key groups one agent's runs of one task (every epoch), so they share a cache."""
    steps = [
        ScriptReply.call("bash", {"command": "echo hi"}),
        ScriptReply.call("submit", {"answer": "done"}),
    ]
    scripted.add_script("keyed", ScriptedSequence(steps))
    events = await run_one(bus, settings, tmp_path, scripted, "keyed")
    assert finished(events).stop_reason == "submitted"
    keys = [r.body.get("prompt_cache_key") for r in scripted.requests("keyed")]
    assert keys == [prompt_cache_key("c1", "a1", "t1")] * 2
