"""Prompt-cache accounting from real SDK responses: reads and writes counted, priced, and
usage that contradicts itself refused at the boundary."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from assay.providers import (
    DEFAULT_PRICES,
    GenerationParams,
    Message,
    Price,
    ProviderKind,
    ProviderUnavailable,
    RetryPolicy,
    SystemMessage,
    ToolDefinition,
    Usage,
    UserMessage,
    cost,
)
from assay_testing.scripted import Fault, ScriptedModelServer, ScriptedSequence, ScriptReply

from .conftest import MakeProvider

TOOL = ToolDefinition(name="run_python", description="Run Python code.")
SENT = Usage(input_tokens=5_000, output_tokens=40, cached_tokens=3_000, cache_write_tokens=1_000)


async def test_cache_reads_and_writes_are_counted_as_each_api_reports_them(
    server: ScriptedModelServer, make: MakeProvider, model: str, kind: ProviderKind
) -> None:
    server.add_script(model, ScriptedSequence([ScriptReply.say("ok", usage=SENT)]))
    done = await make().complete([UserMessage(content="hi")])
    if kind == "anthropic":  # reads and writes reported apart from input_tokens
        assert done.usage == SENT
    else:  # OpenAI reports the reads inside prompt_tokens and no writes
        assert done.usage == SENT.model_copy(update={"cache_write_tokens": 0})


async def test_a_step_with_cache_fields_is_priced_with_read_and_write_prices(
    server: ScriptedModelServer, make: MakeProvider, model: str, kind: ProviderKind
) -> None:
    server.add_script(model, ScriptedSequence([ScriptReply.say("ok", usage=SENT)]))
    done = await make().complete([UserMessage(content="hi")])
    table = {model: Price(input_per_mtok=1.0, cached_input_per_mtok=0.1, cache_write_per_mtok=1.25)}
    writes = 1_000 if kind == "anthropic" else 0
    expected = (5_000 - 3_000 - writes) * 1.0 + 3_000 * 0.1 + writes * 1.25
    assert cost(done.usage, model, table) == pytest.approx(expected / 1_000_000)


async def test_contradictory_usage_from_the_wire_is_refused_as_malformed(
    server: ScriptedModelServer, make: MakeProvider, model: str
) -> None:
    """More cached than input (OpenAI) or a negative count (Anthropic): never priced."""
    server.fail_always(model, Fault.malformed("contradictory_usage"))
    with pytest.raises(ProviderUnavailable) as caught:
        await make(retry=RetryPolicy.for_tests(max_attempts=2)).complete(
            [UserMessage(content="hi")]
        )
    assert caught.value.last_error.kind == "malformed"
    assert isinstance(caught.value.last_error.__cause__, ValidationError)


LONG_SYSTEM = "Instructions for the assay agent. " * 250  # ~8,500 characters


async def _agent_run(make: MakeProvider, *, cache_prompt: bool, steps: int) -> list[Usage]:
    """A conversation that grows a step at a time, as an agent's does."""
    provider = make(cache_prompt=cache_prompt)
    messages: list[Message] = [SystemMessage(text=LONG_SYSTEM), UserMessage(content="task")]
    usages = []
    for step in range(steps):
        done = await provider.complete(messages, [TOOL], GenerationParams(cache_key="assay-k"))
        usages.append(done.usage)
        messages += [done.to_message(), UserMessage(content=f"result {step} " * 40)]
    return usages


async def test_an_agent_run_reads_its_prefix_from_cache_and_costs_less(
    server: ScriptedModelServer, make: MakeProvider, model: str, kind: ProviderKind
) -> None:
    """End to end through the SDKs: from the second step on, the prefix is read."""
    server.add_script(model, ScriptedSequence(["ok"], repeat_last=True))
    cached = await _agent_run(make, cache_prompt=True, steps=6)
    assert cached[0].cached_tokens == 0 and all(u.cached_tokens >= 1024 for u in cached[1:])
    table = {model: DEFAULT_PRICES["claude-sonnet-4" if kind == "anthropic" else "gpt-4.1"]}
    full = sum(
        cost(u.model_copy(update={"cached_tokens": 0, "cache_write_tokens": 0}), model, table)
        for u in cached
    )
    assert sum(cost(u, model, table) for u in cached) < 0.6 * full
