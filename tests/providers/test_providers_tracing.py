"""Each model call is one GenAI span (OpenTelemetry GenAI conventions), on both APIs.

The providers run in a child process with ``OTEL_TRACES_EXPORTER=console``, so the spans
checked are what the real SDK exporter printed, not an in-test stand-in."""

from __future__ import annotations

import textwrap
from pathlib import Path

from tests.e2e.otlp_receiver import console_spans, traced_python

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent(
    """
    import asyncio, os
    from assay.providers import UserMessage, make_provider
    from assay.telemetry import setup_tracing, shutdown_telemetry
    from assay_testing.scripted import ScriptedModelServer, ScriptedSequence, ScriptReply
    from assay_schemas import Usage

    os.environ["SCRIPTED_KEY"] = "sk"
    setup_tracing("assay-test")
    reply = ScriptReply.say("hello", usage=Usage(input_tokens=11, output_tokens=3))
    scripts = {f"m-{k}": ScriptedSequence([reply]) for k in ("openai", "anthropic")}

    async def main(server):
        for kind in ("openai", "anthropic"):
            base = server.openai_base_url if kind == "openai" else server.base_url
            p = make_provider(kind, f"m-{kind}", api_key_env="SCRIPTED_KEY", base_url=base)
            await p.complete([UserMessage(content="hi")])
            await p.aclose()

    with ScriptedModelServer(scripts) as server:
        asyncio.run(main(server))
    shutdown_telemetry()
    """
)


def test_each_model_call_is_a_genai_span_on_both_apis() -> None:
    out = traced_python(SCRIPT, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    spans = {s.attributes["gen_ai.provider.name"]: s for s in console_spans(out.stderr)}
    assert set(spans) == {"openai", "anthropic"}
    finish = {"openai": "stop", "anthropic": "end_turn"}  # each API's own word
    for kind, span in spans.items():
        a = span.attributes
        assert span.name == f"chat m-{kind}"
        assert span.service == "assay-test"
        assert a["gen_ai.operation.name"] == "chat"
        assert a["gen_ai.system"] == kind
        assert a["gen_ai.request.model"] == a["gen_ai.response.model"] == f"m-{kind}"
        assert (a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"]) == (11, 3)
        assert a["gen_ai.response.finish_reasons"] == [finish[kind]]
        assert a["server.address"] == "127.0.0.1" and a["server.port"] > 0
        assert "gen_ai.response.id" in a
        assert not any("content" in k or "prompt" in k for k in a), "no message text is recorded"
