"""`python -m bench` / `make bench`: every benchmark row in one table."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable

from bench.aggregator import bench_aggregator
from bench.blindness import bench_blindness
from bench.bus import bench_bus
from bench.coverage import bench_coverage
from bench.gateway import bench_gateway
from bench.judge import bench_judge
from bench.load import bench_load
from bench.prompt_cache import bench_prompt_cache
from bench.runner import bench_runner
from bench.sandbox import bench_sandbox
from bench.scale import bench_scale
from bench.scripted import bench_scripted
from bench.seal import bench_seal
from bench.stopping import bench_stopping
from bench.table import Row, print_rows
from bench.view import bench_view

# Each suite returns its rows; every row carries its own baseline from the same run.
SUITES: dict[str, Callable[[], list[Row]]] = {
    "bus": bench_bus,
    "sandbox": bench_sandbox,
    "seal": bench_seal,
    "judge": bench_judge,
    "aggregator": bench_aggregator,
    "coverage": bench_coverage,
    "view": bench_view,
    "scripted": bench_scripted,
    "gateway": bench_gateway,
    "runner": bench_runner,
    "load": bench_load,
    "scale": bench_scale,
    "blindness": bench_blindness,
    "stopping": bench_stopping,
    "prompt_cache": bench_prompt_cache,
}


def main() -> None:
    """Run the selected suites and print one table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--only", nargs="*", choices=list(SUITES), help="suites (default: all)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    rows: list[Row] = []
    for label, suite in SUITES.items():
        if args.only and label not in args.only:
            continue
        print(f"running {label} ...", flush=True)
        rows.extend(suite())
    print_rows(rows)


if __name__ == "__main__":
    main()
