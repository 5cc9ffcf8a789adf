"""The run's final answer as judges read it: inline, or from its blob when it was too long."""

from __future__ import annotations

import asyncio

from assay.store import BlobStore
from assay_schemas import ArtifactsSealed

__all__ = ["final_answer"]

_UTF8_MAX = 4
"""Bytes per character at most in UTF-8: reading this many per wanted character suffices."""


async def final_answer(sealed: ArtifactsSealed, store: BlobStore, max_chars: int) -> str:
    """At most `max_chars` of the final message; the whole text comes from the blob when
    the event inlines only its start (``final_message_truncated``).

    A missing or corrupt blob raises (BlobNotFound/BlobCorrupted): judging the inline prefix
    instead would judge an answer the agent did not give.
    """
    ref = sealed.final_message_blob
    if ref is None:
        return sealed.final_message[:max_chars]
    data = await asyncio.to_thread(store.get_bytes, ref.sha256)
    # Decode only what can be shown: a cut multi-byte character at the end is dropped.
    return data[: _UTF8_MAX * max_chars].decode(errors="ignore")[:max_chars]
