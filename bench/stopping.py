"""Sequential stopping over simulated campaigns with planted agents (#51).

Each campaign has three agents and up to ``TASKS`` tasks, run task by task in waves of
``CHECK_EVERY``; a run's score is Binomial(10, μ_a/10 + u_t) with a task effect
``u_t ~ U(−0.2, 0.2)`` shared by the agents (so the planted mean is exactly μ_a and the
paired differences are correlated as real ones are). After every wave the rule
``ranking_settled`` (95%, at least ``MIN_TASKS`` tasks) is checked on the hedged betting
confidence sequences — the same functions and Bonferroni split as
``assay_report.statistics.decide`` (a test checks they stop at the same wave) — and the
campaign stops the first time it is met. Scenarios: a planted gap (6.5, 5.5, 4.5) and
no gap (5, 5, 5). Figures: the right and wrong winner, runs saved, the coverage of each
agent's anytime-valid interval at the stopping time (and at every wave), and, for
contrast, how often naive peeking at a task-bootstrap percentile interval of the same
differences (no correction, the same waves) declares a winner where there is none.

``python -m bench.stopping --campaigns 1000`` runs the issue's size (``make bench`` runs
200 per scenario: a Monte Carlo error of about ±1.5 points on a 5% rate).
"""

from __future__ import annotations

import argparse
import itertools
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from assay_report.statistics import hedged_sequence
from assay_report.statistics._bootstrap import resample_counts
from bench.table import Row, print_rows

__all__ = ["SCENARIOS", "Outcome", "Scenario", "bench_stopping", "simulate"]

F64 = npt.NDArray[np.float64]

CONFIDENCE = 0.95
TASKS = 200
CHECK_EVERY = 10
MIN_TASKS = 10
TASK_EFFECT = 0.2
NAIVE_RESAMPLES = 400


class Scenario(NamedTuple):
    """Planted agents' true mean scores (0-10)."""

    name: str
    means: tuple[float, ...]


SCENARIOS = (Scenario("gap", (6.5, 5.5, 4.5)), Scenario("no gap", (5.0, 5.0, 5.0)))


class Outcome(NamedTuple):
    """One simulated campaign, monitored after every wave."""

    stopped_at: int | None
    """Tasks done when the rule was met (None: ran every task unsettled)."""
    winner: int | None
    covered_at_stop: int
    """Agents whose score interval held the planted mean when the campaign ended."""
    covered_always: int
    """Agents whose interval held it at every wave up to then."""
    naive_winner: int | None
    """Who naive bootstrap peeking would have declared (None: nobody)."""


def _scores(rng: np.random.Generator, means: tuple[float, ...]) -> F64:
    """(agents, tasks) run scores, one run per task."""
    effect = rng.uniform(-TASK_EFFECT, TASK_EFFECT, size=TASKS)
    p = np.clip(np.array(means)[:, None] / 10 + effect[None, :], 0.0, 1.0)
    return rng.binomial(10, p).astype(np.float64)


def _waves() -> range:
    return range(max(CHECK_EVERY, MIN_TASKS), TASKS + 1, CHECK_EVERY)


def _settled(leader: int, low: dict[tuple[int, int], F64], t: int, k: int) -> bool:
    """Every pair (leader, other) lies above 0 after t tasks."""
    return all(low[(leader, o)][t - 1] > 0 for o in range(k) if o != leader)


def _pair_bounds(scores: F64) -> dict[tuple[int, int], F64]:
    """Lower bounds (points) of every ordered pair's paired-difference CS, Bonferroni-split."""
    k = scores.shape[0]
    alpha = (1 - CONFIDENCE) / (k * (k - 1) // 2)
    low: dict[tuple[int, int], F64] = {}
    for a, b in itertools.combinations(range(k), 2):
        cs = hedged_sequence((scores[a] - scores[b] + 10) / 20, alpha)
        low[(a, b)] = 20 * cs.low - 10
        low[(b, a)] = 10 - 20 * cs.high  # the same sequence seen from b
    return low


def _naive_winner(scores: F64, seed: int) -> int | None:
    """Peeking after each wave at 95% percentile bootstrap intervals of the differences."""
    k = scores.shape[0]
    for t in _waves():
        seen = scores[:, :t]
        leader = int(np.argmax(seen.mean(axis=1)))
        counts = resample_counts(seed + t, NAIVE_RESAMPLES, t) / t
        diffs = seen[leader][None, :] - seen  # (k, t)
        lows = np.quantile(counts @ diffs.T, (1 - CONFIDENCE) / 2, axis=0)
        if all(lows[o] > 0 for o in range(k) if o != leader):
            return leader
    return None


def _campaign(scenario: Scenario, seed: int) -> Outcome:
    scores = _scores(np.random.default_rng([len(scenario.name), seed]), scenario.means)
    k = scores.shape[0]
    low = _pair_bounds(scores)
    stopped_at, winner = None, None
    for t in _waves():
        leader = int(np.argmax(scores[:, :t].mean(axis=1)))
        if _settled(leader, low, t, k):
            stopped_at, winner = t, leader
            break
    end = stopped_at or TASKS
    at_stop = always = 0
    for a, mu in enumerate(scenario.means):
        cs = hedged_sequence(scores[a] / 10, 1 - CONFIDENCE)
        lo, hi = 10 * cs.low[:end], 10 * cs.high[:end]
        at_stop += bool(lo[-1] <= mu <= hi[-1])
        waves = [t - 1 for t in _waves() if t <= end]
        always += bool(np.all((lo[waves] <= mu) & (mu <= hi[waves])))
    return Outcome(stopped_at, winner, at_stop, always, _naive_winner(scores, seed))


def simulate(scenario: Scenario, campaigns: int) -> list[Outcome]:
    """``campaigns`` seeded campaigns of ``scenario``."""
    return [_campaign(scenario, seed) for seed in range(campaigns)]


def _rows(scenario: Scenario, outcomes: list[Outcome]) -> list[Row]:
    n = len(outcomes)
    k = len(scenario.means)
    best = int(np.argmax(scenario.means))
    gap = len(set(scenario.means)) > 1
    declared = [o for o in outcomes if o.winner is not None]
    wrong = sum(1 for o in declared if not gap or o.winner != best)
    naive = sum(
        1 for o in outcomes if o.naive_winner is not None and (not gap or o.naive_winner != best)
    )
    saved = np.mean([1 - (o.stopped_at or TASKS) / TASKS for o in outcomes])
    g, label = "stopping", f"{scenario.name}, {n} campaigns"
    rows = [
        Row(
            g,
            f"{label}: coverage at the stop",
            100 * sum(o.covered_at_stop for o in outcomes) / (n * k),
            "%",
            target=">= 95%",
        ),
        Row(
            g,
            f"{label}: coverage at every wave",
            100 * sum(o.covered_always for o in outcomes) / (n * k),
            "%",
            target=">= 95%",
        ),
        Row(
            g,
            f"{label}: wrong winner declared",
            100 * wrong / n,
            "%",
            baseline=100 * naive / n,
            baseline_name="naive bootstrap peeking",
            target="<= 5%",
        ),
        Row(g, f"{label}: runs saved (mean)", 100 * float(saved), "%"),
    ]
    if gap:
        right = sum(1 for o in declared if o.winner == best)
        rows.insert(
            2, Row(g, f"{label}: right winner declared", 100 * right / n, "%", target=">= 95%")
        )
    return rows


def bench_stopping(campaigns: int = 200) -> list[Row]:
    """The rows of every scenario, ``campaigns`` campaigns each."""
    return [row for s in SCENARIOS for row in _rows(s, simulate(s, campaigns))]


def main() -> None:
    """``python -m bench.stopping``: the stopping rows alone."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--campaigns", type=int, default=200, help="campaigns per scenario")
    print_rows(bench_stopping(parser.parse_args().campaigns))


if __name__ == "__main__":
    main()
