"""Benchmark at K-Bench scale: 178 tasks × 9 agents × 1 epoch, 3 judges × 8 dimensions.

``python -m bench.statistics`` prints the timings. No timed asserts
live in the tests; this is where speed is measured.
"""

from __future__ import annotations

import time
from typing import NamedTuple

from assay_report.statistics._bootstrap import ratio, resample_counts
from assay_report.statistics._context import AnalysisSettings
from assay_report.statistics._panel import cell_means, prepare
from assay_report.statistics._suite import compute_statistics
from assay_testing.synthetic_tables import synthetic_tables

__all__ = ["BenchRow", "bench_statistics"]


class BenchRow(NamedTuple):
    """One timed step."""

    step: str
    seconds: float
    """Best wall time over the repeats."""
    detail: str


def _best(fn: object, repeats: int) -> float:
    assert callable(fn)
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def bench_statistics(
    *, n_resamples: int = 10_000, seed: int = 0, repeats: int = 3
) -> list[BenchRow]:
    """Time preparation, the 10k-resample per-agent bootstrap and the full suite."""
    t0 = time.perf_counter()
    tables = synthetic_tables(seed=seed)
    build = time.perf_counter() - t0
    panel = prepare(tables)
    runs = len(panel.run_ids)
    shape = f"{len(panel.task_ids)} tasks, {len(panel.agent_ids)} agents, {runs} runs"

    def per_agent() -> None:
        counts = resample_counts(seed, n_resamples, len(panel.task_ids))
        num, den = cell_means(panel, panel.run_score[:, None])
        ratio(num, den, counts)

    return [
        BenchRow("synthetic_tables", build, f"{tables.ratings.height} ratings; {shape}"),
        BenchRow("prepare", _best(lambda: prepare(tables), repeats), "tables → arrays"),
        BenchRow(
            "agent_scores_bootstrap",
            _best(per_agent, repeats),
            f"{n_resamples} task resamples of 9 agent scores (+ SE, percentile CI)",
        ),
        BenchRow(
            "full_suite",
            _best(
                lambda: compute_statistics(
                    tables, AnalysisSettings(seed=seed, n_resamples=n_resamples)
                ),
                repeats,
            ),
            f"compute_statistics, {n_resamples} resamples",
        ),
        BenchRow(
            "full_suite_by_domain",
            _best(
                lambda: compute_statistics(
                    tables, AnalysisSettings(seed=seed, n_resamples=n_resamples, group_by="domain")
                ),
                repeats,
            ),
            "compute_statistics grouped by domain (3 groups)",
        ),
    ]


if __name__ == "__main__":
    for row in bench_statistics():
        print(f"{row.step:<26} {row.seconds * 1000:9.1f} ms  {row.detail}")
