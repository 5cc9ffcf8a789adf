"""The verdict tables of a snapshot, kept beside it so a report after it rebuilds only
the runs whose verdicts changed.

The four tables built from verdicts (``judgments``, ``verdicts``, ``tags``, ``checks``)
took a second of every 10x report, most of an incremental one's table building. A
snapshot writes them (Arrow IPC) with what their rows were built from: every verdict's
sequence and run, every run's (task, agent) and every judge's registered
family. A later build keeps the cached rows of a run only when all of that is unchanged
for it (a verdict's record is fixed by the sequence of the event that told it), builds
the rows of every other run from the state, and sorts the two together into the order a
full build gives. A judge's family changed makes the judgments table a full build.

Like the snapshot it is a cache, never evidence: one whose bytes do not match the hash
the snapshot's header names is ignored, and the tables are built from the state.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import polars as pl

from .state import State, VerdictRecord

__all__ = ["VERDICT_TABLES", "FrameCache", "dirty_runs", "spliced"]

VERDICT_TABLES = ("judgments", "verdicts", "tags", "checks")

_KEYS = {"sequence": pl.Int64, "run_id": pl.String}
_RUNS = {"run_id": pl.String, "task_id": pl.String, "agent_id": pl.String}
_FAMILIES = {"judge_id": pl.String, "family": pl.String}


def _keys(state: State) -> pl.DataFrame:
    rows = [(v.sequence, v.run_id) for v in state.verdicts.values()]
    return pl.DataFrame(rows, schema=_KEYS, orient="row")


def _runs(state: State) -> pl.DataFrame:
    rows = [(r.run_id, r.task_id, r.agent_id) for r in state.runs.values()]
    return pl.DataFrame(rows, schema=_RUNS, orient="row")


def _families(state: State) -> pl.DataFrame:
    rows = sorted((j.judge_id, j.family) for j in state.judges.values())
    return pl.DataFrame(rows, schema=_FAMILIES, orient="row")


@dataclass(frozen=True, slots=True)
class FrameCache:
    """The verdict tables as of a snapshot, and what their rows were built from."""

    tables: dict[str, pl.DataFrame]
    keys: pl.DataFrame
    runs: pl.DataFrame
    families: pl.DataFrame

    @classmethod
    def of(cls, state: State, table: Callable[[str], pl.DataFrame]) -> FrameCache:
        """The cache of `state`, its tables read through `table` (a projection's)."""
        tables = {name: table(name) for name in VERDICT_TABLES}
        return cls(tables, _keys(state), _runs(state), _families(state))

    def to_bytes(self) -> bytes:
        """One JSON line naming each part's length, then the parts (Arrow IPC, zstd: a tenth
        of the bytes, and less time to read than uncompressed ones take to hash)."""
        parts = {**self.tables, "_keys": self.keys, "_runs": self.runs, "_families": self.families}
        blobs: dict[str, bytes] = {}
        for name, frame in parts.items():
            buf = io.BytesIO()
            frame.write_ipc(buf, compression="zstd")
            blobs[name] = buf.getvalue()
        head = json.dumps({name: len(b) for name, b in blobs.items()}).encode()
        return head + b"\n" + b"".join(blobs.values())

    @classmethod
    def from_bytes(cls, data: bytes) -> FrameCache:
        """What :meth:`to_bytes` wrote; ValueError when it is not that."""
        end = data.find(b"\n", 0, 4096)
        if end < 0:
            raise ValueError("frame cache: no header line")
        lengths = json.loads(data[:end])
        names = [*VERDICT_TABLES, "_keys", "_runs", "_families"]
        if not isinstance(lengths, dict) or list(lengths) != names:
            raise ValueError("frame cache: not this layout")
        if not all(type(n) is int and n >= 0 for n in lengths.values()):
            raise ValueError("frame cache: bad lengths")
        if end + 1 + sum(lengths.values()) != len(data):
            raise ValueError("frame cache: lengths do not fit the bytes")
        frames: dict[str, pl.DataFrame] = {}
        at = end + 1
        for name, n in lengths.items():
            try:
                frames[name] = pl.read_ipc(io.BytesIO(data[at : at + n]))
            except Exception as e:  # polars raises its own errors for damaged IPC
                raise ValueError(f"frame cache: {name}: {e}") from e
            at += n
        expect = {"_keys": _KEYS, "_runs": _RUNS, "_families": _FAMILIES}
        for name, schema in expect.items():
            if dict(frames[name].schema) != schema:
                raise ValueError(f"frame cache: {name} has another schema")
        tables = {name: frames[name] for name in VERDICT_TABLES}
        return cls(tables, frames["_keys"], frames["_runs"], frames["_families"])


def dirty_runs(cache: FrameCache, state: State) -> set[str]:
    """Runs whose cached verdict rows may no longer hold: a verdict of theirs new, gone or
    told again (a record is the one message at its sequence), or their task or agent
    changed."""
    dirty: set[str] = set()
    told = dict(zip(cache.keys["sequence"].to_list(), cache.keys["run_id"].to_list(), strict=True))
    for v in state.verdicts.values():
        if told.pop(v.sequence, None) != v.run_id:
            dirty.add(v.run_id)
    dirty.update(told.values())  # cached verdicts the state no longer holds
    r = cache.runs
    was = dict(
        zip(
            r["run_id"].to_list(),
            zip(r["task_id"].to_list(), r["agent_id"].to_list(), strict=True),
            strict=True,
        )
    )
    for run in state.runs.values():
        if was.pop(run.run_id, None) != (run.task_id, run.agent_id):
            dirty.add(run.run_id)
    dirty.update(was)
    return dirty


def spliced(
    cache: FrameCache,
    state: State,
    dirty: set[str],
    name: str,
    schema: dict[str, Any],
    build: Callable[[list[VerdictRecord]], pl.DataFrame],
    ordered: Callable[[Iterable[VerdictRecord]], list[VerdictRecord]],
) -> pl.DataFrame | None:
    """Table `name` from the cache, its `dirty` runs' rows built from the state; None when
    the cache cannot serve it (another schema; for judgments, a judge's family changed).

    `build` makes the table's rows of some verdicts (in the order given), `ordered`
    sorts verdicts as a full build walks them.
    """
    cached = cache.tables[name]
    if dict(cached.schema) != schema:
        return None
    if name == "judgments" and not _families(state).equals(cache.families):
        return None
    kept = cached.filter(~pl.col("run_id").is_in(list(dirty)))
    fresh = build(ordered(v for v in state.verdicts.values() if v.run_id in dirty))
    # A run's rows are all kept or all fresh, each run's in the full build's order, so a
    # stable sort by run is that order (a sort by the whole key took twice as long).
    return pl.concat([kept, fresh]).sort("run_id", maintain_order=True)
