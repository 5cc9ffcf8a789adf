"""The model gateway's cost per call: an OpenAI SDK call from a program through a run's
gateway (unix socket, limits, key, blobs and step record) against the same call made
directly to the provider.

The three parties run apart, as in a real run: the program in its own process (in a run,
inside the sandbox), the gateway in this one (the runner's), the provider in a third (in
a run, a remote API; here the scripted model server). Sharing one interpreter would make
the program and the provider wait on the gateway's GIL and event loop, which no real run
does. The sandbox's loopback forwarder is not in the path (it needs a sandbox); the step
logger is a stub, so the bus is not either (the gateway logs a step after answering, so a
real bus is off the answer's path too). What is left over a direct call is the second HTTP
hop: the gateway's h11 server side and its h11 client side (one kept-alive upstream
connection).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from openai import AsyncOpenAI

from assay.store import LocalBlobStore
from assay_runner.gateway import SOCKET_NAME, Gateway, ModelCall
from assay_schemas import AgentSpec, AgentStepLogged, Limits, Producer
from assay_testing.scripted import ScriptedModelServer, ScriptedSequence

from .scripted import _paired_p50
from .table import Row

__all__ = ["bench_gateway"]

_ROOT = Path(__file__).resolve().parents[1]


_BENCH = Producer(service="bench", version="0")


async def _stub_step(fields: ModelCall) -> AgentStepLogged:
    # Unvalidated on purpose: the bench times the gateway, not pydantic.
    return AgentStepLogged.model_construct(
        event_id="bench", campaign_id="bench", step=0, producer=_BENCH, **fields
    )


def _provider() -> None:
    """The provider's process: serve until stdin closes."""
    with ScriptedModelServer({"m": ScriptedSequence(["ok"])}) as server:
        print(server.base_url, flush=True)
        sys.stdin.read()


async def _program(socket: str, url: str) -> None:
    """The program's process: print the paired p50s [through the gateway, direct]."""
    uds = httpx.AsyncClient(transport=httpx.AsyncHTTPTransport(uds=socket))
    # The installed SDK types its client against its own httpx alias; the object is the same.
    via = AsyncOpenAI(base_url="http://gateway/v1", api_key="x", http_client=uds, max_retries=0)  # type: ignore[arg-type]
    direct = AsyncOpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0)
    message: Any = [{"role": "user", "content": "hi"}]
    try:
        p50s = await _paired_p50(
            lambda: via.chat.completions.create(model="m", messages=message),
            lambda: direct.chat.completions.create(model="m", messages=message),
        )
    finally:
        await via.close()
        await direct.close()
    print(json.dumps(p50s))


async def _spawn(*args: str, stdin: int | None = None) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bench.gateway",
        *args,
        cwd=_ROOT,
        stdin=stdin,
        stdout=asyncio.subprocess.PIPE,
    )


async def _calls(folder: Path) -> tuple[float, float]:
    provider = await _spawn("provider", stdin=asyncio.subprocess.PIPE)
    assert provider.stdin is not None and provider.stdout is not None
    try:
        url = (await provider.stdout.readline()).decode().strip()
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
        try:
            program = await _spawn("program", str(folder / SOCKET_NAME), url)
            out, _ = await program.communicate()
        finally:
            await gateway.close()
        if program.returncode != 0:
            raise RuntimeError(f"the bench's program process exited {program.returncode}")
        via, direct = json.loads(out)
        return float(via), float(direct)
    finally:
        provider.stdin.close()
        await provider.wait()


def bench_gateway() -> list[Row]:
    """Gateway p50 per model call against a direct call to the same scripted server."""
    os.environ.setdefault("BENCH_KEY", "bench")
    with tempfile.TemporaryDirectory() as tmp:
        via, direct = asyncio.run(_calls(Path(tmp)))
    return [
        Row(
            "gateway",
            "model call p50 through a run's gateway",
            via,
            "ms",
            direct,
            "same call direct (program and provider in their own processes)",
        ),
        Row(
            "gateway",
            "gateway overhead per call (p50 through − p50 direct)",
            via - direct,
            "ms",
            target="≤ 2 ms",
        ),
    ]


if __name__ == "__main__":
    if sys.argv[1] == "provider":
        _provider()
    else:
        asyncio.run(_program(sys.argv[2], sys.argv[3]))
