"""In-process services, each connecting as its own restricted NATS user."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from typing import Any

from assay.bus import Bus
from assay.config import Settings
from assay.providers import ModelProvider
from assay.store import BlobStore
from assay_schemas import AgentSpec, JudgeSpec
from assay_testing.pipeline import SCRIPTED_KEY, fast_judge_provider, fast_providers
from assay_testing.scripted import ScriptedModelServer, ScriptedSequence, ScriptReply
from tests.judge.cases import reading_judge, verdict


@asynccontextmanager
async def restricted_services(
    settings_of: Callable[[str], Settings],
    store: BlobStore,
    *,
    judges: Sequence[JudgeSpec] = (),
    aggregator: bool = False,
    agent_providers: Callable[[AgentSpec], ModelProvider] = fast_providers,
) -> AsyncIterator[dict[str, Any]]:
    """sandbox-manager, runner, the given judges and optionally the aggregator, each
    with `settings_of(<its user>)`; like `assay_testing.pipeline.services` otherwise."""
    from assay_aggregator.service import build as build_aggregator
    from assay_judge.service import build as build_judge
    from assay_runner.service import build as build_runner
    from assay_sandbox_manager.backends import BubblewrapBackend
    from assay_sandbox_manager.service import build as build_sandbox

    started: dict[str, Any] = {}
    stops: list[Callable[[], Any]] = []
    try:
        sm_settings = settings_of("sandbox-manager")
        state = sm_settings.instance_state
        backends = {"bubblewrap": BubblewrapBackend(state / "bwrap", state / "seals")}
        sm = build_sandbox(sm_settings, store=store, backends=backends)  # type: ignore[arg-type]
        await sm.start()
        stops.append(sm.stop)
        started["sandbox-manager"] = sm
        runner = build_runner(settings_of("runner"), store=store, providers=agent_providers)
        await runner.start()
        stops.append(runner.stop)
        started["runner"] = runner
        for spec in judges:
            judge = build_judge(
                settings_of("judge"), spec, store=store, providers=fast_judge_provider
            )
            await judge.start()
            stops.append(judge.stop)
            started[f"judge-{spec.judge_id}"] = judge
        if aggregator:
            agg = build_aggregator(settings_of("aggregator"), write_report=False, n_resamples=200)
            await agg.start()
            stops.append(agg.stop)
            started["aggregator"] = agg
        yield started
    finally:
        for stop in reversed(stops):
            await stop()
        for backend in backends.values():
            for info in backend.list_live():
                backend.destroy(info.sandbox_id)


async def connected(settings: Settings, service: str) -> Bus:
    """A connected (not consuming) bus as `settings`' user."""
    bus = Bus(settings, service=service)
    await bus.connect()
    return bus


@contextmanager
def row_counter(command: str, score: int) -> Iterator[ScriptedModelServer]:
    """Agent and judge models on one scripted server: "agent" runs `command` (which writes
    the row count of data.csv to out/n.txt) and submits; "judge" lists the files and
    scores `score`."""
    os.environ[SCRIPTED_KEY] = "scripted"
    agent = ScriptedSequence(
        [
            ScriptReply.call("bash", {"command": command}),
            ScriptReply.call("submit", {"answer": "Counted the rows: out/n.txt."}),
        ]
    )
    judge = reading_judge([("list_files", {})], verdict(score, files=["out/n.txt"]))
    with ScriptedModelServer({"agent": agent, "judge": judge}) as server:
        yield server
