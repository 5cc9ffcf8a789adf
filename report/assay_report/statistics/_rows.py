"""Result rows: frozen pydantic models, one per statistic, each convertible to polars.

Every statistic returns a ``tuple`` of rows of one model. ``Model.to_frame(rows)`` (or
:func:`to_frame`) turns them into a polars table whose schema comes from the model, so
an empty result still has the right columns. ``group`` is the task-attribute value the
row belongs to (``None`` when the statistic was not grouped).
"""

from __future__ import annotations

import types
from collections.abc import Sequence
from typing import Any, Literal, Self, TypedDict, Union, get_args, get_origin

import polars as pl
from pydantic import BaseModel, ConfigDict

__all__ = ["AgentKey", "AgentRow", "Row", "frames_of", "to_frame"]

_SCALARS: dict[Any, pl.DataType] = {
    str: pl.String(),
    int: pl.Int64(),
    float: pl.Float64(),
    bool: pl.Boolean(),
}


def _dtype(annotation: Any) -> pl.DataType:
    origin = get_origin(annotation)
    if origin in (Union, types.UnionType):
        inner = [a for a in get_args(annotation) if a is not type(None)]
        return _dtype(inner[0])
    if origin is tuple:
        return pl.List(_dtype(get_args(annotation)[0]))
    if origin is Literal:  # a closed set of names: stored as their type (str)
        return _SCALARS[type(get_args(annotation)[0])]
    return _SCALARS[annotation]


class Row(BaseModel):
    """Base of every result row: frozen, no extra fields, documented fields."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    @classmethod
    def polars_schema(cls) -> dict[str, pl.DataType]:
        """Column name → polars dtype, derived from the field annotations."""
        return {name: _dtype(f.annotation) for name, f in cls.model_fields.items()}

    @classmethod
    def to_frame(cls, rows: Sequence[Self]) -> pl.DataFrame:
        """Rows as a polars table with this model's schema (also when empty)."""
        schema = cls.polars_schema()
        data = {name: [getattr(r, name) for r in rows] for name in schema}
        return pl.DataFrame(data, schema=schema)


class AgentRow(Row):
    """Base of the rows that hold one agent's figures (in one task group)."""

    group: str | None
    """Task-attribute value of this row, or None when not grouped."""
    agent_id: str


class AgentKey(TypedDict):
    """The fields an :class:`AgentRow` leads with, as a statistic fills them in."""

    group: str | None
    agent_id: str


def to_frame(rows: Sequence[Row], row_type: type[Row] | None = None) -> pl.DataFrame:
    """Turn result rows into a polars table; ``row_type`` is needed only when empty."""
    if row_type is None:
        if not rows:
            raise ValueError("to_frame: pass row_type for an empty result")
        row_type = type(rows[0])
    return row_type.to_frame(rows)


def frames_of(model: BaseModel) -> dict[str, pl.DataFrame]:
    """Every tuple-of-rows field of a report model as a polars table, keyed by field name."""
    out: dict[str, pl.DataFrame] = {}
    for name, field in type(model).model_fields.items():
        if get_origin(field.annotation) is tuple:
            row_type = get_args(field.annotation)[0]
            assert isinstance(row_type, type) and issubclass(row_type, Row)
            out[name] = row_type.to_frame(getattr(model, name))
    return out
