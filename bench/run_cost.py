"""What a run costs and what a step costs: CPU per run = fixed + per step × steps.

The scale rows' CPU per agent step mixes each step's own work (the model call, the
sandbox command, the step's event) with the run's fixed work spread over its steps (its
task's admission, its sandbox's start, seal and teardown, its lifecycle events and the
reads of its history), so it depends on how long runs are. This bench runs the scale
workload at two run lengths, interleaved (short, long, short, long: the host's speed moves
within minutes), and fits CPU per run against steps per run by least squares, for the
whole and for each process: the intercept is a run's fixed cost, the slope a step's. Each
run's CPU is taken in floors (one model call's CPU, measured before and after it) and
brought back to milliseconds at the runs' mean floor, so that the host's speed, which can
move 2× within an hour on a shared VM, cancels out as far as the floor follows it.
Run it as root, as the scale rows: sandboxes then get their own uids and cgroups, as
deployed (without root they run as the caller, and a run's fixed cost lacks that work).

``python -m bench.run_cost --runs 300 --concurrency 300 --steps 5,20 --pairs 2``
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable, Sequence
from typing import NamedTuple

from bench.model_floor import ModelFloor
from bench.scale import Measured, Size, measure
from bench.table import Row, print_rows

__all__ = ["Line", "Point", "fit_line", "run_cost_rows"]

TOTAL = "all processes"
SPREAD_WARN = 1.25
"""Floors (one model call's CPU) further apart than this across the runs: the host's speed
moved between them, and the fit mixes two machines."""


class Point(NamedTuple):
    """One measured run length: steps per run and each process's CPU per run (ms)."""

    steps_per_run: float
    cpu_ms_per_run: dict[str, float]
    floor_ms: float
    failed: int


class Line(NamedTuple):
    """y = intercept + slope · x, fitted by ordinary least squares."""

    intercept: float
    slope: float
    max_residual: float


def fit_line(xs: Sequence[float], ys: Sequence[float]) -> Line:
    """The least-squares line through (xs, ys); at least two distinct xs."""
    if len(xs) != len(ys):
        raise ValueError(f"{len(xs)} xs against {len(ys)} ys")
    if len(set(xs)) < 2:
        raise ValueError("a line needs points at two run lengths at least")
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    slope = sxy / sxx
    intercept = my - slope * mx
    residual = max(abs(y - (intercept + slope * x)) for x, y in zip(xs, ys, strict=True))
    return Line(intercept, slope, residual)


def point(size: Size, m: Measured) -> Point:
    """A measured run of `size` as a point of the fit."""
    runs = size.runs
    cpu = {part: seconds * 1000 / runs for part, seconds in m.result.cpu.items()}
    cpu[TOTAL] = sum(cpu.values())
    floor = ModelFloor.mean(m.before, m.after).provider_ms
    failed = m.result.failed + max(0, runs - m.result.sealed - m.result.failed)
    return Point(m.result.steps / runs, cpu, floor, failed)


def run_cost_rows(points: Sequence[Point], lengths: Sequence[float] = (11.0, 21.0)) -> list[Row]:
    """A run's fixed CPU and a step's, for the whole and each process, fitted over points;
    then CPU per step predicted at `lengths` (steps per run) and what qualifies the fit."""
    g = "run cost"
    xs = [p.steps_per_run for p in points]
    parts = [TOTAL, *(k for k in points[0].cpu_ms_per_run if k != TOTAL)]
    floors = [p.floor_ms for p in points]
    floor = sum(floors) / len(floors)

    def at_mean_speed(p: Point, part: str) -> float:
        # Each run's CPU in its own floors, then at the runs' mean floor: a host that
        # slowed down between a short and a long run does not pass for a cost per step.
        return p.cpu_ms_per_run[part] / p.floor_ms * floor

    lines = {part: fit_line(xs, [at_mean_speed(p, part) for p in points]) for part in parts}
    rows = []
    for part in parts:
        line, indent = lines[part], "" if part == TOTAL else "  "
        rows += [
            Row(
                g,
                f"{indent}{part}: fixed CPU per run (intercept)",
                line.intercept,
                "ms/run",
                floor,
                "the floor (one model call)",
            ),
            Row(
                g,
                f"{indent}{part}: CPU per step (slope)",
                line.slope,
                "ms/step",
                floor,
                "the floor (one model call)",
            ),
        ]
    whole = lines[TOTAL]
    for n in lengths:
        rows.append(
            Row(
                g,
                f"CPU per agent step predicted at {n:g} steps a run (slope + intercept / {n:g})",
                whole.slope + whole.intercept / n,
                "ms",
                target="≤ 4 ms",
            )
        )
    rows += [
        Row(
            g,
            f"largest residual of the fit ({len(points)} runs at {len(set(xs))} lengths)",
            whole.max_residual,
            "ms/run",
            whole.intercept,
            "the fixed cost",
        ),
        Row(
            g,
            "the floor's spread across the runs (far from 1: the host's speed moved "
            "between them, and the fit mixes two speeds)",
            max(floors) / min(floors),
            "×",
            target=f"< {SPREAD_WARN:g}",
        ),
        Row(
            g,
            "runs failed or unfinished, all lengths",
            float(sum(p.failed for p in points)),
            "runs",
            target="0",
        ),
    ]
    return rows


def bench_run_cost(
    runs: int,
    concurrency: int,
    steps: Sequence[int],
    pairs: int,
    *,
    measure_one: Callable[[Size], Measured] = measure,
) -> list[Row]:
    """Every length of `steps` measured `pairs` times, interleaved, then fitted."""
    points = []
    for _ in range(pairs):
        for n in steps:
            size = Size(runs, n, concurrency)
            points.append(point(size, measure_one(size)))
    return run_cost_rows(points)


def main() -> None:
    """Print the run-cost rows."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--concurrency", type=int, default=300)
    parser.add_argument("--steps", default="5,20", help="tool steps per run, comma-separated")
    parser.add_argument("--pairs", type=int, default=2, help="rounds over the lengths")
    args = parser.parse_args()
    steps = [int(s) for s in args.steps.split(",")]
    if len(set(steps)) < 2 or min(steps) < 1 or args.pairs < 1:
        parser.error("--steps needs two different lengths of at least 1; --pairs at least 1")
    logging.basicConfig(level=logging.ERROR)
    print_rows(bench_run_cost(args.runs, args.concurrency, steps, args.pairs))


if __name__ == "__main__":
    main()
