"""Snapshots of the folded state under ``<home>/aggregator/``, written atomically.

A snapshot file is one header line and the state's JSON. The header names the layout
version, the stream (name, subject prefix, creation time) and the last sequence the
state covers, and the SHA-256 and length of the state bytes after it. A reader loads the
state and folds only the events after that sequence, so a report after N new events
costs N events of folding plus the statistics. Beside it, ``<stem>.frames`` holds the
state's verdict tables (`frame_cache`), named by their SHA-256 in the header, so that
report rebuilds only the runs the N events touched of those tables.

A snapshot is a cache, never evidence: one of another version, another stream (or the
same name made again), ahead of the stream, damaged (its bytes no longer match the
hash) or checked against another trust root is ignored with a warning, and the state is
rebuilt from sequence 1, which is always possible. `assay replay --verify` always
rebuilds from sequence 1 and compares.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from pathlib import Path
from typing import Any, NamedTuple

import orjson
from nats.js import JetStreamContext

from assay.bus import Bus
from assay.config import Settings
from assay.heap import collector_paused
from assay.security.controls import controls_key
from assay.security.signing import trust_for
from assay.store import open_store
from assay_report.frame_cache import FrameCache
from assay_report.projections import Projections
from assay_report.state import SNAPSHOT_VERSION, State, state_from_json, state_to_json

from .rebuild import fold_stream, head_sequence, stream_created

__all__ = [
    "AggregatorPaths",
    "load_snapshot",
    "paths_for",
    "read_projections",
    "resume_state",
    "save_snapshot",
    "write_atomic",
]

log = logging.getLogger("assay.aggregator.snapshot")

FORMAT = "assay-aggregator-snapshot"
MAX_HEADER = 4096
"""Bytes the header line may take; a longer first line is not a snapshot of ours."""


class AggregatorPaths(NamedTuple):
    """Where the live aggregator keeps its files."""

    folder: Path
    snapshot: Path
    report: Path
    """The live aggregator's latest report (canonical JSON)."""
    frames: Path
    """The snapshot's verdict tables (`frame_cache`), named by hash in its header."""


def paths_for(settings: Settings) -> AggregatorPaths:
    """The aggregator's files for these settings (one set per stream and prefix)."""
    folder = settings.home / "aggregator"
    stem = f"{settings.stream}.{settings.subject_prefix}"
    return AggregatorPaths(
        folder,
        folder / f"{stem}.snapshot",
        folder / f"{stem}.report.json",
        folder / f"{stem}.frames",
    )


def write_atomic(path: Path, data: bytes) -> None:
    """Write via a temporary file and rename, so readers never see half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def save_snapshot(settings: Settings, state: State) -> Path:
    """Write the state with the stream it covers and its hash; return the path.

    The verdict tables go beside it first (their hash in the header), so a snapshot
    never names tables that are not there yet."""
    body = json.dumps(state_to_json(state), separators=(",", ":")).encode()
    paths = paths_for(settings)
    frames = FrameCache.of(state, Projections(state).table).to_bytes()
    write_atomic(paths.frames, frames)
    header = {
        "format": FORMAT,
        "snapshot_version": SNAPSHOT_VERSION,
        "stream": settings.stream,
        "subject_prefix": settings.subject_prefix,
        "stream_created": state.stream_created,
        "last_sequence": state.last_sequence,
        "sha256": hashlib.sha256(body).hexdigest(),
        "size": len(body),
        "frames_sha256": hashlib.sha256(frames).hexdigest(),
    }
    path = paths.snapshot
    write_atomic(path, json.dumps(header, separators=(",", ":")).encode() + b"\n" + body)
    return path


def _header(path: Path, data: bytes) -> tuple[dict[str, Any], memoryview] | None:
    end = data.find(b"\n", 0, MAX_HEADER)
    if end < 0:
        log.warning("ignoring aggregator snapshot %s: no header line", path)
        return None
    try:
        header = json.loads(data[:end])
    except ValueError as e:
        log.warning("ignoring aggregator snapshot %s: unreadable header: %s", path, e)
        return None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        log.warning("ignoring aggregator snapshot %s: not a snapshot", path)
        return None
    return header, memoryview(data)[end + 1 :]  # a view: the body is tens of MB


def _decode(body: bytes | memoryview) -> State:
    """The state in a snapshot's body.

    orjson reads what ``json.dumps`` wrote in about half the time; the few things it
    refuses (NaN, integers past 64 bits, lone surrogates) fall back to ``json``, which
    reads every snapshot this module writes. The collector is off meanwhile: the body is
    millions of new containers, none of them garbage, and its passes over them took a
    third of the load.
    """
    with collector_paused():
        try:
            data = orjson.loads(body)
        except orjson.JSONDecodeError:
            data = json.loads(bytes(body))
        return state_from_json(data)


def load_snapshot(settings: Settings) -> State | None:
    """The snapshot's state, or None when there is none usable for this stream.

    Checks everything the file itself can tell (version, stream, hash, trust root);
    :func:`resume_state` also checks it against the stream as it stands.
    """
    path = paths_for(settings).snapshot
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as e:
        log.warning("ignoring unreadable aggregator snapshot %s: %s", path, e)
        return None
    parts = _header(path, data)
    if parts is None:
        return None
    header, body = parts
    if header.get("snapshot_version") != SNAPSHOT_VERSION:
        log.warning(
            "ignoring aggregator snapshot %s of version %r (this aggregator writes %d)",
            path,
            header.get("snapshot_version"),
            SNAPSHOT_VERSION,
        )
        return None
    if header.get("stream") != settings.stream or header.get("subject_prefix") != (
        settings.subject_prefix
    ):
        log.warning("ignoring snapshot %s of another stream", path)
        return None
    if header.get("size") != len(body) or header.get("sha256") != hashlib.sha256(body).hexdigest():
        log.warning("ignoring aggregator snapshot %s: its bytes do not match its hash", path)
        return None
    try:
        state = _decode(body)
    except (KeyError, TypeError, ValueError) as e:
        log.warning("ignoring incompatible aggregator snapshot %s: %s", path, e)
        return None
    if state.last_sequence != header.get("last_sequence") or state.stream_created != header.get(
        "stream_created"
    ):
        log.warning("ignoring aggregator snapshot %s: header and state disagree", path)
        return None
    trust = trust_for(settings)
    if state.trust_root != (trust.operator_key if trust else ""):
        log.warning("ignoring snapshot %s checked against another trust root", path)
        return None
    state.frame_cache = _frames(paths_for(settings).frames, header.get("frames_sha256"))
    state.controls_key = controls_key(settings)
    return state


def _frames(path: Path, sha256: object) -> FrameCache | None:
    """The snapshot's verdict tables if their file is the one its header names."""
    try:
        data = path.read_bytes()
    except OSError as e:
        log.warning("no verdict tables beside the snapshot (%s): they are built in full", e)
        return None
    if sha256 != hashlib.sha256(data).hexdigest():
        log.warning("ignoring verdict tables %s: not the ones the snapshot names", path)
        return None
    try:
        return FrameCache.from_bytes(data)
    except ValueError as e:
        log.warning("ignoring verdict tables %s: %s", path, e)
        return None


async def resume_state(js: JetStreamContext, settings: Settings) -> State | None:
    """The snapshot's state if it fits the stream as it stands now, else None.

    It fits when it was folded from this very stream (same creation time) and covers no
    sequence the stream does not hold.
    """
    state = load_snapshot(settings)
    if state is None:
        return None
    created = await stream_created(js, settings.stream)
    head = await head_sequence(js, settings.stream)
    if state.stream_created != created:
        log.warning("ignoring aggregator snapshot: stream %s was made again", settings.stream)
        return None
    if state.last_sequence > head:
        log.warning(
            "ignoring aggregator snapshot: it is ahead of the stream (%d > %d)",
            state.last_sequence,
            head,
        )
        return None
    return state


async def read_projections(settings: Settings, *, service: str, fresh: bool = False) -> Projections:
    """Projections of the whole log: the live snapshot caught up to the log's end, or with
    `fresh` a fold from sequence 1 (`assay report` and `assay replay` read these)."""
    async with Bus(settings, service=service) as bus:
        state = None if fresh else await resume_state(bus.js, settings)
        state = state or State(controls_key=controls_key(settings))
        state = await fold_stream(
            bus.js,
            bus.stream.name,
            bus.subjects.events,
            state=state,
            trust=trust_for(settings),
            load=open_store(settings).get_bytes,
        )
    return Projections(state)
