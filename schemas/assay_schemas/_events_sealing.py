"""The sealing of a run's artifacts."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ._domain import BlobRef, FileRef
from ._envelope import Event
from ._event_text import _n
from ._ids import Identifier

__all__ = [
    "SEAL_INLINE_BYTES",
    "ArtifactsSealed",
    "Exclusion",
    "SealManifest",
]


class Exclusion(BaseModel):
    """A workspace entry that was not sealed, and why."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    path: str
    reason: str


SEAL_INLINE_BYTES = 256 * 1024
"""A seal manifest (files + exclusions) larger than this, encoded, goes to the blob store."""


class SealManifest(BaseModel):
    """What a seal holds and leaves out: inline in the event, or a blob it references."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    files: list[FileRef] = Field(default_factory=list)
    excluded: list[Exclusion] = Field(default_factory=list)


class ArtifactsSealed(Event):
    """Every file the run left in /workspace, content-addressed and immutable.

    An agent decides how many files it leaves, so a manifest over ``SEAL_INLINE_BYTES``
    is stored as a blob referenced by ``manifest`` (``files``/``excluded`` then empty):
    read the seal only through ``resolved`` so that both forms look the same.
    """

    event_type: Literal["ArtifactsSealed"] = "ArtifactsSealed"
    written_by = ("sandbox-manager",)
    files: list[FileRef]
    excluded: list[Exclusion] = Field(default_factory=list)
    manifest: FileRef | None = None
    """The blob holding the whole SealManifest, when it was too large to inline."""
    file_count: int | None = Field(default=None, ge=0)
    """How many files the seal holds (set with ``manifest``; else ``len(files)``)."""
    final_message: str = ""
    final_message_truncated: bool = False
    """Copied from AgentFinished: ``final_message`` is a prefix of ``final_message_blob``."""
    final_message_blob: FileRef | None = None
    """Copied from AgentFinished: the whole final message, when too long to inline."""
    agent_id: Identifier
    epoch: int = Field(ge=0)
    sandbox_id: str = ""
    outcome: Literal["finished", "failed"] = "finished"

    @property
    def n_files(self) -> int:
        """Files in the seal, whichever form it has."""
        return self.file_count if self.file_count is not None else len(self.files)

    def resolved(self, load: Callable[[str], bytes]) -> ArtifactsSealed:
        """This seal with its manifest inline (``load`` reads a blob by sha256, verified)."""
        if self.manifest is None:
            return self
        full = SealManifest.model_validate_json(load(self.manifest.sha256))
        return self.model_copy(update={"files": full.files, "excluded": full.excluded})

    def blob_refs(self) -> list[BlobRef]:
        manifest = [("seal_manifest", self.manifest)] if self.manifest is not None else []
        blob = self.final_message_blob
        answer = [("final_message", blob)] if blob is not None else []
        return manifest + answer + [("artifact", f) for f in self.files]

    def summary_line(self) -> str:
        excluded = f", {len(self.excluded)} excluded" if self.excluded else ""
        return f"{self.outcome}: {_n(len(self.files), 'file')} sealed{excluded}"
