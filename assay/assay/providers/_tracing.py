"""A span for each model call, following the OpenTelemetry GenAI semantic conventions.

Attribute names are the conventions' (``gen_ai.*``, ``server.*``, ``error.type``), so a
trace opens usefully in any tool that reads them. ``gen_ai.system`` (older readers) and
``gen_ai.provider.name`` (the current name) are both set. Message contents are never
recorded: prompts and outputs may hold a task's data.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit

from opentelemetry import trace

from assay.telemetry import tracer

from ._models import Completion, GenerationParams

__all__ = ["model_call_span", "record_completion"]


@contextmanager
def model_call_span(
    provider: str, model: str, base_url: str, params: GenerationParams
) -> Iterator[trace.Span]:
    """The ``chat <model>`` client span around one model call (all its attempts)."""
    with tracer("assay.providers").start_as_current_span(
        f"chat {model}", kind=trace.SpanKind.CLIENT, record_exception=False
    ) as span:
        span.set_attribute("gen_ai.operation.name", "chat")
        span.set_attribute("gen_ai.system", provider)
        span.set_attribute("gen_ai.provider.name", provider)
        span.set_attribute("gen_ai.request.model", model)
        span.set_attribute("gen_ai.request.max_tokens", params.max_tokens)
        if params.temperature is not None:
            span.set_attribute("gen_ai.request.temperature", params.temperature)
        if params.top_p is not None:
            span.set_attribute("gen_ai.request.top_p", params.top_p)
        url = urlsplit(base_url)
        if url.hostname:
            span.set_attribute("server.address", url.hostname)
        if url.port:
            span.set_attribute("server.port", url.port)
        try:
            yield span
        except Exception as e:
            span.set_attribute("error.type", type(e).__name__)
            span.set_status(trace.Status(trace.StatusCode.ERROR, str(e)[:200]))
            raise


def record_completion(span: trace.Span, completion: Completion) -> None:
    """What the model answered: its name, id, token counts and why it stopped."""
    span.set_attribute("gen_ai.response.model", completion.model)
    if completion.response_id:
        span.set_attribute("gen_ai.response.id", completion.response_id[:200])
    span.set_attribute("gen_ai.usage.input_tokens", completion.usage.input_tokens)
    span.set_attribute("gen_ai.usage.output_tokens", completion.usage.output_tokens)
    span.set_attribute(
        "gen_ai.response.finish_reasons", [completion.finish_reason or completion.stop_reason]
    )
    span.set_attribute("assay.attempts", completion.attempts)
