"""The ``judgments`` projection table built by columns: one row per verdict, repeated.

It is the largest table (run × judge × sample × dimension: 370k rows at 10×). Built as
a tuple per score it took a second of every report; here the per-verdict fields are
one row each, repeated once per dimension by a single gather, and the dimensions and
scores are two flat lists. The frame is equal to the row-built one, row for row.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np
import polars as pl

from .state import RunRecord, VerdictRecord
from .table_schemas import frame_of_rows

__all__ = ["judgments_frame"]


def judgments_frame(
    verdicts: Iterable[VerdictRecord],
    runs: Mapping[str, RunRecord],
    judge_family: Callable[[str, str], str],
    schema: Mapping[str, Any],
) -> pl.DataFrame:
    """Scored verdicts (in the order given) × their dimensions (sorted), as ``schema``."""
    head: list[tuple[Any, ...]] = []
    dims: list[str] = []
    scores: list[int] = []
    repeat: list[int] = []
    families: dict[tuple[str, str], str] = {}
    for v in verdicts:
        if not v.scores:
            continue
        run = runs[v.run_id]
        key = (v.judge_id, v.judge_family)
        family = families.get(key)
        if family is None:
            family = families[key] = judge_family(*key)
        names = sorted(v.scores)
        dims += names
        scores += [v.scores[d] for d in names]
        repeat.append(len(names))
        head.append(
            (
                v.campaign_id,
                run.task_id,
                v.run_id,
                run.agent_id,
                v.judge_id,
                family,
                v.judge_model,
                v.sample,
                v.sequence,
            )
        )
    per_verdict = {k: t for k, t in schema.items() if k not in ("dimension", "score")}
    frame = frame_of_rows(head, per_verdict)
    frame = frame[np.repeat(np.arange(len(repeat), dtype=np.int64), repeat)]
    return frame.with_columns(
        pl.Series("dimension", dims, dtype=schema["dimension"]),
        pl.Series("score", scores, dtype=schema["score"]),
    ).select(list(schema))
