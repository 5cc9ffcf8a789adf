"""The verdict tables of the projections (judgments, verdicts, tags, checks): built from the
folded verdicts in one order, whole or for some verdicts only (the frame cache splices them)."""

from __future__ import annotations

from collections.abc import Iterable
from operator import attrgetter
from typing import Any

import polars as pl

from .judgments_frame import judgments_frame
from .state import State, VerdictRecord
from .table_schemas import SCHEMAS, frame_of_rows

__all__ = ["VerdictTables"]


def _by_sample(verdicts: Iterable[VerdictRecord]) -> list[VerdictRecord]:
    """Verdicts in the order the verdict tables list them."""
    return sorted(verdicts, key=attrgetter("run_id", "judge_id", "sample"))


class VerdictTables:
    """The verdict tables' row builders `Projections` offers on its state."""

    state: State
    _verdicts: list[Any] | None

    def _verdicts_sorted(self) -> list[Any]:
        # Four tables walk the verdicts in this order: sorted once per state version.
        if self._verdicts is None:
            self._verdicts = _by_sample(self.state.verdicts.values())
        return self._verdicts

    def _verdict_table(self, name: str, verdicts: list[VerdictRecord]) -> pl.DataFrame:
        """Table `name` of these verdicts only (in the order given)."""
        if name == "judgments":
            return self._judgments_frame(verdicts)
        rows: list[tuple[Any, ...]] = getattr(self, f"_{name}_rows")(verdicts)
        return frame_of_rows(rows, SCHEMAS[name])

    def _judgments_frame(self, verdicts: list[VerdictRecord] | None = None) -> pl.DataFrame:
        return judgments_frame(
            self._verdicts_sorted() if verdicts is None else verdicts,
            self.state.runs,
            self._judge_family,
            SCHEMAS["judgments"],
        )

    def _judge_family(self, judge_id: str, fallback: str) -> str:
        # One family per judge (the statistics require it): the registered one wins.
        judge = self.state.judges.get(judge_id)
        return (judge.family if judge and judge.family else fallback) or ""

    def _verdicts_rows(self, verdicts: list[VerdictRecord] | None = None) -> list[tuple[Any, ...]]:
        return [
            (
                v.campaign_id,
                v.run_id,
                self.state.runs[v.run_id].agent_id,
                v.judge_id,
                v.sample,
                len(v.scores),
                len(v.tags),
                len(v.checks),
                len(v.files_opened),
                len(v.files_cited),
                len(set(v.files_cited) - set(v.files_opened)),
                v.cost_usd,
                v.input_tokens,
                v.output_tokens,
                v.cached_tokens,
                v.attempts,
                v.rejected_sha256,
                v.sequence,
            )
            for v in (self._verdicts_sorted() if verdicts is None else verdicts)
        ]

    def _tags_rows(self, verdicts: list[VerdictRecord] | None = None) -> list[tuple[Any, ...]]:
        rows = []
        for v in self._verdicts_sorted() if verdicts is None else verdicts:
            run = self.state.runs[v.run_id]
            for tag in sorted(set(v.tags)):
                rows.append(
                    (
                        v.campaign_id,
                        run.task_id,
                        v.run_id,
                        run.agent_id,
                        v.judge_id,
                        v.sample,
                        tag,
                    )
                )
        return rows

    def _checks_rows(self, verdicts: list[VerdictRecord] | None = None) -> list[tuple[Any, ...]]:
        rows = []
        for v in self._verdicts_sorted() if verdicts is None else verdicts:
            run = self.state.runs[v.run_id]
            for name, passed, weight, detail in sorted(v.checks, key=lambda c: str(c[0])):
                rows.append(
                    (
                        v.campaign_id,
                        run.task_id,
                        v.run_id,
                        run.agent_id,
                        v.judge_id,
                        v.sample,
                        name,
                        bool(passed),
                        float(weight),
                        detail,
                    )
                )
        return rows
