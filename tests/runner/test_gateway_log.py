"""The gateway answers before the step is logged; the log still decides the run."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from assay.store import LocalBlobStore
from assay_runner.gateway import SOCKET_NAME, Gateway
from assay_schemas import AgentSpec, AgentStepLogged, Limits
from assay_testing.scripted import ScriptedModelServer, ScriptedSequence

BODY = {"model": "x", "messages": [{"role": "user", "content": "hi"}]}


def _gateway(tmp_path: Path, url: str, log: Any, **limits: Any) -> Gateway:
    os.environ.setdefault("ASSAY_TEST_LOG_KEY", "k")
    return Gateway(
        agent=AgentSpec(agent_id="a", model="m", base_url=url, api_key_env="ASSAY_TEST_LOG_KEY"),
        limits=Limits(**limits),
        prices={},
        store=LocalBlobStore(tmp_path / "blobs"),
        started_at=datetime.now(UTC),
        log_step=log,
    )


async def _post(tmp_path: Path) -> httpx.Response:
    transport = httpx.AsyncHTTPTransport(uds=str(tmp_path / SOCKET_NAME))
    async with httpx.AsyncClient(transport=transport) as client:
        return await client.post("http://g/v1/chat/completions", json=BODY)


async def test_a_step_that_cannot_be_logged_fails_the_run_at_close(tmp_path: Path) -> None:
    async def broken(fields: dict[str, Any]) -> AgentStepLogged:
        raise RuntimeError("the bus is gone")

    with ScriptedModelServer({"m": ScriptedSequence(["ok"])}) as server:
        gateway = _gateway(tmp_path, server.openai_base_url, broken)
        await gateway.start(tmp_path)
        assert (await _post(tmp_path)).status_code == 200
        with pytest.raises(RuntimeError, match="the bus is gone"):
            await gateway.close()


async def test_a_call_right_after_another_is_counted_against_the_limit(tmp_path: Path) -> None:
    async def log(fields: dict[str, Any]) -> AgentStepLogged:
        return AgentStepLogged.model_construct(**fields)

    with ScriptedModelServer({"m": ScriptedSequence(["ok", "again"])}) as server:
        gateway = _gateway(tmp_path, server.openai_base_url, log, max_steps=1)
        await gateway.start(tmp_path)
        try:
            assert (await _post(tmp_path)).status_code == 200
            refused = await _post(tmp_path)
        finally:
            await gateway.close()
    assert refused.status_code == 403 and gateway.stop_reason == "max_steps"
    assert len(gateway.steps) == 1
