"""The scripted server's prompt caches, read through the real SDKs on loopback."""

from __future__ import annotations

import base64
import struct
from typing import Any

import anthropic
import openai
import pytest

from assay.providers import Usage
from assay_testing.scripted import PromptCache, ScriptedModelServer, ScriptedSequence

LONG = "Rubric and anchors for the assay. " * 200  # ~6,800 characters: ~1,700 tokens
EPHEMERAL = {"type": "ephemeral"}


def _anthropic(server: ScriptedModelServer) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(base_url=server.base_url, api_key="k", max_retries=0)


def _openai(server: ScriptedModelServer) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=server.openai_base_url, api_key="k", max_retries=0)


def _system(marked: bool) -> list[dict[str, Any]]:
    block: dict[str, Any] = {"type": "text", "text": LONG}
    return [{**block, "cache_control": EPHEMERAL}] if marked else [block]


async def _ask(client: anthropic.AsyncAnthropic, model: str, **kwargs: Any) -> Any:
    messages = kwargs.pop("messages", [{"role": "user", "content": "hi"}])
    return (
        await client.messages.create(model=model, max_tokens=50, messages=messages, **kwargs)
    ).usage


async def test_anthropic_writes_a_marked_prefix_then_reads_it(
    server: ScriptedModelServer, model: str
) -> None:
    server.add_script(model, ScriptedSequence(["ok"], repeat_last=True))
    async with _anthropic(server) as client:
        first = await _ask(client, model, system=_system(marked=True))
        second = await _ask(client, model, system=_system(marked=True))
    assert first.cache_read_input_tokens == 0 and first.cache_creation_input_tokens >= 1024
    assert second.cache_read_input_tokens == first.cache_creation_input_tokens
    assert second.cache_creation_input_tokens == 0 and second.input_tokens > 0


async def test_anthropic_caches_nothing_unmarked_or_under_the_minimum(
    server: ScriptedModelServer, model: str
) -> None:
    server.add_script(model, ScriptedSequence(["ok"], repeat_last=True))
    short = [{"type": "text", "text": "Be brief.", "cache_control": EPHEMERAL}]
    async with _anthropic(server) as client:
        for system in (_system(marked=False), _system(marked=False), short, short):
            usage = await _ask(client, model, system=system)
            assert usage.cache_read_input_tokens == 0 == usage.cache_creation_input_tokens


async def test_anthropic_moving_breakpoint_reads_the_last_turn_and_writes_the_new_one(
    server: ScriptedModelServer, model: str
) -> None:
    server.add_script(model, ScriptedSequence(["ok"], repeat_last=True))
    turn1 = [
        {"role": "user", "content": [{"type": "text", "text": LONG, "cache_control": EPHEMERAL}]}
    ]
    turn2 = [
        {"role": "user", "content": [{"type": "text", "text": LONG}]},
        {"role": "assistant", "content": [{"type": "text", "text": "ok"}]},
        {
            "role": "user",
            "content": [{"type": "text", "text": "more " * 300, "cache_control": EPHEMERAL}],
        },
    ]
    async with _anthropic(server) as client:
        first = await _ask(client, model, messages=turn1)
        second = await _ask(client, model, messages=turn2)
    assert second.cache_read_input_tokens == first.cache_creation_input_tokens
    assert 300 < second.cache_creation_input_tokens < 500  # the new turn only


async def test_anthropic_refuses_a_fifth_breakpoint(
    server: ScriptedModelServer, model: str
) -> None:
    server.add_script(model, ScriptedSequence(["ok"], repeat_last=True))
    blocks = [{"type": "text", "text": f"part {i}", "cache_control": EPHEMERAL} for i in range(5)]
    async with _anthropic(server) as client:
        with pytest.raises(anthropic.BadRequestError):
            await _ask(client, model, messages=[{"role": "user", "content": blocks}])


async def _chat(client: openai.AsyncOpenAI, model: str, text: str, **extra: Any) -> Any:
    messages: Any = [{"role": "system", "content": LONG}, {"role": "user", "content": text}]
    done = await client.chat.completions.create(model=model, messages=messages, **extra)
    return done.usage


async def test_openai_caches_prefixes_from_1024_tokens_in_steps_of_128(
    server: ScriptedModelServer, model: str
) -> None:
    server.add_script(model, ScriptedSequence(["ok"], repeat_last=True))
    async with _openai(server) as client:
        first = await _chat(client, model, "question one")
        second = await _chat(client, model, "question two")
        short = await client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": "hi"}]
        )
    assert first.prompt_tokens_details.cached_tokens == 0
    cached = second.prompt_tokens_details.cached_tokens
    assert 1024 <= cached <= second.prompt_tokens and (cached - 1024) % 128 == 0
    assert short.usage is not None and short.usage.prompt_tokens_details.cached_tokens == 0


async def test_openai_cache_key_routes_prefixes_apart(
    server: ScriptedModelServer, model: str
) -> None:
    server.add_script(model, ScriptedSequence(["ok"], repeat_last=True))
    async with _openai(server) as client:
        await _chat(client, model, "q", extra_body={"prompt_cache_key": "task-a"})
        other = await _chat(client, model, "q", extra_body={"prompt_cache_key": "task-b"})
        same = await _chat(client, model, "q", extra_body={"prompt_cache_key": "task-a"})
    assert other.prompt_tokens_details.cached_tokens == 0
    assert same.prompt_tokens_details.cached_tokens >= 1024


def test_cache_entries_expire_five_minutes_after_their_last_use() -> None:
    now = [0.0]
    cache = PromptCache(clock=lambda: now[0])
    body = {"model": "m", "messages": [{"role": "user", "content": LONG}]}
    estimate = Usage(input_tokens=2_000)
    assert cache.usage("openai", body, estimate).cached_tokens == 0
    now[0] = 299.0
    assert cache.usage("openai", body, estimate).cached_tokens >= 1024  # refreshed
    now[0] = 299.0 + 301.0
    assert cache.usage("openai", body, estimate).cached_tokens == 0


def test_reads_never_exceed_the_input_they_are_part_of() -> None:
    cache = PromptCache()
    body = {"model": "m", "messages": [{"role": "user", "content": LONG}]}
    tight = Usage(input_tokens=10)
    assert cache.usage("openai", body, tight).cached_tokens == 0
    assert cache.usage("openai", body, tight).cached_tokens == 10


def _png(width: int, height: int, padding: int) -> str:
    """A PNG's header for `width` x `height`, padded to a large payload, as base64."""
    header = b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + struct.pack(">II", width, height)
    return base64.b64encode(header + bytes(padding)).decode()


async def test_an_image_is_billed_by_its_size_not_by_its_base64(
    server: ScriptedModelServer, model: str
) -> None:
    """1000 x 600: Anthropic ~800 tokens (w x h / 750), OpenAI 765 (85 + 170 x 4 tiles),
    though its 200 KB of base64 would be some 67,000 at four characters a token."""
    server.add_script(model, ScriptedSequence(["ok"], repeat_last=True))
    data = _png(1000, 600, 200_000)
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}}
    url = {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{data}"}}
    async with _anthropic(server) as claude, _openai(server) as gpt:
        billed = await _ask(claude, model, messages=[{"role": "user", "content": [image]}])
        done = await gpt.chat.completions.create(
            model=model, messages=[{"role": "user", "content": [url]}]
        )
    assert 800 <= billed.input_tokens < 900
    assert done.usage is not None and 765 <= done.usage.prompt_tokens < 850


async def test_the_same_image_is_read_from_the_cache_and_another_is_not(
    server: ScriptedModelServer, model: str
) -> None:
    server.add_script(model, ScriptedSequence(["ok"], repeat_last=True))

    def turn(data: str) -> list[dict[str, Any]]:
        source = {"type": "base64", "media_type": "image/png", "data": data}
        blocks = [{"type": "image", "source": source, "cache_control": EPHEMERAL}]
        return [{"role": "user", "content": blocks}]

    plot, other = _png(1500, 1500, 10_000), _png(1500, 1499, 10_000)
    async with _anthropic(server) as client:
        first = await _ask(client, model, system=_system(marked=False), messages=turn(plot))
        again = await _ask(client, model, system=_system(marked=False), messages=turn(plot))
        changed = await _ask(client, model, system=_system(marked=False), messages=turn(other))
    assert first.cache_creation_input_tokens > 0
    assert again.cache_read_input_tokens == first.cache_creation_input_tokens
    assert changed.cache_read_input_tokens == 0
