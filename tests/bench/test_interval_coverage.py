"""The coverage bench: every interval kind of Judge validity holds its planted value in at
least 93% of simulated campaigns at 95% nominal (seeded, so the figures are fixed)."""

from __future__ import annotations

from bench.coverage import KINDS, TARGET, TASKS, bench_coverage


def test_every_interval_kind_covers_at_least_93_percent() -> None:
    rows = bench_coverage()
    assert len(rows) == len(KINDS) * len(TASKS) and {r.unit for r in rows} == {"%"}
    low = [(r.name, r.value) for r in rows if r.value < 100 * TARGET]
    assert low == [], low
