"""The statistics run their bootstrap products on one BLAS thread, with the same bits.

Many small (resamples × tasks) @ (tasks × a few) products: a second BLAS thread's start
and spin cost more CPU than it saves (the K-Bench report 0.31 s of CPU on one thread
against 0.51–0.87 s on two, under load), and the report runs beside the services."""

from __future__ import annotations

from typing import Any

import pytest
from threadpoolctl import threadpool_info, threadpool_limits

from assay_report import statistics as st
from assay_report.statistics import _bootstrap
from assay_testing.synthetic_tables import synthetic_tables

SETTINGS = st.AnalysisSettings(seed=5, n_resamples=300)


def _blas_threads() -> set[int]:
    return {p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"}


def test_the_bootstrap_runs_on_one_blas_thread_and_gives_the_same_bits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[set[int]] = []
    weigh = _bootstrap.weigh

    def spy(counts: Any, m: Any, row_sum: Any = None) -> Any:
        seen.append(_blas_threads())
        return weigh(counts, m, row_sum)

    tables = synthetic_tables(n_tasks=12, seed=2)
    with threadpool_limits(limits=2, user_api="blas"):
        before = _blas_threads()
        monkeypatch.setattr(_bootstrap, "weigh", spy)
        threaded = st.compute_statistics(tables, SETTINGS)
        assert _blas_threads() == before  # given back afterwards
    assert seen and all(threads == {1} for threads in seen)
    monkeypatch.setattr(_bootstrap, "weigh", weigh)
    with threadpool_limits(limits=1, user_api="blas"):
        single = st.compute_statistics(tables, SETTINGS)
    assert threaded.model_dump_json() == single.model_dump_json()
