"""The sealed files of one run, read-only, fetched from the blob store with hashes verified.

Judges never see a live sandbox: every byte comes from the content-addressed store, whose
`get_bytes` checks the sha256, and from the manifest of `ArtifactsSealed`.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field

from assay.store import BlobInfo, BlobStore
from assay_schemas import FileRef, StoreError, WebSource

from .delimit import quote_name

__all__ = ["SOURCE_PREFIX", "CountingStore", "SealedFiles", "normalize_path", "source_ref"]

SOURCE_PREFIX = "web-source:"
"""How a judge names a web source the agent read (`web-source:1`): a name read_file opens,
looked up among the run's sources, never the workspace."""


MAX_SOURCE_LINES = 200
"""Web sources listed one by one in a judge's case (the rest are counted, still readable)."""


def source_ref(number: int, source: WebSource) -> FileRef:
    """A web source as a readable file: the whole text the agent was given."""
    return FileRef(
        path=f"{SOURCE_PREFIX}{number}",
        sha256=source.text_sha256,
        size=source.text_size,
        media_type="text/markdown",
    )


def normalize_path(path: str) -> str:
    """A workspace path without `/workspace/`, `./` or a leading slash."""
    path = path.strip()
    for prefix in ("/workspace/", "workspace/", "./", "/"):
        if path.startswith(prefix):
            path = path[len(prefix) :]
    return path


class CountingStore:
    """A blob store wrapper that counts the bytes read through it (for benchmarks)."""

    def __init__(self, inner: BlobStore) -> None:
        self.inner = inner
        self.bytes_read = 0
        self.reads = 0
        self._lock = threading.Lock()

    def get_bytes(self, sha256: str) -> bytes:
        """Read (and verify) a blob, counting its size."""
        data = self.inner.get_bytes(sha256)
        with self._lock:
            self.bytes_read += len(data)
            self.reads += 1
        return data

    def put_bytes(self, data: bytes) -> BlobInfo:
        """Store bytes."""
        return self.inner.put_bytes(data)

    def put_file(self, path: object) -> BlobInfo:
        """Store a file."""
        return self.inner.put_file(path)  # type: ignore[arg-type]

    def get_file(self, sha256: str, dest: object) -> None:
        """Stream a blob into a file."""
        self.inner.get_file(sha256, dest)  # type: ignore[arg-type]

    def exists(self, sha256: str) -> bool:
        """Whether a blob is stored."""
        return self.inner.exists(sha256)

    def discard_corrupted(self, sha256: str) -> bool:
        """Remove a blob whose bytes do not match its address."""
        return self.inner.discard_corrupted(sha256)


@dataclass(kw_only=True)
class SealedFiles:
    """A run's manifest plus lazy, cached, verified reads; remembers what was opened."""

    files: list[FileRef]
    store: BlobStore
    attachments: set[tuple[str, str]] = field(default_factory=set)
    """(path, sha256) of the task's attachments, to mark them in listings."""
    sources: list[WebSource] = field(default_factory=list)
    """The web answers the agent received, in order (`web-source:N` is the N-th)."""
    opened: list[str] = field(default_factory=list)
    """Paths opened through a tool, in first-open order (the observed evidence)."""
    _cache: dict[str, bytes] = field(default_factory=dict, repr=False)

    def ref(self, path: str) -> FileRef:
        """The manifest entry for `path` (leading `/workspace/` and `./` are ignored)."""
        wanted = normalize_path(path)
        if wanted.startswith(SOURCE_PREFIX):
            for number, source in enumerate(self.sources, 1):
                if wanted == f"{SOURCE_PREFIX}{number}":
                    return source_ref(number, source)
            raise KeyError(f"no web source {path!r}; the case lists the run's web sources")
        for ref in self.files:
            if ref.path == wanted:
                return ref
        raise KeyError(f"no file {path!r} in the sealed workspace; call list_files")

    def is_attachment(self, ref: FileRef) -> bool:
        """Whether this file is an unchanged attachment of the task."""
        return (ref.path, ref.sha256) in self.attachments

    async def read(self, ref: FileRef) -> bytes:
        """The file's bytes (verified by the store) and mark it opened."""
        if ref.path not in self.opened:
            self.opened.append(ref.path)
        data = self._cache.get(ref.sha256)
        if data is None:
            try:
                data = await asyncio.to_thread(self.store.get_bytes, ref.sha256)
            except StoreError as e:
                # Same class (missing, corrupted, or the store being down), with the file named.
                raise type(e)(f"sealed file {ref.path} ({ref.sha256[:12]}): {e}") from e
            self._cache[ref.sha256] = data
        return data

    def manifest_lines(self) -> list[str]:
        """One line per sealed file: path (quoted and escaped unless plain), size, media type,
        short hash, attachment mark."""
        return [
            f"- {quote_name(r.path)}  ({r.size} bytes, {r.media_type}, sha256 {r.sha256[:12]})"
            + ("  [attachment, unchanged]" if self.is_attachment(r) else "")
            for r in sorted(self.files, key=lambda f: f.path)
        ]

    def source_names(self) -> list[str]:
        """The names a judge opens and cites the run's web sources by."""
        return [f"{SOURCE_PREFIX}{n}" for n in range(1, len(self.sources) + 1)]

    def source_lines(self) -> list[str]:
        """One line per web source: its name for read_file, what was asked, the answer's
        URL, status, type and hash (URLs and queries are the agent's: quoted when not plain)."""
        lines = []
        for number, s in enumerate(self.sources[:MAX_SOURCE_LINES], 1):
            answer = f"HTTP {s.status}" if s.status is not None else "no response"
            kind = f"{s.media_type}, " if s.media_type else ""
            url = f" -> {quote_name(s.url)}" if s.url and s.url != s.request else ""
            problem = f"; {quote_name(s.error[:200])}" if s.error else ""
            lines.append(
                f"- {SOURCE_PREFIX}{number}  {s.kind} {quote_name(s.request)}{url}  ({answer}, "
                f"{kind}fetched {s.fetched_at:%Y-%m-%d %H:%M}Z, {s.text_size} bytes of text, "
                f"sha256 {s.text_sha256[:12]}{problem})"
            )
        if len(self.sources) > MAX_SOURCE_LINES:
            lines.append(
                f"- ({len(self.sources) - MAX_SOURCE_LINES} more web sources, "
                f"{SOURCE_PREFIX}{MAX_SOURCE_LINES + 1} to {SOURCE_PREFIX}{len(self.sources)})"
            )
        return lines
