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
from opentelemetry.context import Context

from assay.telemetry import tracer
from assay_schemas import Usage

from ._models import Completion, GenerationParams

__all__ = ["model_call_span", "record_answer", "record_completion"]


@contextmanager
def model_call_span(
    provider: str,
    model: str,
    base_url: str,
    params: GenerationParams | None = None,
    *,
    context: Context | None = None,
) -> Iterator[trace.Span]:
    """The ``chat <model>`` client span around one model call (all its attempts), a child
    of the current span or of `context`."""
    with tracer("assay.providers").start_as_current_span(
        f"chat {model}", context=context, kind=trace.SpanKind.CLIENT, record_exception=False
    ) as span:
        span.set_attribute("gen_ai.operation.name", "chat")
        span.set_attribute("gen_ai.system", provider)
        span.set_attribute("gen_ai.provider.name", provider)
        span.set_attribute("gen_ai.request.model", model)
        if params is not None:
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


def record_answer(
    span: trace.Span, *, model: str, usage: Usage, finish_reason: str, response_id: str | None
) -> None:
    """What the model answered: its name, id, token counts and why it stopped (each
    bounded: the answer comes from outside)."""
    span.set_attribute("gen_ai.response.model", model[:200])
    if response_id:
        span.set_attribute("gen_ai.response.id", response_id[:200])
    span.set_attribute("gen_ai.usage.input_tokens", usage.input_tokens)
    span.set_attribute("gen_ai.usage.output_tokens", usage.output_tokens)
    if finish_reason:
        span.set_attribute("gen_ai.response.finish_reasons", [finish_reason[:64]])


def record_completion(span: trace.Span, completion: Completion) -> None:
    """`record_answer` for a provider's normalized completion."""
    record_answer(
        span,
        model=completion.model,
        usage=completion.usage,
        finish_reason=completion.finish_reason or completion.stop_reason,
        response_id=completion.response_id,
    )
    span.set_attribute("assay.attempts", completion.attempts)
