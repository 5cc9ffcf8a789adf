"""Sealing a finished run: snapshot the workspace, store every file, describe the seal."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import NamedTuple

from assay.store import BlobStore
from assay_schemas import Exclusion, FileRef, SandboxSpec

from .sealing import display_path, plan_seal

__all__ = ["Seal", "seal_snapshot"]


class Seal(NamedTuple):
    """What an ArtifactsSealed event records."""

    files: list[FileRef]
    excluded: list[Exclusion]


def seal_snapshot(snapshot: Path, store: BlobStore, spec: SandboxSpec) -> Seal:
    """Put every sealable file of a snapshot into the store; the snapshot is removed after.

    The plan never follows symlinks, so nothing outside the workspace can be sealed.
    """
    try:
        plan = plan_seal(
            snapshot, max_files=spec.max_artifact_files, max_total_bytes=spec.max_artifact_bytes
        )
        files = []
        for f in plan.files:
            info = store.put_file(snapshot / os.fsencode(f.path).decode("utf-8", "surrogateescape"))
            shown = display_path(f.path)
            files.append(
                FileRef(path=shown, sha256=info.sha256, size=info.size, media_type=f.media_type)
            )
        excluded = [Exclusion(path=display_path(e.path), reason=e.reason) for e in plan.excluded]
        return Seal(files, excluded)
    finally:
        shutil.rmtree(snapshot, ignore_errors=True)
