"""The development cache (#50 item 5) through the real SDKs and the scripted server: the
cache directory is input (a damaged, oversized, edited, foreign, unsealed or linked entry
is a miss with one warning, never a crash or another request's answer; the directory stays
under its bound), and the key is exactly the request's answer-deciding inputs (a changed
tool list, epoch or judge sample misses; an expired entry misses)."""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pydantic import ValidationError

from assay.providers import (
    MAX_CACHE_BYTES,
    MAX_ENTRY_BYTES,
    CachedAnswer,
    DevCached,
    GenerationParams,
    Message,
    ModelCache,
    ModelProvider,
    SystemMessage,
    ToolDefinition,
    UserMessage,
    request_key,
)
from assay.providers._dev_cache_disk import SECRET_NAME, cache_secret
from assay_schemas import CacheSpec, CampaignSpec
from assay_testing.scripted import ScriptedModelServer, ScriptReply, ScriptRequest

from .conftest import MakeProvider

READ = ToolDefinition(name="read_file", parameters={"type": "object", "properties": {}})
WRITE = ToolDefinition(name="write_file", parameters={"type": "object", "properties": {}})
ASK: list[Message] = [SystemMessage(text="Be brief."), UserMessage(content="How many rows?")]


def _counting(request: ScriptRequest) -> ScriptReply:
    # Each answer differs, so a second answer from the model is told from a cached one.
    return ScriptReply.say(f"answer {len(request.messages)}-{id(request)}")


def _cached(
    inner: ModelProvider, root: Path, *, epoch: int = 0, ttl: str = "7d", sample: int | None = None
) -> DevCached:
    cache = ModelCache(root, CacheSpec(ttl=ttl).ttl)  # type: ignore[arg-type]
    return DevCached(
        inner=inner, cache=cache, base_url="http://scripted", epoch=epoch, sample=sample
    )


def _secret(provider: DevCached) -> bytes:
    secret = cache_secret(provider.cache.root)
    assert secret is not None
    return secret


def _key(provider: DevCached, tools: list[ToolDefinition], params: GenerationParams) -> str:
    return request_key(
        kind=provider.kind,
        model=provider.model,
        base_url=provider.base_url,
        epoch=provider.epoch,
        messages=ASK,
        tools=tools,
        params=params,
    )


async def test_a_repeated_request_is_answered_from_the_cache_and_marked(
    server: ScriptedModelServer, make: MakeProvider, model: str, tmp_path: Path
) -> None:
    server.add_script(model, _counting)
    provider = _cached(make(), tmp_path)
    first = await provider.complete(ASK, [READ])
    # A prompt-cache hint names the campaign: a re-run changes it, the answer stays.
    again = await provider.complete(ASK, [READ], GenerationParams(cache_key="other-campaign"))
    assert len(server.requests(model)) == 1
    assert not first.cached_answer and again.cached_answer
    assert again.text == first.text and again.usage == first.usage


@pytest.mark.parametrize("change", ["tools", "epoch", "params", "messages", "sample"])
async def test_a_changed_input_misses(
    server: ScriptedModelServer, make: MakeProvider, model: str, tmp_path: Path, change: str
) -> None:
    server.add_script(model, _counting)
    inner = make()
    first = await _cached(inner, tmp_path).complete(ASK, [READ])
    provider = _cached(
        inner,
        tmp_path,
        epoch=1 if change == "epoch" else 0,
        sample=1 if change == "sample" else None,
    )
    tools = [READ, WRITE] if change == "tools" else [READ]
    params = GenerationParams(temperature=0.5) if change == "params" else None
    messages = [*ASK, UserMessage(content="And columns?")] if change == "messages" else ASK
    second = await provider.complete(messages, tools, params)
    assert len(server.requests(model)) == 2
    assert not second.cached_answer and second.text != first.text


async def test_an_expired_entry_misses_and_is_replaced(
    server: ScriptedModelServer, make: MakeProvider, model: str, tmp_path: Path
) -> None:
    server.add_script(model, _counting)
    provider = _cached(make(), tmp_path, ttl="1h")
    key = _key(provider, [READ], GenerationParams())
    stale = await provider.inner.complete(ASK, [READ])
    provider.cache.put(key, stale, now=datetime.now(UTC) - timedelta(hours=2))
    fresh = await provider.complete(ASK, [READ])
    assert not fresh.cached_answer and fresh.text != stale.text
    assert (await provider.complete(ASK, [READ])).text == fresh.text  # stored again


async def test_damaged_entries_are_misses_with_a_warning(
    server: ScriptedModelServer,
    make: MakeProvider,
    model: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    server.add_script(model, _counting)
    provider = _cached(make(), tmp_path)
    key = _key(provider, [READ], GenerationParams())
    path = provider.cache.path(key)
    path.parent.mkdir(parents=True)
    other = CachedAnswer(
        key="0" * 64,
        stored_at=datetime.now(UTC),
        completion=(await provider.inner.complete(ASK, [WRITE])),
    )
    mine = other.model_copy(update={"key": key})
    future = mine.model_copy(update={"stored_at": datetime.now(UTC) + timedelta(days=1)})
    future = future.model_copy(update={"seal": future.sealed_by(_secret(provider))})
    damaged = {
        "garbage": b"\x00\xffnot json",
        "truncated": mine.model_dump_json().encode()[:-20],
        "oversized": b" " * (MAX_ENTRY_BYTES + 1),
        "another request's answer": other.model_dump_json().encode(),
        "unsealed": mine.model_dump_json().encode(),
        "sealed by another cache": mine.model_copy(update={"seal": mine.sealed_by(b"x" * 32)})
        .model_dump_json()
        .encode(),
        "stored in the future": future.model_dump_json().encode(),
    }
    for what, data in damaged.items():
        path.unlink(missing_ok=True)
        path.write_bytes(data)
        server.clear_requests()
        with caplog.at_level(logging.WARNING, logger="assay.providers._dev_cache"):
            caplog.clear()
            answer = await provider.complete(ASK, [READ])
        assert not answer.cached_answer, what
        assert answer.text != other.completion.text, what
        assert len(server.requests(model)) == 1, what
        if what != "stored in the future":  # an expiry, not damage
            assert any("a miss" in r.getMessage() for r in caplog.records), what
        # The model's answer replaced the damaged entry.
        assert CachedAnswer.model_validate_json(path.read_bytes()).key == key, what


async def test_an_answer_edited_on_disk_is_a_miss_said_once(
    server: ScriptedModelServer,
    make: MakeProvider,
    model: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    server.add_script(model, _counting)
    provider = _cached(make(), tmp_path)
    first = await provider.complete(ASK, [READ])
    key = _key(provider, [READ], GenerationParams())
    path = provider.cache.path(key)
    assert first.text is not None
    # Another answer, and another key inside, each still valid JSON in the entry's file.
    edits = {
        "answer": path.read_text().replace(first.text, "the answer is 7"),
        "key": path.read_text().replace(key, "f" * 64),
    }
    for what, edited in edits.items():
        path.write_text(edited)
        with caplog.at_level(logging.WARNING, logger="assay.providers._dev_cache"):
            caplog.clear()
            assert provider.cache.get(key) is None, what
            assert provider.cache.get(key) is None, what  # read again: not said again
        said = [r.getMessage() for r in caplog.records]
        assert len(said) == 1 and str(path) in said[0] and "a miss" in said[0], (what, said)
    again = await provider.complete(ASK, [READ])
    assert not again.cached_answer and again.text != "the answer is 7"
    assert len(server.requests(model)) == 2
    assert (await provider.complete(ASK, [READ])).cached_answer  # the model's answer, stored


async def test_a_cache_without_its_secret_serves_nothing_it_had(
    server: ScriptedModelServer, make: MakeProvider, model: str, tmp_path: Path
) -> None:
    """Entries are sealed with the cache's own secret: a replaced secret (or entries copied
    into another cache) verifies none of them, and the new secret seals what comes next."""
    server.add_script(model, _counting)
    provider = _cached(make(), tmp_path)
    await provider.complete(ASK, [READ])
    (tmp_path / SECRET_NAME).unlink()
    assert not (await provider.complete(ASK, [READ])).cached_answer
    assert (await provider.complete(ASK, [READ])).cached_answer
    assert (tmp_path / SECRET_NAME).stat().st_mode & 0o777 == 0o600


async def test_the_cache_directory_stays_under_its_bound_dropping_the_oldest(
    server: ScriptedModelServer, make: MakeProvider, model: str, tmp_path: Path
) -> None:
    assert MAX_CACHE_BYTES == 1 << 30  # the default bound of every cache
    server.add_script(model, _counting)
    inner = make()
    answer = await inner.complete(ASK, [READ])
    cache = ModelCache(tmp_path, timedelta(days=1), max_bytes=20_000)
    keys = [f"{n:064x}" for n in range(60)]
    for key in keys:
        cache.put(key, answer)
        time.sleep(0.002)  # each entry a little older than the next
    held = [p for p in tmp_path.rglob("*.json")]
    assert sum(p.stat().st_size for p in held) <= 20_000
    kept = {p.stem for p in held}
    assert keys[-1] in kept and keys[0] not in kept
    # What is dropped is the oldest: every key kept came after every key dropped.
    first_kept = min(keys.index(k) for k in kept)
    assert kept == set(keys[first_kept:])
    assert cache.get(keys[-1]) is not None and cache.get(keys[0]) is None


async def test_a_linked_entry_is_not_followed(
    server: ScriptedModelServer, make: MakeProvider, model: str, tmp_path: Path
) -> None:
    server.add_script(model, _counting)
    provider = _cached(make(), tmp_path / "cache")
    key = _key(provider, [READ], GenerationParams())
    planted = tmp_path / "elsewhere.json"
    answer = await provider.inner.complete(ASK, [READ])
    planted.write_text(
        CachedAnswer(key=key, stored_at=datetime.now(UTC), completion=answer).model_dump_json()
    )
    path = provider.cache.path(key)
    path.parent.mkdir(parents=True)
    path.symlink_to(planted)
    assert not (await provider.complete(ASK, [READ])).cached_answer


async def test_an_unwritable_cache_still_answers(
    server: ScriptedModelServer, make: MakeProvider, model: str, tmp_path: Path
) -> None:
    server.add_script(model, _counting)
    (tmp_path / "file").write_text("not a directory")
    provider = _cached(make(), tmp_path / "file")
    assert (await provider.complete(ASK, [READ])).text
    assert (await provider.complete(ASK, [READ])).text  # asked again, nothing stored


def test_the_campaign_cache_section_is_validated() -> None:
    agents = [{"agent_id": "a", "model": "m"}]
    assert CampaignSpec.model_validate({"campaign_id": "c", "agents": agents}).cache is None
    spec = CampaignSpec.model_validate(
        {"campaign_id": "c", "agents": agents, "cache": {"ttl": "7d"}}
    )
    assert spec.cache is not None and spec.cache.ttl == timedelta(days=7)
    assert CacheSpec(ttl="12h").ttl == timedelta(hours=12)  # type: ignore[arg-type]
    for bad in ("0d", "-1d", "400d", "7x", "", True, None, "P-1D"):
        with pytest.raises(ValidationError):
            CacheSpec(ttl=bad)  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        CacheSpec.model_validate({"ttl": "7d", "size": 3})
