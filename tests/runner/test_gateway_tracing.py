"""A program agent's model calls through the gateway are GenAI spans in the run's trace.

The gateway runs in a child process with ``OTEL_TRACES_EXPORTER=console``: the spans
checked are what the SDK's exporter printed."""

from __future__ import annotations

import textwrap
from pathlib import Path

from tests.e2e.otlp_receiver import console_spans, traced_python

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent(
    """
    import asyncio, os, sys, tempfile
    from datetime import UTC, datetime
    from pathlib import Path
    import httpx
    from assay.store import LocalBlobStore
    from assay.telemetry import serving, setup_tracing, shutdown_telemetry, tracer
    from assay_testing.scripted import ScriptedModelServer, ScriptedSequence, ScriptReply
    from assay_runner.gateway import SOCKET_NAME, Gateway
    from assay_schemas import AgentSpec, AgentStepLogged, Limits, Usage

    os.environ["GW_KEY"] = "k"
    setup_tracing("assay-test")
    reply = ScriptReply.say("ok", usage=Usage(input_tokens=21, output_tokens=4))
    body = {"model": "anything", "messages": [{"role": "user", "content": "hi"}]}

    async def log(fields):
        return AgentStepLogged.model_construct(**fields)

    async def main(url, folder):
        gateway = Gateway(
            agent=AgentSpec(agent_id="a", model="m", base_url=url, api_key_env="GW_KEY"),
            limits=Limits(), prices={}, store=LocalBlobStore(folder / "blobs"),
            started_at=datetime.now(UTC), log_step=log,
        )
        with serving("runner"), tracer("t").start_as_current_span("run r1"):
            await gateway.start(folder)
        transport = httpx.AsyncHTTPTransport(uds=str(folder / SOCKET_NAME))
        async with httpx.AsyncClient(transport=transport) as client:
            answer = await client.post("http://g/v1/chat/completions", json=body)
            assert answer.status_code == 200, answer.text
        await gateway.close()

    with tempfile.TemporaryDirectory() as folder:
        with ScriptedModelServer({"m": ScriptedSequence([reply])}) as server:
            asyncio.run(main(server.openai_base_url, Path(folder)))
    shutdown_telemetry()
    """
)


def test_a_program_agents_model_call_is_a_genai_span_in_the_run_trace() -> None:
    out = traced_python(SCRIPT, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    spans = {s.name: s for s in console_spans(out.stderr)}
    root, chat = spans["run r1"], spans["chat m"]
    assert (chat.trace_id, chat.parent_id) == (root.trace_id, root.span_id)
    assert chat.service == "assay-runner", "the run's service, though a connection called"
    a = chat.attributes
    assert (a["gen_ai.operation.name"], a["gen_ai.request.model"]) == ("chat", "m")
    assert (a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"]) == (21, 4)
    assert a["gen_ai.response.finish_reasons"] == ["stop"]
