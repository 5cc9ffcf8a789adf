"""Sealing a finished run: the backend measured and copied (``backends._snapshot``); here
the copy is stored.

The store step puts each planned file into the blob store, which hashes it while copying
it in: one read and one hash per file. That is safe because the snapshot is the manager's
own copy, which no sandbox can reach or change after the plan, and holds no more than the
caps allowed.

Paths in the seal (FileRef, Exclusion) are ``display_path``'s printable, JSON-safe form.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, NamedTuple

from assay.store import BlobStore
from assay_schemas import (
    FINAL_MESSAGE_INLINE_CHARS,
    SEAL_INLINE_BYTES,
    AgentFinished,
    Event,
    Exclusion,
    FileRef,
    SealManifest,
)

from .backends._snapshot import (
    PlannedFile,
    SealPlan,
    Snapshot,
    SnapshotCaps,
    display_path,
    plan_tree,
)

__all__ = [
    "PlannedFile",
    "Seal",
    "SealPlan",
    "answer_fields",
    "display_path",
    "plan_seal",
    "seal_fields",
    "seal_snapshot",
    "store_plan",
]


class Seal(NamedTuple):
    """What an ArtifactsSealed event records."""

    files: list[FileRef]
    excluded: list[Exclusion]


def plan_seal(
    root: Path,
    *,
    max_files: int = 10_000,
    max_total_bytes: int = 1 << 30,
    max_file_bytes: int | None = None,
) -> SealPlan:
    """Walk root (never following symlinks, reading no contents) and decide what to seal."""
    return plan_tree(root, SnapshotCaps(max_files, max_total_bytes, max_file_bytes))


def store_plan(root: Path, plan: SealPlan, store: BlobStore) -> Seal:
    """Put every planned file into the store (hashed there, once) and describe the seal."""
    files = []
    for f in plan.files:
        info = store.put_file(root / f.path)
        files.append(
            FileRef(
                path=display_path(f.path),
                sha256=info.sha256,
                size=info.size,
                media_type=f.media_type,
            )
        )
    return Seal(files, list(plan.excluded))


def seal_fields(seal: Seal, store: BlobStore) -> dict[str, Any]:
    """The ArtifactsSealed fields for a seal: inline when small, else a manifest blob, so
    the event stays small however many files an agent leaves."""
    manifest = SealManifest(files=seal.files, excluded=seal.excluded)
    data = manifest.model_dump_json().encode()
    if len(data) <= SEAL_INLINE_BYTES:
        return {"files": seal.files, "excluded": seal.excluded}
    info = store.put_bytes(data)
    ref = FileRef(
        path="seal-manifest.json", sha256=info.sha256, size=info.size, media_type="application/json"
    )
    return {"files": [], "excluded": [], "manifest": ref, "file_count": len(seal.files)}


def answer_fields(ended: Event, store: BlobStore) -> dict[str, Any]:
    """The ArtifactsSealed fields of the run's final answer, as the runner bounded it. An
    AgentFinished logged before answers were bounded may inline a long one: bounded here, so
    that the seal still fits one event."""
    if not isinstance(ended, AgentFinished):
        return {}
    text, ref = ended.final_message, ended.final_message_blob
    if ref is None and len(text) > FINAL_MESSAGE_INLINE_CHARS:
        info = store.put_bytes(text.encode(errors="replace"))
        ref = FileRef(
            path="final-message.txt", sha256=info.sha256, size=info.size, media_type="text/plain"
        )
    return {
        "final_message": text[:FINAL_MESSAGE_INLINE_CHARS],
        "final_message_truncated": ref is not None,
        "final_message_blob": ref,
    }


def seal_snapshot(snapshot: Snapshot, store: BlobStore) -> Seal:
    """Store a snapshot the backend already cut to the caps; the snapshot is removed after."""
    try:
        return store_plan(snapshot.path, snapshot.plan, store)
    finally:
        shutil.rmtree(snapshot.path, ignore_errors=True)
