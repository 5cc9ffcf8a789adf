"""Where a request marks its prompt-cache breakpoints, and the key that groups requests.

Anthropic caches only what a request marks with `cache_control`: a breakpoint caches the
prompt up to and including its block, in the API's order (tools, then system, then the
messages). At most four breakpoints are allowed, and a prefix shorter than the model's
minimum is not cached at all, so a breakpoint there is wasted. We mark the stable prefix
(the last tool, the system prompt), the previous user turn and the latest turn: the next
request then reads everything this one wrote, however many blocks a step adds.

OpenAI caches every prompt's prefix on its own; `prompt_cache_key` only routes requests
that share a prefix to the same cache, so a key per campaign, agent and task helps.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from typing import Any, Final, Literal, NamedTuple

__all__ = [
    "ANTHROPIC_MAX_BREAKPOINTS",
    "EPHEMERAL",
    "BlockAt",
    "CachePrompt",
    "estimate_tokens",
    "mark_anthropic_breakpoints",
    "min_cacheable_tokens",
    "prompt_cache_key",
    "resolve_cache_prompt",
    "stable_block",
]

ANTHROPIC_MAX_BREAKPOINTS: Final = 4
"""The API refuses a request with more `cache_control` blocks."""

EPHEMERAL: Final[dict[str, str]] = {"type": "ephemeral"}
"""The five-minute cache, the only lifetime billed at 1.25x the input price."""

CachePrompt = Literal["auto"] | bool
"""A campaign's `cache_prompt`: auto (on), on or off."""


def resolve_cache_prompt(setting: CachePrompt) -> bool:
    """Whether requests carry cache marks; auto is on (a provider that ignores them
    simply reports no cache fields and is billed in full)."""
    return setting is True or setting == "auto"


def min_cacheable_tokens(model: str) -> int:
    """The shortest prefix the model caches (Anthropic's documented minimums)."""
    if "haiku-4-5" in model or "opus-4-5" in model:
        return 4096
    if "haiku" in model:
        return 2048
    return 1024


def estimate_tokens(chars: int) -> int:
    """About four characters a token, as the scripted server counts them."""
    return math.ceil(chars / 4)


def _chars(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False))


def _markable(block: dict[str, Any]) -> bool:
    # The API refuses cache_control on an empty text block.
    return not (block.get("type") == "text" and not block.get("text"))


def _last_user_before(messages: Sequence[dict[str, Any]], end: int) -> int | None:
    for i in range(end - 1, -1, -1):
        if messages[i]["role"] == "user":
            return i
    return None


class BlockAt(NamedTuple):
    """One content block of an Anthropic request's messages."""

    message: int
    block: int


def stable_block(prefix_messages: Sequence[dict[str, Any]]) -> BlockAt | None:
    """Where a stable prefix ends in the whole request, given that prefix's own wire
    messages: consecutive user turns merge, so it is the prefix's last block, which keeps
    its place when later messages are merged after it."""
    if not prefix_messages or not prefix_messages[-1]["content"]:
        return None
    return BlockAt(len(prefix_messages) - 1, len(prefix_messages[-1]["content"]) - 1)


def mark_anthropic_breakpoints(
    tools: list[dict[str, Any]],
    system: str | None,
    messages: list[dict[str, Any]],
    *,
    model: str,
    stable: BlockAt | None = None,
) -> str | list[dict[str, Any]] | None:
    """Mark `tools` and `messages` in place; return `system` as the request should carry it.

    Candidates in prompt order: the last tool, the system prompt, the end of the `stable`
    prefix (what every request with this cache key opens with: a judge's case before the
    run's evidence), the last block of the previous user turn and the last block of the
    latest turn. A candidate whose prefix is under `min_cacheable_tokens(model)` is left
    unmarked; of five, the tool's mark is dropped (the system's caches the tools too).
    """
    minimum = min_cacheable_tokens(model)
    chars = sum(_chars(t) for t in tools)
    marks: list[dict[str, Any]] = []
    if tools and estimate_tokens(chars) >= minimum:
        marks.append(tools[-1])
    out_system: str | list[dict[str, Any]] | None = system
    if system:
        chars += len(system)
        if estimate_tokens(chars) >= minimum:
            out_system = [{"type": "text", "text": system}]
            marks.append(out_system[0])
    targets: set[BlockAt] = set()
    if messages:
        latest = len(messages) - 1
        previous = _last_user_before(messages, latest)
        ends = (latest,) if previous is None else (latest, previous)
        targets = {BlockAt(i, len(messages[i]["content"]) - 1) for i in ends}
        if stable is not None:
            targets.add(stable)
    for i, message in enumerate(messages):
        for j, block in enumerate(message["content"]):
            chars += _chars(block)
            at = BlockAt(i, j)
            if at in targets and _markable(block) and estimate_tokens(chars) >= minimum:
                marks.append(block)
    for block in marks[-ANTHROPIC_MAX_BREAKPOINTS:]:
        block["cache_control"] = EPHEMERAL
    return out_system


def prompt_cache_key(campaign_id: str, agent_id: str, task_id: str) -> str:
    """OpenAI's `prompt_cache_key` for one campaign, agent and task: a digest, so no
    campaign or task name leaves for the vendor, and short enough for any API."""
    digest = hashlib.sha256(f"{campaign_id}\0{agent_id}\0{task_id}".encode()).hexdigest()
    return f"assay-{digest[:32]}"
