"""`assay replay --verify`: rebuild everything from sequence 1 in a fresh process and compare.

Two independent builds of the same log prefix are compared byte for byte:

1. the live path — the live aggregator's snapshot, caught up incrementally to the
   head ``H`` (an empty state when there is no snapshot);
2. a fresh process (``python -m assay_aggregator.verify``, settings on stdin) that
   folds the stream from sequence 1.

Both read blobs as the live aggregator does (`rebuild.blob_loader`): a seal whose
manifest is stored as a blob lists its files in each.

Compared: the canonical report JSON at ``H`` and a digest of every projection table at
``H``; and, when the live aggregator has written a report file at sequence ``L``, that
file against the fresh process's report at ``L``.
"""

from __future__ import annotations

import asyncio
import difflib
import hashlib
import json
import subprocess
import sys
from typing import Any, NamedTuple

from assay.bus import Bus
from assay.config import Settings
from assay.security.controls import controls_key
from assay.security.signing import trust_for
from assay_report.projections import Projections
from assay_report.report import build_report, report_json
from assay_report.state import State
from assay_report.statistics import DEFAULT_RESAMPLES, TaskAttribute

from .rebuild import blob_loader, fold_stream, head_sequence
from .snapshot import paths_for, resume_state

__all__ = ["Comparison", "ReportParams", "table_digests", "verify"]


class ReportParams(NamedTuple):
    """Parameters the compared reports are built with."""

    campaign: str | None = None
    group_by: TaskAttribute | None = None
    n_resamples: int = DEFAULT_RESAMPLES


class Comparison(NamedTuple):
    """One compared artifact: identical, or a diff."""

    name: str
    identical: bool
    diff: str


def table_digests(p: Projections) -> dict[str, str]:
    """sha256 of each projection table as NDJSON (frames are sorted by their keys)."""
    return {
        name: hashlib.sha256(df.write_ndjson().encode()).hexdigest()
        for name, df in sorted(p.tables().items())
    }


def _build(state: State, params: ReportParams) -> bytes:
    p = Projections(state)
    return report_json(
        build_report(
            p, campaign=params.campaign, group_by=params.group_by, n_resamples=params.n_resamples
        )
    )


def _diff(a: bytes, b: bytes, name: str, limit: int = 80) -> str:
    lines = difflib.unified_diff(
        _pretty(a), _pretty(b), fromfile=f"{name} (live)", tofile=f"{name} (fresh replay)", n=1
    )
    out = list(lines)
    if len(out) > limit:
        out = [*out[:limit], f"... {len(out) - limit} more diff lines\n"]
    return "".join(out)


def _pretty(data: bytes) -> list[str]:
    try:
        return (json.dumps(json.loads(data), indent=1, sort_keys=True) + "\n").splitlines(True)
    except ValueError:
        return data.decode(errors="replace").splitlines(True)


def _compare(name: str, live: bytes, fresh: bytes) -> Comparison:
    same = live == fresh
    return Comparison(name, same, "" if same else _diff(live, fresh, name))


Job = tuple[int, ReportParams]


async def _fresh(settings: Settings, jobs: list[Job], tables_at: int) -> dict[str, Any]:
    """Run the rebuild in a new interpreter, so nothing is shared with this process."""
    request = json.dumps(
        {
            "settings": settings.model_dump(mode="json"),
            "jobs": [[seq, p._asdict()] for seq, p in jobs],
            "tables_at": tables_at,
        }
    )
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "assay_aggregator.verify",
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    out, err = await proc.communicate(request.encode())
    if proc.returncode != 0:
        raise RuntimeError(
            f"fresh replay process failed ({proc.returncode}): {err.decode()[-2000:]}"
        )
    result: dict[str, Any] = json.loads(out)
    return result


def _live_file(settings: Settings) -> tuple[bytes, int, ReportParams] | None:
    """The live aggregator's report file, its sequence and the parameters it was built with."""
    path = paths_for(settings).report
    if not path.exists():
        return None
    data = path.read_bytes()
    doc = json.loads(data)
    n = int(doc["statistics"]["n_resamples"])
    return data, int(doc["log_sequence"]), ReportParams(None, doc.get("group_by"), n)


async def verify(settings: Settings, params: ReportParams | None = None) -> list[Comparison]:
    """Compare the live aggregator's state and report with a fresh replay from sequence 1.

    ``params`` default to those of the live report file (or the defaults without one).
    """
    live_file = _live_file(settings)
    params = params or (live_file[2] if live_file else ReportParams())
    async with Bus(settings, service="verify") as bus:
        head = await head_sequence(bus.js, bus.stream.name)
        state = await resume_state(bus.js, settings) or State(controls_key=controls_key(settings))
        await fold_stream(
            bus.js,
            bus.stream.name,
            bus.subjects.events,
            state=state,
            until=head,
            trust=trust_for(settings),
            load=blob_loader(settings),
        )
    jobs: list[Job] = [(head, params)]
    if live_file is not None:
        jobs.append((live_file[1], live_file[2]))
    fresh = await _fresh(settings, jobs, head)
    out = [_compare(f"report @ {head}", _build(state, params), fresh["reports"][0].encode())]
    for name, digest in table_digests(Projections(state)).items():
        theirs = fresh["tables"][name].encode()
        out.append(_compare(f"table {name} @ {head}", digest.encode(), theirs))
    if live_file is not None:
        data, seq, _ = live_file
        out.append(_compare(f"live report file @ {seq}", data, fresh["reports"][1].encode()))
    return out


async def _worker(request: dict[str, Any]) -> dict[str, Any]:
    settings = Settings(**request["settings"])
    jobs = [(int(seq), ReportParams(**p)) for seq, p in request["jobs"]]
    tables_at = int(request["tables_at"])
    reports: dict[int, str] = {}
    tables: dict[str, str] = {}
    state = State(controls_key=controls_key(settings))
    load = blob_loader(settings)
    async with Bus(settings, service="verify-fresh") as bus:
        for i, (seq, params) in sorted(enumerate(jobs), key=lambda j: j[1][0]):
            await fold_stream(
                bus.js,
                bus.stream.name,
                bus.subjects.events,
                state=state,
                until=seq,
                trust=trust_for(settings),
                load=load,
            )
            reports[i] = _build(state, params).decode()
            if seq == tables_at:
                tables = table_digests(Projections(state))
    return {"reports": [reports[i] for i in range(len(jobs))], "tables": tables}


def main() -> None:
    """Worker entry: read the request on stdin, print the rebuilt reports as JSON."""
    request = json.loads(sys.stdin.read())
    print(json.dumps(asyncio.run(_worker(request))))


if __name__ == "__main__":
    main()
