"""bench.run_cost: the fit of CPU per run against steps per run, and its rows' warnings."""

from __future__ import annotations

import math

import pytest
from scipy import stats

from bench.model_floor import ModelFloor
from bench.run_cost import TOTAL, Point, bench_run_cost, fit_line, run_cost_rows
from bench.scale import Measured, Size
from bench.table import Row


def test_fit_matches_scipy_linregress() -> None:
    xs = [6.0, 21.0, 6.0, 21.0, 11.0]
    ys = [61.2, 118.9, 57.4, 101.3, 80.0]
    ours = fit_line(xs, ys)
    ref = stats.linregress(xs, ys)
    assert ours.slope == pytest.approx(ref.slope, rel=1e-12)
    assert ours.intercept == pytest.approx(ref.intercept, rel=1e-12)
    residuals = [abs(y - (ref.intercept + ref.slope * x)) for x, y in zip(xs, ys, strict=True)]
    assert ours.max_residual == pytest.approx(max(residuals), rel=1e-12)


def test_two_points_by_hand() -> None:
    """A run of 6 steps costing 40 ms and one of 21 costing 70: 2 ms a step, 28 fixed."""
    line = fit_line([6.0, 21.0], [40.0, 70.0])
    assert line.slope == pytest.approx(2.0)
    assert line.intercept == pytest.approx(28.0)
    assert line.max_residual == pytest.approx(0.0, abs=1e-9)


@pytest.mark.parametrize("xs", [[], [6.0], [6.0, 6.0, 6.0]])
def test_one_run_length_cannot_be_split(xs: list[float]) -> None:
    with pytest.raises(ValueError, match="two run lengths"):
        fit_line(xs, [1.0] * len(xs))


def _point(steps: float, per_run: dict[str, float], floor: float = 1.0) -> Point:
    return Point(steps, {**per_run, TOTAL: sum(per_run.values())}, floor, 0)


def _value(rows: list[Row], start: str) -> float:
    (row,) = [r for r in rows if r.name.strip().startswith(start.strip())]
    return float(row.value)


def test_rows_split_each_process_and_predict_the_step() -> None:
    # runner: 9 ms a run + 1.2 a step; sandbox-manager: 13 + 0.3.
    points = [_point(n, {"runner": 9 + 1.2 * n, "sandbox-manager": 13 + 0.3 * n}) for n in (6, 21)]
    rows = run_cost_rows(points, lengths=(11.0,))
    assert _value(rows, "runner: fixed CPU per run") == pytest.approx(9.0)
    assert _value(rows, "  sandbox-manager: CPU per step") == pytest.approx(0.3)
    assert _value(rows, f"{TOTAL}: fixed CPU per run") == pytest.approx(22.0)
    assert _value(rows, f"{TOTAL}: CPU per step") == pytest.approx(1.5)
    assert _value(rows, "CPU per agent step predicted at 11") == pytest.approx(1.5 + 22 / 11)


def test_a_moving_host_shows_in_the_floor_spread() -> None:
    points = [_point(6, {"runner": 20.0}, floor=0.6), _point(21, {"runner": 50.0}, floor=0.9)]
    rows = run_cost_rows(points)
    assert _value(rows, "the floor's spread") == pytest.approx(1.5)


def test_a_host_twice_as_slow_on_the_long_runs_costs_the_same() -> None:
    """CPU is fitted in each run's own floors: a slow host is not a dearer step."""
    same = [_point(6, {"runner": 30.0}), _point(21, {"runner": 60.0})]
    slowed = [_point(6, {"runner": 30.0}), _point(21, {"runner": 120.0}, floor=2.0)]
    for a, b in zip(run_cost_rows(same), run_cost_rows(slowed), strict=True):
        if a.unit in ("ms/run", "ms/step", "ms"):
            # Brought back at the mean floor, 1.5 ms here against 1: the same line × 1.5.
            assert b.value == pytest.approx(a.value * 1.5), a.name


def test_lengths_are_interleaved_and_failures_counted() -> None:
    """Short, long, short, long: a host that slows down mid-bench hits both lengths."""
    seen: list[int] = []
    floor = ModelFloor(1.0, 1.5)

    def fake(size: Size) -> Measured:
        from bench.scale_run import _Result

        seen.append(size.steps)
        steps = size.runs * (size.steps + 1)
        cpu = {"runner": size.runs * (0.009 + 0.001 * (size.steps + 1))}
        result = _Result(1.0, size.runs - 1, 1, steps, cpu, None, math.nan, 0.0, 0, {}, 1)  # type: ignore[arg-type]
        return Measured(result, floor, floor)

    rows = bench_run_cost(10, 10, [5, 20], 2, measure_one=fake)
    assert seen == [5, 20, 5, 20]
    assert _value(rows, "runner: fixed CPU per run") == pytest.approx(9.0)
    assert _value(rows, "runner: CPU per step") == pytest.approx(1.0)
    assert _value(rows, "runs failed") == 4.0
