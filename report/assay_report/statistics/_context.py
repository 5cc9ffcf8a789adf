"""One analysis unit: a panel (all tasks, or one task-attribute group) plus bootstrap settings.

Grouping splits the tasks by a task attribute and analyses each group on its own, with
its own task resamples (same seed), so a group's intervals reflect that group's tasks.
Resample counts and the overall-score estimate are computed once per context and shared
by every statistic that needs them, which keeps paired comparisons consistent; so are the
statistics' inputs, whose columns the context weighs in one pass before any statistic asks.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import Any, TypeVar

import numpy as np
import polars as pl

from assay_schemas import ANCHOR

from ._bootstrap import Counts, Estimate, Weigher, ratio, resample_counts
from ._panel import F64, Panel, cell_means, prepare
from ._rows import AgentKey
from ._tables import StatisticsInputError, Tables, TaskAttribute

__all__ = [
    "ANCHOR",
    "DEFAULT_RESAMPLES",
    "AnalysisSettings",
    "Context",
    "Weighed",
    "contexts",
    "overall_inputs",
    "split_tables",
]

T = TypeVar("T")

Weighed = tuple[Callable[..., tuple[F64, ...]], tuple[Hashable, ...]]
"""What a statistic weighs in a context, as a function of the context and the arguments
after it: the (T, K) task sums its estimates multiply by the resample counts (for a
ratio, its numerators and denominators)."""

DEFAULT_RESAMPLES = 10_000
"""Default number of task-cluster bootstrap resamples."""


@dataclass(frozen=True, kw_only=True)
class AnalysisSettings:
    """How to analyse the tables: bootstrap seed, resample count, confidence, grouping, anchor."""

    seed: int
    n_resamples: int = DEFAULT_RESAMPLES
    confidence: float = 0.95
    group_by: TaskAttribute | None = None
    anchor: int = ANCHOR


@dataclass(frozen=True, kw_only=True)
class Context:
    """A panel with the settings to analyse it with."""

    panel: Panel
    tables: Tables
    group: str | None
    settings: AnalysisSettings

    @property
    def confidence(self) -> float:
        """Confidence level of this context's intervals."""
        return self.settings.confidence

    @cached_property
    def counts(self) -> Counts:
        """(B, T) task multiplicities of each bootstrap resample."""
        s = self.settings
        return resample_counts(s.seed, s.n_resamples, len(self.panel.task_ids))

    @cached_property
    def weigher(self) -> Weigher:
        """The resamples' products, shared by every estimate of this context."""
        return Weigher(self.counts)

    def agent_key(self, agent: str) -> AgentKey:
        """The leading fields of this context's row of ``agent``."""
        return AgentKey(group=self.group, agent_id=agent)

    @cached_property
    def _inputs(self) -> dict[tuple[Hashable, ...], Any]:
        return {}

    def inputs(self, of: Callable[..., T], *args: Hashable) -> T:
        """``of(self, *args)``, computed once in this context: a statistic's inputs, shared
        by the statistic and by :meth:`weigh_ahead`."""
        key = (of, *args)
        if key not in self._inputs:
            self._inputs[key] = of(self, *args)
        value: T = self._inputs[key]
        return value

    def weigh_ahead(self, weighed: Iterable[Weighed]) -> None:
        """Weigh the columns of every statistic in ``weighed`` in one pass, before any of
        them asks (see :meth:`Weigher.ahead`)."""
        sums = [m for of, args in weighed for m in self.inputs(of, *args)]
        if sums:
            self.weigher.ahead(np.concatenate(sums, axis=1))

    def ratio(self, num: F64, den: F64) -> Estimate:
        """Ratio estimator with this context's resamples and confidence."""
        return ratio(num, den, self.weigher, self.confidence)

    @cached_property
    def overall(self) -> Estimate:
        """Each agent's overall score (column = agent)."""
        return self.ratio(*self.inputs(overall_inputs))


def overall_inputs(ctx: Context) -> tuple[F64, F64]:
    """Each agent's overall score: the task sums of its run scores, and of its runs."""
    return cell_means(ctx.panel, ctx.panel.run_score[:, None])


def split_tables(tables: Tables, group_by: TaskAttribute | None) -> list[tuple[str | None, Tables]]:
    """The tables, whole or split by a task attribute (groups in sorted order)."""
    if group_by is None:
        return [(None, tables)]
    if group_by not in ("domain", "phase", "difficulty"):
        raise StatisticsInputError(f"group_by must be domain, phase or difficulty: {group_by!r}")
    per_task = tables.runs.group_by("task_id").agg(pl.col(group_by).unique())
    clash = per_task.filter(pl.col(group_by).list.len() > 1)
    if clash.height:
        raise StatisticsInputError(
            f"table 'runs': task {clash['task_id'].sort()[0]!r} has several {group_by} values"
        )
    attr = per_task.with_columns(pl.col(group_by).list.first())
    out: list[tuple[str | None, Tables]] = []
    for value in sorted(attr[group_by].unique().to_list()):
        ids = attr.filter(pl.col(group_by) == value)["task_id"]
        keep = pl.col("task_id").is_in(ids.implode())
        out.append(
            (
                value,
                Tables(
                    tables.ratings.filter(keep), tables.runs.filter(keep), tables.tags.filter(keep)
                ),
            )
        )
    return out


def contexts(tables: Tables, settings: AnalysisSettings) -> Iterator[Context]:
    """One context per group (or one for everything when ``settings.group_by`` is None).

    Every statistic is a function of one context returning its rows; ``tables`` come
    from :func:`make_tables`. The same tables and seed give the same rows, bit for bit.
    """
    if not 0.0 < settings.confidence < 1.0:
        raise StatisticsInputError(f"confidence must lie in (0, 1): {settings.confidence}")
    if settings.n_resamples < 1:
        raise StatisticsInputError(f"n_resamples must be positive: {settings.n_resamples}")
    for group, sub in split_tables(tables, settings.group_by):
        yield Context(
            panel=prepare(sub, anchor=settings.anchor), tables=sub, group=group, settings=settings
        )
