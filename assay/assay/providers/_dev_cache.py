"""The development cache: a model's answer served again from disk for the same request.

Off unless a campaign says ``cache:`` (or ``assay run --cache``). The key is the sha256 of
a canonical JSON of exactly what decides an answer: the API family, model, base URL,
messages, epoch (and a judge's sample index), generation parameters and tools.
Prompt-cache hints (`cache_key`, `stable_messages`) are left out: they change the bill,
not the answer, and the key names the campaign, which a re-run changes.

The cache directory is input like any other: an entry that does not decode, is larger
than `MAX_ENTRY_BYTES`, names another key than its file, whose seal (an HMAC under the
cache's own secret) does not verify, or is past its expiry is a miss (with one warning
where it is damaged), never a crash or another request's answer. The directory holds at
most `MAX_CACHE_BYTES`; past it the oldest entries are removed.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, ValidationError

from ._dev_cache_disk import MAX_CACHE_BYTES, cache_secret, evict_over, seal, warn_once
from ._models import Completion, GenerationParams, Message, ToolDefinition, messages_to_json
from ._wrapper import ProviderWrapper

__all__ = [
    "MAX_CACHE_BYTES",
    "MAX_ENTRY_BYTES",
    "CachedAnswer",
    "DevCached",
    "ModelCache",
    "request_key",
]

log = logging.getLogger(__name__)

MAX_ENTRY_BYTES = 4 << 20
"""The largest entry read or written: an answer must fit in one event (1 MiB) anyway."""

_HINTS = frozenset({"cache_key", "stable_messages"})
"""Generation settings that do not change the answer (see the module's docstring)."""


def request_key(
    *,
    kind: str,
    model: str,
    base_url: str,
    epoch: int,
    messages: Sequence[Message],
    tools: Sequence[ToolDefinition],
    params: GenerationParams,
    sample: int | None = None,
) -> str:
    """The sha256 (hex) of the canonical JSON of a request's answer-deciding inputs
    (`sample`: a judge's sample index, so that its samples stay separate draws)."""
    inputs = {
        "kind": kind,
        "model": model,
        "base_url": base_url,
        "epoch": epoch,
        "sample": sample,
        "messages": messages_to_json(messages),
        "tools": [t.model_dump(mode="json") for t in tools],
        "params": params.model_dump(mode="json", exclude=set(_HINTS)),
    }
    canonical = json.dumps(inputs, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


class CachedAnswer(BaseModel):
    """One entry on disk: the answer, the key of the request it answered, when."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    key: str = Field(pattern=r"^[0-9a-f]{64}$")
    """The request's key, checked against the file's name on every read."""
    stored_at: AwareDatetime
    completion: Completion
    seal: str = ""
    """HMAC-SHA256 of the key, time and answer under the cache's secret (`seal`)."""

    def sealed_by(self, secret: bytes) -> str:
        """The seal this entry's fields should carry under `secret`."""
        stored_at = self.stored_at.isoformat()
        return seal(secret, self.key, stored_at, self.completion.model_dump_json())


@dataclass(frozen=True)
class ModelCache:
    """Cached answers under `root` (``<root>/<2 hex>/<key>.json``), each served for `ttl`,
    at most `max_bytes` of them in all."""

    root: Path
    ttl: timedelta
    max_bytes: int = MAX_CACHE_BYTES

    def path(self, key: str) -> Path:
        """Where the answer to the request with this key lives."""
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str, *, now: datetime | None = None) -> Completion | None:
        """The answer stored for `key`, or None (absent, expired or damaged: a miss)."""
        path = self.path(key)
        raw = self._read(path)
        if raw is None:
            return None
        try:
            entry = CachedAnswer.model_validate_json(raw)
        except ValidationError as e:
            n = e.error_count()
            warn_once(path, raw, "model cache entry %s does not decode (%d errors): a miss", n)
            return None
        if entry.key != key:
            warn_once(
                path, raw, "model cache entry %s answers another request (%s): a miss", entry.key
            )
            return None
        secret = cache_secret(self.root)
        if secret is None:
            return None
        if not hmac.compare_digest(entry.seal, entry.sealed_by(secret)):
            warn_once(path, raw, "model cache entry %s was changed since it was stored: a miss")
            return None
        age = (now or datetime.now(UTC)) - entry.stored_at
        if age > self.ttl or age < -timedelta(minutes=5):  # stored "in the future": untrusted
            return None
        return entry.completion.model_copy(update={"cached_answer": True})

    def _read(self, path: Path) -> bytes | None:
        """The entry's bytes, or None when absent, unreadable or over the size bound."""
        try:
            # O_NOFOLLOW: an entry is a plain file written here, never a link elsewhere.
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        except FileNotFoundError:
            return None
        except OSError as e:
            warn_once(path, str(e), "model cache entry %s cannot be opened (%s): a miss", e)
            return None
        with os.fdopen(fd, "rb") as f:
            raw = f.read(MAX_ENTRY_BYTES + 1)
        if len(raw) > MAX_ENTRY_BYTES:
            warn_once(path, raw, "model cache entry %s is over %d bytes: a miss", MAX_ENTRY_BYTES)
            return None
        return raw

    def put(self, key: str, completion: Completion, *, now: datetime | None = None) -> None:
        """Store the answer to `key` (atomically: a reader sees the old entry or the new);
        an answer too large, or a cache that cannot be written, is only warned about.
        Past `max_bytes` in all, the oldest entries are removed."""
        secret = cache_secret(self.root)
        if secret is None:
            return
        entry = CachedAnswer(key=key, stored_at=now or datetime.now(UTC), completion=completion)
        entry = entry.model_copy(update={"seal": entry.sealed_by(secret)})
        data = entry.model_dump_json().encode()
        if len(data) > MAX_ENTRY_BYTES:
            log.warning(
                "answer to %s is %d bytes, over the cache's bound: not cached", key, len(data)
            )
            return
        path = self.path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=path.parent, suffix=".tmp", delete=False) as f:
                f.write(data)
            os.replace(f.name, path)
        except OSError as e:
            log.warning("model cache entry %s could not be written (%s)", path, e)
            return
        evict_over(self.root, len(data), self.max_bytes)


@dataclass(kw_only=True)
class DevCached(ProviderWrapper):
    """A model client that answers from `cache` what it was asked before (same key), and
    asks `inner` otherwise, storing the answer. Its answers from the cache are marked
    `Completion.cached_answer`."""

    cache: ModelCache
    base_url: str
    """The endpoint `inner` reaches (a different server may answer differently)."""
    epoch: int
    """The run's epoch: each epoch is its own draw, so epochs never share answers."""
    sample: int | None = None
    """A judge's sample index (None for an agent): each sample is its own draw too."""

    async def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition] = (),
        params: GenerationParams | None = None,
    ) -> Completion:
        """The cached answer to this request, or the wrapped client's (then cached)."""
        params = params or GenerationParams()
        key = request_key(
            kind=self.kind,
            model=self.model,
            base_url=self.base_url,
            epoch=self.epoch,
            sample=self.sample,
            messages=messages,
            tools=tools,
            params=params,
        )
        # Entries are small files on a local disk: read and written inline.
        cached = self.cache.get(key)
        if cached is not None:
            return cached
        completion = await self.inner.complete(messages, tools, params)
        self.cache.put(key, completion)
        return completion
