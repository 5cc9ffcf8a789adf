"""The providers' prompt caches, simulated as each documents its own.

Anthropic caches only at `cache_control` breakpoints (at most four a request): a
breakpoint whose prefix (tools, then system, then messages, up to and including its
block) is at least the model's minimum is written, and a later request reads the
longest prefix it shares with one written, looking back up to 20 blocks from each of
its breakpoints. OpenAI caches every prompt on its own from 1,024 tokens, in steps of
128, keyed by the prefix and routed by `prompt_cache_key`. Entries live five minutes
from their last use. Tokens are counted as the server counts them: four characters each,
an image as the API bills it (`_images`).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

from assay.providers import (
    ANTHROPIC_MAX_BREAKPOINTS,
    Usage,
    estimate_tokens,
    min_cacheable_tokens,
)

from ._images import with_stand_ins
from ._script import Api

__all__ = ["PromptCache", "TooManyBreakpoints", "anthropic_blocks"]

_LOOKBACK_BLOCKS = 20
"""How far before a breakpoint Anthropic looks for an earlier cached prefix."""
_OPENAI_MIN_TOKENS = 1024
_OPENAI_STEP_TOKENS = 128
_CHARS_PER_TOKEN = 4


class TooManyBreakpoints(ValueError):
    """An Anthropic request marked more blocks than the API allows (it answers 400)."""


class _Boundary(NamedTuple):
    digest: bytes
    chars: int
    """Characters of the prompt up to and including this block."""
    marked: bool


def _canonical(api: Api, block: dict[str, Any]) -> str:
    plain = with_stand_ins(api, {k: v for k, v in block.items() if k != "cache_control"})
    return json.dumps(plain, separators=(",", ":"), ensure_ascii=False, sort_keys=True)


def anthropic_blocks(body: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The request's cacheable blocks in the API's order: tools, system, messages."""
    yield from body.get("tools") or ()
    system = body.get("system")
    if isinstance(system, str):
        yield {"type": "text", "text": system}
    elif isinstance(system, list):
        yield from system
    for message in body.get("messages") or ():
        content = message.get("content")
        if isinstance(content, str):
            yield {"type": "text", "text": content}
        else:
            yield from content or ()


def _anthropic_boundaries(body: dict[str, Any]) -> list[_Boundary]:
    running = hashlib.sha256(str(body.get("model")).encode())
    out: list[_Boundary] = []
    chars = 0
    for block in anthropic_blocks(body):
        text = _canonical("anthropic", block)
        running.update(text.encode() + b"\0")
        chars += len(text)
        out.append(_Boundary(running.digest(), chars, "cache_control" in block))
    if sum(b.marked for b in out) > ANTHROPIC_MAX_BREAKPOINTS:
        raise TooManyBreakpoints(
            f"a request may carry at most {ANTHROPIC_MAX_BREAKPOINTS} cache_control blocks"
        )
    return out


def _openai_prompt(body: dict[str, Any]) -> bytes:
    # One line per tool, then per message: a conversation that grows keeps its prefix.
    items = [*(body.get("tools") or ()), *(body.get("messages") or ())]
    return "".join(_canonical("openai", i) + "\n" for i in items).encode()


class PromptCache:
    """One server's prompt caches for both APIs (used from the server's thread only)."""

    def __init__(
        self,
        *,
        ttl_s: float = 300.0,
        max_entries: int = 100_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._ttl_s = ttl_s
        self._max_entries = max_entries
        self._clock = clock
        self._entries: OrderedDict[bytes, float] = OrderedDict()
        """Prefix digest -> when it expires; oldest use first."""

    def check(self, api: Api, body: dict[str, Any]) -> None:
        """Refuse what the API refuses (more than four breakpoints)."""
        if api == "anthropic":
            _anthropic_boundaries(body)

    def usage(self, api: Api, body: dict[str, Any], estimated: Usage) -> Usage:
        """`estimated` with the cache's reads (and Anthropic's writes) filled in."""
        if api == "anthropic":
            read, write = self._anthropic(body)
        else:
            read, write = self._openai(body), 0
        read = min(read, estimated.input_tokens)
        write = min(write, estimated.input_tokens - read)
        return estimated.model_copy(update={"cached_tokens": read, "cache_write_tokens": write})

    def _hit(self, digest: bytes) -> bool:
        expires = self._entries.get(digest)
        if expires is None or expires < self._clock():
            return False
        self._store(digest)  # a read refreshes the entry's lifetime
        return True

    def _store(self, digest: bytes) -> None:
        self._entries[digest] = self._clock() + self._ttl_s
        self._entries.move_to_end(digest)
        while len(self._entries) > self._max_entries:
            self._entries.popitem(last=False)

    def _anthropic(self, body: dict[str, Any]) -> tuple[int, int]:
        boundaries = _anthropic_boundaries(body)
        minimum = min_cacheable_tokens(str(body.get("model")))
        marked = [
            i for i, b in enumerate(boundaries) if b.marked and estimate_tokens(b.chars) >= minimum
        ]
        read_chars = 0
        for i in marked:
            for j in range(i, max(-1, i - _LOOKBACK_BLOCKS - 1), -1):
                if boundaries[j].chars > read_chars and self._hit(boundaries[j].digest):
                    read_chars = boundaries[j].chars
                    break
        if not marked:
            return 0, 0
        for i in marked:
            self._store(boundaries[i].digest)
        written = max(0, boundaries[marked[-1]].chars - read_chars)
        return estimate_tokens(read_chars), estimate_tokens(written)

    def _openai(self, body: dict[str, Any]) -> int:
        prompt = _openai_prompt(body)
        key = f"{body.get('model')}\0{body.get('prompt_cache_key') or ''}\0"
        running = hashlib.sha256(key.encode())
        start, read_tokens = 0, 0
        tokens = _OPENAI_MIN_TOKENS
        while tokens * _CHARS_PER_TOKEN <= len(prompt):
            end = tokens * _CHARS_PER_TOKEN
            running.update(prompt[start:end])
            digest = running.digest()
            if self._hit(digest):
                read_tokens = tokens
            else:
                self._store(digest)
            start, tokens = end, tokens + _OPENAI_STEP_TOKENS
        return read_tokens
