"""Snapshots of the folded state under ``<home>/aggregator/``, written atomically.

A snapshot records which stream and subject prefix it folded, the last applied
sequence and the state itself; a restart loads it and continues from the next
sequence. A snapshot of another stream (or an unreadable one) is ignored: a full
rebuild from sequence 1 is always possible.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from pathlib import Path
from typing import NamedTuple

from assay.config import Settings
from assay.security.signing import trust_for

from .state import State, state_from_json, state_to_json

__all__ = ["AggregatorPaths", "load_snapshot", "paths_for", "save_snapshot", "write_atomic"]

log = logging.getLogger("assay.aggregator.snapshot")


class AggregatorPaths(NamedTuple):
    """Where the live aggregator keeps its files."""

    folder: Path
    snapshot: Path
    report: Path
    """The live aggregator's latest report (canonical JSON)."""


def paths_for(settings: Settings) -> AggregatorPaths:
    """The aggregator's files for these settings (one set per stream and prefix)."""
    folder = settings.home / "aggregator"
    stem = f"{settings.stream}.{settings.subject_prefix}"
    return AggregatorPaths(folder, folder / f"{stem}.snapshot.json", folder / f"{stem}.report.json")


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
    """Write the state with the stream it belongs to; return the path."""
    doc = {
        "stream": settings.stream,
        "subject_prefix": settings.subject_prefix,
        "state": state_to_json(state),
    }
    path = paths_for(settings).snapshot
    write_atomic(path, json.dumps(doc, separators=(",", ":")).encode())
    return path


def load_snapshot(settings: Settings) -> State | None:
    """The snapshot's state, or None when there is none usable for this stream."""
    path = paths_for(settings).snapshot
    try:
        doc = json.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        log.warning("ignoring unreadable aggregator snapshot %s: %s", path, e)
        return None
    if doc.get("stream") != settings.stream or doc.get("subject_prefix") != settings.subject_prefix:
        log.warning("ignoring snapshot %s of another stream", path)
        return None
    try:
        state = state_from_json(doc["state"])
    except (KeyError, TypeError, ValueError) as e:
        log.warning("ignoring incompatible aggregator snapshot %s: %s", path, e)
        return None
    trust = trust_for(settings)
    if state.trust_root != (trust.operator_key if trust else ""):
        log.warning("ignoring snapshot %s checked against another trust root", path)
        return None
    return state
