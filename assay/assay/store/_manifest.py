"""Helpers that turn files into FileRefs (path + content address + media type)."""

from __future__ import annotations

import mimetypes
from pathlib import Path, PurePosixPath

from assay_schemas import FileRef

from ._protocol import BlobStore

__all__ = ["media_type_of", "store_file"]

_EXTRA_TYPES = {
    ".tsv": "text/tab-separated-values",
    ".parquet": "application/vnd.apache.parquet",
    ".md": "text/markdown",
    ".py": "text/x-python",
    ".r": "text/x-r",
    ".ipynb": "application/x-ipynb+json",
    ".yaml": "application/yaml",
    ".yml": "application/yaml",
    ".xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    ".docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
}


def media_type_of(path: str | Path) -> str:
    """Media type from a file name (platform tables differ, so common science types are pinned)."""
    suffix = PurePosixPath(str(path)).suffix.lower()
    if suffix in _EXTRA_TYPES:
        return _EXTRA_TYPES[suffix]
    guessed, _ = mimetypes.guess_type(str(path), strict=False)
    return guessed or "application/octet-stream"


def store_file(store: BlobStore, source: Path, workspace_path: str) -> FileRef:
    """Put a file in the store and describe it as it sits in a workspace."""
    info = store.put_file(source)
    return FileRef(
        path=workspace_path,
        sha256=info.sha256,
        size=info.size,
        media_type=media_type_of(workspace_path),
    )
