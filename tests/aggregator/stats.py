"""Running one statistic the way ``compute_statistics`` does: on every context, in order."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from assay_report import statistics as st

R = TypeVar("R", bound=st.Row)


def rows_of(
    statistic: Callable[[st.Context], list[R]], tables: st.Tables, **settings: Any
) -> tuple[R, ...]:
    """The statistic's rows over every context of ``tables`` (``settings``: the fields of AnalysisSettings)."""
    return tuple(
        row
        for ctx in st.contexts(tables, st.AnalysisSettings(**settings))
        for row in statistic(ctx)
    )
