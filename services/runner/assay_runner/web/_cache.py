"""The campaign web cache: answers kept by normalised request, for record and replay.

The cache holds no state of its own: every answer is a `WebSource` on the step that
received it (its bytes as blobs), so a campaign's cache is read back from its steps on
the log, first answer per key kept. A frozen copy (a *snapshot*) is one JSON blob listing
the sources; exported with their blobs as a tar, it travels with the campaign's tasks and
is replayed by naming its hash (`web.snapshot`). `assay run` copies a snapshot and its
blobs from the home's store into its new run directory's (`copy_snapshot`).
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import tarfile
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from pydantic import TypeAdapter, ValidationError

from assay.bus import Bus
from assay.store import BlobStore
from assay_schemas import AgentStepLogged, InvalidInput, WebSource, describe_validation

__all__ = [
    "MISS_PREFIX",
    "SNAPSHOT_MAX_SOURCES",
    "WebIndex",
    "copy_snapshot",
    "export_snapshot",
    "fetch_key",
    "freeze",
    "import_snapshot",
    "index_from_log",
    "index_from_snapshot",
    "normalise_url",
    "search_key",
    "snapshot_blobs",
    "snapshot_bytes",
]

MISS_PREFIX = "not in this campaign's web"
"""A replay miss's error: never itself an entry of a cache."""
SNAPSHOT_MAX_SOURCES = 100_000
_SOURCES = TypeAdapter(list[WebSource])

WebIndex = dict[str, WebSource]
"""Normalised request key -> the first answer kept for it."""


def normalise_url(url: str) -> str:
    """The URL as one key: scheme and host lowercased, default port and fragment dropped,
    empty path as `/`, query parameters sorted."""
    try:
        p = urlsplit(url.strip())
        port = p.port
    except ValueError:
        return url.strip()
    host = (p.hostname or "").rstrip(".").lower()
    if ":" in host:
        host = f"[{host}]"
    default = {"http": 80, "https": 443}.get(p.scheme.lower())
    netloc = host if port in (None, default) else f"{host}:{port}"
    query = urlencode(sorted(parse_qsl(p.query, keep_blank_values=True)))
    return urlunsplit((p.scheme.lower(), netloc, p.path or "/", query, ""))


def _key(*parts: str) -> str:
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()


def fetch_key(url: str) -> str:
    """The cache key of a fetch."""
    return _key("fetch", normalise_url(url))


def search_key(engine: str, query: str) -> str:
    """The cache key of a search on one engine (kind, URL and result count)."""
    return _key("search", engine, " ".join(query.split()))


def _add(index: WebIndex, source: WebSource) -> None:
    if source.error is not None and source.error.startswith(MISS_PREFIX):
        return
    index.setdefault(source.key, source)


async def index_from_log(bus: Bus, campaign_id: str) -> WebIndex:
    """A campaign's cache: every source on its logged steps, first per key (log order)."""
    index: WebIndex = {}
    subject = bus.subjects.event("AgentStepLogged", campaign_id, "*")
    async for logged in bus.replay(subject=subject):
        if isinstance(logged.event, AgentStepLogged):
            for result in logged.event.tool_results:
                for source in result.sources:
                    _add(index, source)
    return index


def _parse_snapshot(data: bytes, where: str) -> list[WebSource]:
    try:
        sources = _SOURCES.validate_json(data)
    except ValidationError as e:
        # One line, no value echoed back: the blob may be anything a store holds.
        raise InvalidInput(
            f"web snapshot {where}: not a list of web sources: {describe_validation(e)}"
        ) from e
    if len(sources) > SNAPSHOT_MAX_SOURCES:
        raise InvalidInput(f"web snapshot {where}: over {SNAPSHOT_MAX_SOURCES} sources")
    return sources


async def index_from_snapshot(store: BlobStore, sha256: str) -> WebIndex:
    """The cache a snapshot blob holds."""
    data = await asyncio.to_thread(store.get_bytes, sha256)
    index: WebIndex = {}
    for source in _parse_snapshot(data, sha256[:12]):
        _add(index, source)
    return index


def snapshot_bytes(index: WebIndex) -> bytes:
    """A cache as a snapshot: its sources as one JSON list, in key order (one cache, one blob)."""
    ordered = sorted(index.values(), key=lambda s: s.key)
    return _SOURCES.dump_json(ordered)


async def freeze(bus: Bus, store: BlobStore, campaign_id: str) -> tuple[str, int]:
    """Store the campaign's cache as a snapshot blob: (its sha256, how many sources)."""
    index = await index_from_log(bus, campaign_id)
    info = await asyncio.to_thread(store.put_bytes, snapshot_bytes(index))
    return info.sha256, len(index)


def _blobs(source: WebSource) -> list[str]:
    return [s for s in (source.body_sha256, source.text_sha256) if s]


def snapshot_blobs(store: BlobStore, sha256: str) -> list[str]:
    """The blobs a stored snapshot names, sorted; BlobNotFound when the snapshot itself is
    not in the store, InvalidInput when that blob is no snapshot."""
    sources = _parse_snapshot(store.get_bytes(sha256), sha256[:12])
    return sorted({b for s in sources for b in _blobs(s)})


def copy_snapshot(source: BlobStore, dest: BlobStore, sha256: str) -> int:
    """Copy a snapshot and every blob it names from one store into another (each read
    verified against its hash, each written re-hashed); how many blobs it names."""
    wanted = snapshot_blobs(source, sha256)
    for sha in [*wanted, sha256]:  # the snapshot last: present, it is whole
        if not dest.exists(sha):
            dest.put_bytes(source.get_bytes(sha))
    return len(wanted)


def export_snapshot(store: BlobStore, data: bytes, dest: Path) -> int:
    """Write a snapshot and every blob it names as a tar (`snapshot.json`, `blobs/<sha>`);
    how many sources it holds."""
    sources = _parse_snapshot(data, str(dest))
    with tarfile.open(dest, "w") as tar:
        _add_member(tar, "snapshot.json", data)
        for sha in sorted({b for s in sources for b in _blobs(s)}):
            _add_member(tar, f"blobs/{sha}", store.get_bytes(sha))
    return len(sources)


def _add_member(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(data), 0o644
    tar.addfile(info, io.BytesIO(data))


def import_snapshot(store: BlobStore, path: Path, *, max_bytes: int = 2 * 1024**3) -> str:
    """Store an exported web snapshot's blobs (each re-hashed) and the snapshot; its sha256."""
    wanted: set[str] = set()
    snapshot: bytes | None = None
    total = 0
    try:
        with tarfile.open(path) as tar:
            for member in tar:
                if not member.isreg():
                    raise InvalidInput(f"web snapshot {path}: {member.name} is not a file")
                total += member.size
                if total > max_bytes:
                    raise InvalidInput(f"web snapshot {path}: over {max_bytes} bytes")
                f = tar.extractfile(member)
                data = f.read() if f is not None else b""
                if member.name == "snapshot.json":
                    snapshot = data
                    wanted = {b for s in _parse_snapshot(data, str(path)) for b in _blobs(s)}
                elif member.name.startswith("blobs/"):
                    info = store.put_bytes(data)
                    if info.sha256 != member.name.removeprefix("blobs/"):
                        raise InvalidInput(
                            f"web snapshot {path}: {member.name} does not match its hash"
                        )
                else:
                    raise InvalidInput(f"web snapshot {path}: unexpected member {member.name}")
    except (tarfile.TarError, OSError, EOFError) as e:
        raise InvalidInput(f"web snapshot {path}: not a readable tar: {e}") from e
    if snapshot is None:
        raise InvalidInput(f"web snapshot {path}: no snapshot.json")
    missing = sorted(b for b in wanted if not store.exists(b))
    if missing:
        raise InvalidInput(
            f"web snapshot {path}: {len(missing)} blob(s) missing, e.g. {missing[0][:12]}"
        )
    return store.put_bytes(snapshot).sha256
