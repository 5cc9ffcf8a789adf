"""A real small model completes an agent run end to end through the real pipeline."""

from __future__ import annotations

from pathlib import Path

import pytest

from assay.bus import Bus
from assay.campaign import submit_campaign
from assay.config import Settings
from assay.store import LocalBlobStore
from assay.tasks import load_tasks
from assay_schemas import AgentFinished, AgentSpec, AgentStepLogged, ArtifactsSealed, Limits
from assay_testing.pipeline import campaign, services, wait_for_events, write_task
from tests.smoke.localmodel import (
    INSTALL_HINT,
    LOCAL_MODEL_NAME,
    local_model_server,
    server_installed,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


async def test_gemma_completes_a_run(bus: Bus, settings: Settings, tmp_path: Path) -> None:
    if not server_installed():
        pytest.fail(f"local model server not installed: {INSTALL_HINT}", pytrace=False)
    store = LocalBlobStore(settings.blob_dir)
    folder = write_task(
        tmp_path / "tasks",
        "plan",
        "Write a short analysis plan for a mouse study.",
        {"notes.txt": "n=10 per group"},
    )
    with local_model_server(threads=1) as base_url:
        agent = AgentSpec(
            agent_id="gemma",
            model=LOCAL_MODEL_NAME,
            base_url=base_url,
            family="gemma",
            params={"max_tokens": 24, "temperature": 0.0, "seed": 0},
            timeout_s=120,
        )
        spec = campaign("local", [agent], limits=Limits(max_steps=2, tool_timeout_s=30))
        async with services(settings, store):
            await submit_campaign(bus, store, spec, load_tasks(folder, max_bytes=1000))
            events = await wait_for_events(
                bus, lambda evs: any(isinstance(e, ArtifactsSealed) for e in evs), timeout=240
            )
    [done] = [e for e in events if isinstance(e, AgentFinished)]
    steps = [e for e in events if isinstance(e, AgentStepLogged)]
    assert steps and all(s.usage.input_tokens > 0 and s.usage.output_tokens > 0 for s in steps)
    assert done.stop_reason in {"model_stopped", "max_steps", "submitted"}
    print(
        f"\ngemma run: {done.stop_reason} after {done.steps} step(s): {done.final_message[:80]!r}"
    )
