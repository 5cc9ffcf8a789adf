"""The model gateway's cost per call: an OpenAI SDK call through a program run's gateway
(unix socket, limits, key, blobs and step record) against the same call made directly.

The sandbox's loopback forwarder is not in the path (it needs a sandbox); the step
logger is a stub, so the bus is not either (the gateway logs a step after answering, so
a real bus is off the answer's path too). What is left over a direct call is mostly the
second HTTP client hop (httpx, about 1 ms of CPU per call on the development machine);
h11's parse, the JSON, the limit check and the blobs are a few tenths of that.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from openai import AsyncOpenAI

from assay.scripted import ScriptedModelServer, ScriptedSequence
from assay.store import LocalBlobStore
from assay_runner.gateway import SOCKET_NAME, Gateway
from assay_schemas import AgentSpec, AgentStepLogged, Limits

from .scripted import _paired_p50
from .table import Row

__all__ = ["bench_gateway"]


async def _stub_step(fields: dict[str, Any]) -> AgentStepLogged:
    return AgentStepLogged.model_construct(**fields)


async def _calls(url: str, folder: Path) -> tuple[float, float]:
    agent = AgentSpec(agent_id="a", model="m", base_url=f"{url}/v1", api_key_env="BENCH_KEY")
    gateway = Gateway(
        agent=agent,
        limits=Limits(max_steps=1_000_000),
        prices={},
        store=LocalBlobStore(folder / "blobs"),
        started_at=datetime.now(UTC),
        log_step=_stub_step,
    )
    await gateway.start(folder)
    uds = httpx.AsyncClient(transport=httpx.AsyncHTTPTransport(uds=str(folder / SOCKET_NAME)))
    # The installed SDK types its client against its own httpx alias; the object is the same.
    via = AsyncOpenAI(base_url="http://gateway/v1", api_key="x", http_client=uds, max_retries=0)  # type: ignore[arg-type]
    direct = AsyncOpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0)
    message: Any = [{"role": "user", "content": "hi"}]
    try:
        return await _paired_p50(
            lambda: via.chat.completions.create(model="m", messages=message),
            lambda: direct.chat.completions.create(model="m", messages=message),
        )
    finally:
        await via.close()
        await direct.close()
        await gateway.close()


def bench_gateway() -> list[Row]:
    """Gateway p50 per model call against a direct call to the same scripted server."""
    os.environ.setdefault("BENCH_KEY", "bench")
    with (
        ScriptedModelServer({"m": ScriptedSequence(["ok"])}) as server,
        tempfile.TemporaryDirectory() as tmp,
    ):
        via, direct = asyncio.run(_calls(server.base_url, Path(tmp)))
    return [
        Row(
            "gateway",
            "model call p50 through a run's gateway",
            via,
            "ms",
            direct,
            "same call direct",
            "≤ 2 ms over direct",
        )
    ]
