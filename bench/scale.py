"""Scale rows: hundreds of live runs on one machine, a model that answers after 1 s.

runs × steps of `bash true` (then submit) at a concurrency in the hundreds, on bubblewrap.
The services run as deployed, one `assay serve` process each (sandbox-manager, runner,
aggregator) on a fresh embedded nats-server; the scripted model answers from a process of
its own after a fixed latency, through the real OpenAI SDK. The ideal wall is the model's
alone: waves of `concurrency` runs, each run (steps + 1) calls of `latency` seconds.

While the runs are live, /proc is sampled: each service's own CPU time and memory, and
each live sandbox's processes (bwrap and the resident; the agent's commands are left out:
the excluded work). Sizes: ``RUNSxSTEPS@CONCURRENCY`` (``1000x10@500``) from
``--size`` or ``ASSAY_BENCH_SCALE``; ``--peer`` adds Inspect AI on the same model server.
``python -m bench.scale --size 1000x10@500 --peer``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple

from bench.model_floor import ModelFloor, model_floor
from bench.model_process import MODEL, scripted_process
from bench.peer import peer_python, run_inspect
from bench.runner import KEY_ENV
from bench.scale_rows import _peer_rows, _rows
from bench.scale_run import Size, _assay, _Result
from bench.table import Row, print_rows

__all__ = ["Measured", "Size", "bench_scale", "measure"]

SIZE_ENV = "ASSAY_BENCH_SCALE"
DEFAULT_SIZE = "100x10@50"
"""What `make bench` runs (minutes on 2 cores); the issue's workload is 1000x10@500."""


class Measured(NamedTuple):
    """One Assay run of a size, with the model floor measured before and after it."""

    result: _Result
    before: ModelFloor
    after: ModelFloor


@contextlib.contextmanager
def _scripted(size: Size) -> Iterator[str]:
    """The scripted model server for runs of this size; yields its base URL."""
    os.environ.setdefault(KEY_ENV, "scripted")
    with scripted_process(size.steps, size.latency_s) as base_url:
        yield base_url


def _measure_at(
    base_url: str, size: Size, timeout_s: float, profile: Path | None = None
) -> Measured:
    def floor() -> ModelFloor:
        calls = min(2000, 4 * size.concurrency)
        return model_floor(base_url, MODEL, calls=calls, concurrency=size.concurrency)

    # Measured on both sides of the run: the host's speed can move within minutes.
    before = floor()
    with tempfile.TemporaryDirectory(prefix="assay-scale-", dir="/var/tmp") as tmp:
        base = Path(tmp)
        base.chmod(0o711)  # sandbox uids must traverse to their workspace mounts
        result = asyncio.run(_assay(base, base_url, size, timeout_s, profile))
    return Measured(result, before, floor())


def measure(size: Size, timeout_s: float = 900.0) -> Measured:
    """Assay alone at this size: what `bench_scale` measures, as figures, not rows."""
    with _scripted(size) as base_url:
        return _measure_at(base_url, size, timeout_s)


def bench_scale(
    size: Size | None = None,
    *,
    peer: bool = False,
    timeout_s: float = 900.0,
    profile: Path | None = None,
    show: Callable[[list[Row]], None] | None = None,
) -> list[Row]:
    """The scale rows; Inspect AI beside them when peer (its venv built once, cached).
    `show` gets Assay's rows as soon as they are measured, Inspect AI's after."""
    size = size or Size.parse(os.environ.get(SIZE_ENV, DEFAULT_SIZE))
    with _scripted(size) as base_url:
        result, before, after = _measure_at(base_url, size, timeout_s, profile)
        rows = _rows(size, result, before, after)
        if show is not None:
            show(rows)
        if peer:
            python = peer_python()
            try:
                side, version = run_inspect(
                    python, base_url, size.runs, size.concurrency, timeout_s=timeout_s
                )
                inspect: tuple[float, int, str] | None = (side.wall_s, side.failed, version)
            except subprocess.TimeoutExpired:
                inspect = None
            more = _peer_rows(size, result.wall_s, inspect)
            if show is not None:
                show(more)
            rows += more
    return rows


def main() -> None:
    """Print the scale rows."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--size",
        default=os.environ.get(SIZE_ENV, DEFAULT_SIZE),
        help=f"RUNSxSTEPS@CONCURRENCY (default {DEFAULT_SIZE}; ${SIZE_ENV})",
    )
    parser.add_argument("--latency", type=float, default=1.0, help="model latency, seconds")
    parser.add_argument("--peer", action="store_true", help="Inspect AI beside it")
    parser.add_argument("--timeout", type=float, default=900.0, help="per side, seconds")
    parser.add_argument("--profile", type=Path, help="py-spy each service; raw profiles here")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    size = Size.parse(args.size, args.latency)
    bench_scale(size, peer=args.peer, timeout_s=args.timeout, profile=args.profile, show=print_rows)


if __name__ == "__main__":
    main()
