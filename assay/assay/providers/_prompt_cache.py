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
from typing import Any, Final, Literal

__all__ = [
    "ANTHROPIC_MAX_BREAKPOINTS",
    "EPHEMERAL",
    "CachePrompt",
    "estimate_tokens",
    "mark_anthropic_breakpoints",
    "min_cacheable_tokens",
    "prompt_cache_key",
    "resolve_cache_prompt",
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


def mark_anthropic_breakpoints(
    tools: list[dict[str, Any]], system: str | None, messages: list[dict[str, Any]], *, model: str
) -> str | list[dict[str, Any]] | None:
    """Mark `tools` and `messages` in place; return `system` as the request should carry it.

    Candidates in prompt order: the last tool, the system prompt, the last block of the
    previous user turn and the last block of the latest turn. A candidate whose prefix is
    under `min_cacheable_tokens(model)` is left unmarked, so at most four are marked.
    """
    minimum = min_cacheable_tokens(model)
    chars = sum(_chars(t) for t in tools)
    if tools and estimate_tokens(chars) >= minimum:
        tools[-1]["cache_control"] = EPHEMERAL
    out_system: str | list[dict[str, Any]] | None = system
    if system:
        chars += len(system)
        if estimate_tokens(chars) >= minimum:
            out_system = [{"type": "text", "text": system, "cache_control": EPHEMERAL}]
    if not messages:
        return out_system
    latest = len(messages) - 1
    previous = _last_user_before(messages, latest)
    targets = {latest} | ({previous} if previous is not None else set())
    for i, message in enumerate(messages):
        content = message["content"]
        chars += sum(_chars(b) for b in content)
        marks = i in targets and content and _markable(content[-1])
        if marks and estimate_tokens(chars) >= minimum:
            content[-1]["cache_control"] = EPHEMERAL
    return out_system


def prompt_cache_key(campaign_id: str, agent_id: str, task_id: str) -> str:
    """OpenAI's `prompt_cache_key` for one campaign, agent and task: a digest, so no
    campaign or task name leaves for the vendor, and short enough for any API."""
    digest = hashlib.sha256(f"{campaign_id}\0{agent_id}\0{task_id}".encode()).hexdigest()
    return f"assay-{digest[:32]}"
