"""Incremental report bench: a report after 1% new events from a snapshot, vs a full rebuild.

On a stream that already holds a log (the 10× one in ``bench.aggregator``), a first child
process folds the first 99% of it, writes the aggregator's snapshot (timed, sized), folds
the last 1% and builds the report: its full-rebuild cost is both folds plus the report,
the work `assay report` does without a snapshot. A second child then does what `assay
report` does with one: loads the snapshot (version, stream and hash checked), folds the 1%
after it and builds the report. The two reports must be the same bytes. Each child is
its own process so neither inherits the other's caches or memory.
``python -m bench.incremental URL STREAM PREFIX HOME`` against a running server.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from assay.bus import Bus
from assay.config import Settings
from assay_aggregator.rebuild import fold_stream, head_sequence
from assay_aggregator.snapshot import paths_for, resume_state, save_snapshot
from assay_report.projections import Projections
from assay_report.report import build_report, report_json
from bench.table import Row

__all__ = ["bench_incremental"]

NEW_SHARE = 0.01
RESAMPLES = 10_000


def _report(state_p: Projections) -> bytes:
    return report_json(build_report(state_p, n_resamples=RESAMPLES))


class _Clock:
    """Wall and CPU seconds of this process since the last lap. On a shared machine the
    CPU seconds are the steadier figure: the wall clock also counts other tenants' turns."""

    def __init__(self) -> None:
        self.wall, self.cpu = time.perf_counter(), time.process_time()

    def lap(self) -> tuple[float, float]:
        wall, cpu = time.perf_counter(), time.process_time()
        out = (wall - self.wall, cpu - self.cpu)
        self.wall, self.cpu = wall, cpu
        return out


async def _full(settings: Settings, out: Path) -> dict[str, Any]:
    """Fold to the cut, snapshot it, fold the rest, report: (wall, CPU) of each part."""
    async with Bus(settings, service="bench") as bus:
        head = await head_sequence(bus.js, bus.stream.name)
        cut = head - round(head * NEW_SHARE)
        clock = _Clock()
        state = await fold_stream(bus.js, bus.stream.name, bus.subjects.events, until=cut)
        fold_cut = clock.lap()
        path = save_snapshot(settings, state)
        save = clock.lap()
        await fold_stream(bus.js, bus.stream.name, bus.subjects.events, state=state, until=head)
        fold_rest = clock.lap()
        out.write_bytes(_report(Projections(state)))
        report = clock.lap()
    fold = (fold_cut[0] + fold_rest[0], fold_cut[1] + fold_rest[1])
    return {
        "head": head,
        "cut": cut,
        "fold": fold,
        "save": save,
        "size": path.stat().st_size,
        "report": report,
    }


async def _incremental(settings: Settings, out: Path) -> dict[str, Any]:
    """What `assay report` does with a snapshot: resume, fold what is new, report."""
    async with Bus(settings, service="bench") as bus:
        head = await head_sequence(bus.js, bus.stream.name)
        clock = _Clock()
        state = await resume_state(bus.js, settings)
        assert state is not None, "the snapshot the first child wrote must be usable"
        load = clock.lap()
        await fold_stream(bus.js, bus.stream.name, bus.subjects.events, state=state, until=head)
        fold = clock.lap()
        out.write_bytes(_report(Projections(state)))
        report = clock.lap()
    return {"load": load, "fold": fold, "report": report}


def _child(mode: str, url: str, stream: str, prefix: str, home: str) -> None:
    settings = Settings(nats_url=url, stream=stream, subject_prefix=prefix, home=Path(home))
    out = Path(home) / f"report.{mode}.json"
    run = _full if mode == "full" else _incremental
    print(json.dumps(asyncio.run(run(settings, out))))


def _run_child(mode: str, settings: Settings) -> dict[str, Any]:
    args = [mode, settings.nats_url, settings.stream, settings.subject_prefix, str(settings.home)]
    done = subprocess.run(
        [sys.executable, "-m", "bench.incremental", "--child", *args],
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def bench_incremental(settings: Settings, label: str = "10×") -> list[Row]:
    """Full rebuild + report vs snapshot + 1% new events + report, and the snapshot's size."""
    paths_for(settings).snapshot.unlink(missing_ok=True)
    full = _run_child("full", settings)
    inc = _run_child("incremental", settings)
    same = (settings.home / "report.full.json").read_bytes() == (
        settings.home / "report.incremental.json"
    ).read_bytes()
    if not same:
        raise AssertionError("the incremental report differs from the full rebuild's")
    n_new = int(full["head"] - full["cut"])
    rows = []
    for i, kind in ((1, "CPU"), (0, "wall")):
        full_s = full["fold"][i] + full["report"][i]
        parts = {k: inc[k][i] for k in ("load", "fold", "report")}
        detail = " + ".join(f"{k} {v:.1f} s" for k, v in parts.items())
        rows.append(
            Row(
                "aggregator",
                f"{label}: report after {n_new} new events (1%) from a snapshot at "
                f"{int(full['cut'])}, {kind} s ({detail}); byte-identical",
                sum(parts.values()),
                "s",
                full_s,
                f"full rebuild of {int(full['head'])} events, {kind} s (fold "
                f"{full['fold'][i]:.1f} s + report {full['report'][i]:.1f} s)",
                "≤ 0.10× full",
            )
        )
    return [
        *rows,
        Row(
            "aggregator",
            f"{label}: snapshot of {int(full['cut'])} events, size",
            full["size"] / 2**20,
            "MiB",
        ),
        Row(
            "aggregator",
            f"{label}: snapshot write (state to JSON, hash, atomic rename), wall",
            full["save"][0],
            "s",
        ),
    ]


def main() -> None:
    """Print the rows against a running server, or run as one of the children."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--child", nargs=5, metavar=("MODE", "URL", "STREAM", "PREFIX", "HOME"))
    parser.add_argument("target", nargs="*", metavar="URL STREAM PREFIX HOME")
    args = parser.parse_args()
    if args.child:
        _child(*args.child)
        return
    from bench.table import print_rows

    url, stream, prefix, home = args.target
    settings = Settings(nats_url=url, stream=stream, subject_prefix=prefix, home=Path(home))
    print_rows(bench_incremental(settings))


if __name__ == "__main__":
    main()
