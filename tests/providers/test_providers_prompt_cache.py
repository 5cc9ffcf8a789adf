"""Prompt-cache marks: Anthropic breakpoints as the API allows them, OpenAI's cache key,
and the campaign's `cache_prompt` switch."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from pydantic import ValidationError

from assay.providers import (
    ANTHROPIC_MAX_BREAKPOINTS,
    AssistantMessage,
    GenerationParams,
    Message,
    SystemMessage,
    ToolCall,
    ToolDefinition,
    ToolResultMessage,
    UserMessage,
    estimate_tokens,
    mark_anthropic_breakpoints,
    min_cacheable_tokens,
    prompt_cache_key,
    provider_for,
    stable_block,
    to_anthropic_prompt,
    to_anthropic_tools,
)
from assay_schemas import AgentSpec, JudgeSpec
from assay_testing.scripted import ScriptedModelServer, ScriptedSequence

from .conftest import API_KEY_ENV, MakeProvider

LONG = "The protocol for the assay. " * 200  # ~5,600 characters: ~1,400 tokens
TOOL = ToolDefinition(name="run_python", description="Run Python code.")


def _wire(messages: list[Message], tools: list[ToolDefinition], model: str) -> dict[str, Any]:
    prompt = to_anthropic_prompt(messages)
    wire_tools = to_anthropic_tools(tools)
    system = mark_anthropic_breakpoints(wire_tools, prompt.system, prompt.messages, model=model)
    return {"tools": wire_tools, "system": system, "messages": prompt.messages}


def _marked_prefix_tokens(body: dict[str, Any]) -> list[int]:
    """The estimated prefix length at every marked block, counted independently: blocks
    as compact JSON, the system prompt as its text, in the API's order."""
    system = body["system"]
    systems = [{"type": "text", "text": system}] if isinstance(system, str) else system or []
    blocks = [
        *((t, False) for t in body["tools"]),
        *((b, True) for b in systems),
        *((b, False) for m in body["messages"] for b in m["content"]),
    ]
    out, chars = [], 0
    for block, is_system in blocks:
        plain = {k: v for k, v in block.items() if k != "cache_control"}
        compact = json.dumps(plain, separators=(",", ":"), ensure_ascii=False)
        chars += len(block["text"]) if is_system else len(compact)
        if "cache_control" in block:
            out.append(estimate_tokens(chars))
    return out


def _marked(body: dict[str, Any]) -> list[dict[str, Any]]:
    system = body["system"] if isinstance(body["system"], list) else []
    blocks = [*body["tools"], *system, *(b for m in body["messages"] for b in m["content"])]
    return [b for b in blocks if "cache_control" in b]


def _agent_conversation(rng: random.Random, steps: int) -> list[Message]:
    messages: list[Message] = [
        SystemMessage(text="x" * rng.randrange(0, 8_000)),
        UserMessage(content="task " + "y" * rng.randrange(1, 3_000)),
    ]
    for step in range(steps):
        calls = tuple(
            ToolCall(id=f"c{step}_{k}", name="run_python", arguments='{"code": "1"}')
            for k in range(rng.randrange(1, 4))
        )
        messages.append(AssistantMessage(text=rng.choice([None, "thinking"]), tool_calls=calls))
        messages.extend(
            ToolResultMessage(call_id=c.id, content="z" * rng.randrange(0, 2_000)) for c in calls
        )
    return messages


@pytest.mark.parametrize("seed", range(40))
def test_breakpoints_never_exceed_four_nor_sit_under_the_minimum(seed: int) -> None:
    rng = random.Random(seed)
    model = rng.choice(["claude-sonnet-4", "claude-3-5-haiku", "claude-haiku-4-5"])
    body = _wire(_agent_conversation(rng, rng.randrange(0, 30)), [TOOL] * rng.randrange(3), model)
    marked = _marked(body)
    assert len(marked) <= ANTHROPIC_MAX_BREAKPOINTS
    assert all(b["cache_control"] == {"type": "ephemeral"} for b in marked)
    assert all(t >= min_cacheable_tokens(model) for t in _marked_prefix_tokens(body))
    assert all(b.get("text") != "" for b in marked)


def test_a_long_agent_run_marks_system_previous_and_latest_turn() -> None:
    messages = _agent_conversation(random.Random(1), 10)
    messages[0] = SystemMessage(text=LONG)
    body = _wire(messages, [TOOL], "claude-sonnet-4")
    assert body["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert "cache_control" not in body["tools"][-1]  # the tool alone is under the minimum
    assert "cache_control" in body["messages"][-1]["content"][-1]
    assert "cache_control" in body["messages"][-3]["content"][-1]
    assert len(_marked_prefix_tokens(body)) == 3


def test_a_short_prompt_carries_no_marks_and_a_plain_system() -> None:
    body = _wire([SystemMessage(text="Be brief."), UserMessage(content="hi")], [TOOL], "m")
    assert body["system"] == "Be brief." and _marked_prefix_tokens(body) == []


def test_the_minimum_follows_the_model() -> None:
    """~1,400 tokens: cacheable on Sonnet (1,024), not on Haiku 3.5 (2,048) or 4.5 (4,096)."""
    messages: list[Message] = [SystemMessage(text=LONG), UserMessage(content="hi")]
    assert _marked_prefix_tokens(_wire(messages, [], "claude-sonnet-4-20250514"))
    assert _marked_prefix_tokens(_wire(messages, [], "claude-3-5-haiku")) == []
    assert _marked_prefix_tokens(_wire(messages, [], "claude-haiku-4-5")) == []


@pytest.mark.parametrize("kind", ["anthropic"], indirect=True)
async def test_anthropic_requests_carry_breakpoints_unless_caching_is_off(
    server: ScriptedModelServer, make: MakeProvider, model: str
) -> None:
    server.add_script(model, ScriptedSequence(["ok"], repeat_last=True))
    messages: list[Message] = [SystemMessage(text=LONG), UserMessage(content="hi")]
    await make().complete(messages, [TOOL])
    await make(cache_prompt=False).complete(messages, [TOOL])
    on, off = (r.body for r in server.requests(model))
    assert on["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert on["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    assert off["system"] == LONG and "cache_control" not in str(off)


@pytest.mark.parametrize("kind", ["openai"], indirect=True)
async def test_openai_requests_send_the_cache_key_when_caching_is_on(
    server: ScriptedModelServer, make: MakeProvider, model: str
) -> None:
    server.add_script(model, ScriptedSequence(["ok"], repeat_last=True))
    key = prompt_cache_key("camp", "agent-a", "task-1")
    params = GenerationParams(cache_key=key)
    await make().complete([UserMessage(content="hi")], params=params)
    await make(cache_prompt=False).complete([UserMessage(content="hi")], params=params)
    await make().complete([UserMessage(content="hi")])
    keys = [r.body.get("prompt_cache_key") for r in server.requests(model)]
    assert keys == [key, None, None]


def test_the_cache_key_names_campaign_agent_and_task_without_revealing_them() -> None:
    key = prompt_cache_key("secret-campaign", "agent-a", "task-1")
    assert "secret" not in key and len(key) <= 64
    assert key == prompt_cache_key("secret-campaign", "agent-a", "task-1")
    assert key != prompt_cache_key("secret-campaign", "agent-a", "task-2")
    assert key != prompt_cache_key("secret-campaign", "agent-b", "task-1")


# --- attacks: what may reach the wire as a cache key or a cache setting -----------------


@pytest.mark.parametrize("bad", ["", "x" * 65, "key\nwith newline", "k\u00e9y", "a b"])
def test_a_cache_key_that_no_api_takes_is_refused(bad: str) -> None:
    with pytest.raises(ValidationError):
        GenerationParams(cache_key=bad)


@pytest.mark.parametrize("bad", ["sometimes", "never", 2])
def test_a_cache_prompt_setting_other_than_auto_true_false_is_refused(bad: object) -> None:
    with pytest.raises(ValidationError):
        AgentSpec.model_validate({"agent_id": "a", "model": "m", "cache_prompt": bad})
    with pytest.raises(ValidationError):
        JudgeSpec.model_validate({"judge_id": "j", "model": "m", "cache_prompt": bad})


@pytest.mark.parametrize(("setting", "on"), [("auto", True), (True, True), (False, False)])
async def test_the_spec_setting_reaches_the_provider(setting: Any, on: bool) -> None:
    spec = AgentSpec.model_validate(
        {"agent_id": "a", "model": "m", "api_key_env": API_KEY_ENV, "cache_prompt": setting}
    )
    provider = provider_for(spec)
    try:
        assert provider.cache_prompt is on
    finally:
        await provider.aclose()


# --- a stable opening: what every request with one cache key starts with ---------------


def _judge_like(evidence: str) -> list[Message]:
    """A judge's conversation: system prompt, the case's shared part, the run's evidence."""
    return [
        SystemMessage(text="Grade strictly."),
        UserMessage(content="rubric and task " + LONG),
        UserMessage(content=evidence),
    ]


def test_the_stable_opening_is_marked_where_it_ends_inside_the_merged_turn() -> None:
    messages = _judge_like("the run's evidence")
    prompt = to_anthropic_prompt(messages)
    tools = to_anthropic_tools([TOOL])
    opening = to_anthropic_prompt(messages[:2])
    system = mark_anthropic_breakpoints(
        tools, prompt.system, prompt.messages, model="m", stable=stable_block(opening.messages)
    )
    [turn] = prompt.messages  # the two user messages are one turn on the wire
    shared, evidence = turn["content"]
    assert shared["cache_control"] == {"type": "ephemeral"}  # every run's opening
    assert evidence["cache_control"] == {"type": "ephemeral"}  # the latest turn, as always
    assert system == "Grade strictly."  # under the minimum alone: not marked


@pytest.mark.parametrize("seed", range(20))
def test_with_a_stable_opening_still_at_most_four_marks_the_tools_dropped_first(seed: int) -> None:
    rng = random.Random(seed)
    messages = _agent_conversation(rng, rng.randrange(2, 12))
    messages[0] = SystemMessage(text=LONG)
    prompt = to_anthropic_prompt(messages)
    tools = to_anthropic_tools([ToolDefinition(name=f"t{i}", description=LONG) for i in range(2)])
    opening = to_anthropic_prompt(messages[:2])
    system = mark_anthropic_breakpoints(
        tools, prompt.system, prompt.messages, model="m", stable=stable_block(opening.messages)
    )
    body = {"tools": tools, "system": system, "messages": prompt.messages}
    assert len(_marked(body)) == ANTHROPIC_MAX_BREAKPOINTS
    assert "cache_control" not in tools[-1] and body["system"][0]["cache_control"]
    assert "cache_control" in prompt.messages[0]["content"][-1]


async def test_runs_of_one_task_read_its_opening_from_the_cache(
    server: ScriptedModelServer, make: MakeProvider, model: str, kind: str
) -> None:
    """Through the real SDKs: a second request with the same opening and other evidence
    reads the opening from the (simulated) cache, on both APIs."""
    server.add_script(model, ScriptedSequence(["ok"], repeat_last=True))
    params = GenerationParams(cache_key=prompt_cache_key("c", "judge", "t"), stable_messages=2)
    provider = make()
    first = await provider.complete(_judge_like("evidence of run one " * 20), [TOOL], params)
    second = await provider.complete(_judge_like("evidence of run two " * 30), [TOOL], params)
    opening = estimate_tokens(len(LONG))
    assert first.usage.cached_tokens == 0
    assert second.usage.cached_tokens >= opening - 128  # OpenAI reads in 128-token steps
    assert second.usage.cached_tokens < second.usage.input_tokens  # the evidence is not
    if kind == "anthropic":
        assert first.usage.cache_write_tokens > opening
