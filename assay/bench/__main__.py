"""`python -m assay.bench` / `make bench`: every benchmark row in one table."""

from __future__ import annotations

import argparse
import importlib
import logging
from collections.abc import Callable

from ._table import Row, print_rows

# Each entry: (label, "module:function"); later issues add rows here.
SUITES: list[tuple[str, str]] = [
    ("bus", "assay.bench._bus:bench_bus"),
    ("sandbox", "assay.sandbox_manager.bench:bench_sandbox"),
    ("judge", "assay.judge.bench:bench_judge"),
    ("aggregator", "assay.aggregator.bench:bench_aggregator"),
    ("runner", "assay.runner.bench:bench_runner"),
    ("load", "assay.bench._load:bench_load"),
]


def _load(spec: str) -> Callable[[], list[Row]]:
    module, func = spec.split(":")
    return getattr(importlib.import_module(module), func)  # type: ignore[no-any-return]


def main() -> None:
    """Run the selected suites and print one table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--only", nargs="*", help="suite labels to run (default: all)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    rows: list[Row] = []
    for label, spec in SUITES:
        if args.only and label not in args.only:
            continue
        print(f"running {label} ...", flush=True)
        rows.extend(_load(spec)())
    print_rows(rows)


if __name__ == "__main__":
    main()
