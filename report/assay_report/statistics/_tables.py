"""Input tables of the statistics library: schemas, validation and campaign filtering.

Three long-form polars tables carry everything the statistics need. Column names and
kinds (``str``, ``int``, ``float``, ``bool``) are fixed; any integer or float width is
accepted and string columns may hold empty strings (task attributes often do).

``ratings`` — one row per run × judge × sample × dimension:
    campaign_id str, task_id str, run_id str, agent_id str, agent_family str, epoch int,
    judge_id str, judge_family str, sample int, dimension str, score int (0-10),
    domain str, phase str, difficulty str.

``runs`` — one row per run (every run, judged or not):
    campaign_id str, task_id str, run_id str, agent_id str, agent_family str, epoch int,
    domain str, phase str, difficulty str, state str ("judged", "sealed", "failed", ...),
    infrastructure_failure bool, empty_artifacts bool, latency_s float, cost_usd float,
    steps int, input_tokens int, output_tokens int, cached_tokens int.

``tags`` — one row per run × judge × sample × failure tag:
    campaign_id str, task_id str, run_id str, agent_id str, judge_id str, sample int,
    tag str.

The verdict denominators of tag rates (run × judge × sample) come from ``ratings``: a
verdict exists when it scored at least one dimension. Tasks are the bootstrap clusters
and are keyed by ``task_id`` alone, so one task reused across campaigns is one cluster.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

import polars as pl

from assay_schemas import InvalidInput

__all__ = [
    "RATINGS_SCHEMA",
    "RUNS_SCHEMA",
    "TAGS_SCHEMA",
    "TASK_ATTRIBUTES",
    "StatisticsInputError",
    "Tables",
    "filter_campaign",
    "make_tables",
    "validate_table",
    "validated",
]

Kind = Literal["str", "int", "float", "bool"]
TaskAttribute = Literal["domain", "phase", "difficulty"]

TASK_ATTRIBUTES: tuple[TaskAttribute, ...] = ("domain", "phase", "difficulty")
"""Task attributes every per-agent table can be grouped by."""

_RUN_KEYS: dict[str, Kind] = {
    "campaign_id": "str",
    "task_id": "str",
    "run_id": "str",
    "agent_id": "str",
    "agent_family": "str",
    "epoch": "int",
}
"""The columns that say which run a row belongs to (leading ``ratings`` and ``runs``)."""
_TASK_ATTRIBUTE_KINDS: dict[str, Kind] = dict.fromkeys(TASK_ATTRIBUTES, "str")

RATINGS_SCHEMA: dict[str, Kind] = {
    **_RUN_KEYS,
    "judge_id": "str",
    "judge_family": "str",
    "sample": "int",
    "dimension": "str",
    "score": "int",
    **_TASK_ATTRIBUTE_KINDS,
}
"""Columns of ``ratings`` (one row per run × judge × sample × dimension)."""

RUNS_SCHEMA: dict[str, Kind] = {
    **_RUN_KEYS,
    **_TASK_ATTRIBUTE_KINDS,
    "state": "str",
    "infrastructure_failure": "bool",
    "empty_artifacts": "bool",
    "latency_s": "float",
    "cost_usd": "float",
    "steps": "int",
    "input_tokens": "int",
    "output_tokens": "int",
    "cached_tokens": "int",
}
"""Columns of ``runs`` (one row per run)."""

TAGS_SCHEMA: dict[str, Kind] = {
    "campaign_id": "str",
    "task_id": "str",
    "run_id": "str",
    "agent_id": "str",
    "judge_id": "str",
    "sample": "int",
    "tag": "str",
}
"""Columns of ``tags`` (one row per run × judge × sample × tag)."""

_SCHEMAS = {"ratings": RATINGS_SCHEMA, "runs": RUNS_SCHEMA, "tags": TAGS_SCHEMA}


class StatisticsInputError(InvalidInput):
    """An input table of the statistics library is malformed (names table and column)."""


class Tables(NamedTuple):
    """The three validated input tables; build with :func:`make_tables`."""

    ratings: pl.DataFrame
    """One row per run × judge × sample × dimension (see ``RATINGS_SCHEMA``)."""
    runs: pl.DataFrame
    """One row per run (see ``RUNS_SCHEMA``)."""
    tags: pl.DataFrame
    """One row per run × judge × sample × tag (see ``TAGS_SCHEMA``); may be empty."""


class _Checked(Tables):
    """Tables as :func:`make_tables` returned them: checked already. What is made from
    them (``_replace``) is plain tables again, checked when used."""

    __slots__ = ()

    # Not a _Checked: the replaced tables were never checked (mypy would have Self).
    def _replace(self, **changes: pl.DataFrame) -> Tables:  # type: ignore[override]
        return Tables(*self)._replace(**changes)


def validated(tables: Tables) -> Tables:
    """`tables` validated: as they are when :func:`make_tables` made them (a 10x log's
    ratings take 0.05 s to check for repeats), else through it."""
    return tables if isinstance(tables, _Checked) else make_tables(*tables)


def _kind_ok(dtype: pl.DataType, kind: Kind) -> bool:
    if kind == "str":
        return dtype == pl.String or dtype == pl.Categorical or dtype == pl.Enum
    if kind == "int":
        return dtype.is_integer()
    if kind == "float":
        # Integer latencies/costs are fine; they are read as floats.
        return dtype.is_float() or dtype.is_integer()
    return dtype == pl.Boolean


_AMOUNTS = ("latency_s", "cost_usd", "steps", "input_tokens", "output_tokens", "cached_tokens")
"""Run amounts that must be finite and non-negative: a NaN or infinity would flow into the
cost tables and reach report.json as null, the same as "undefined"."""


def _amounts_ok(runs: pl.DataFrame) -> None:
    for col in _AMOUNTS:
        amount = pl.col(col).cast(pl.Float64)
        bad = runs.filter(~(amount.is_finite() & (amount >= 0)))
        if bad.height:
            run, value = bad.sort("run_id").select("run_id", col).row(0)
            raise StatisticsInputError(
                f"table 'runs': column {col!r} must be finite and non-negative, found "
                f"{value!r} for run {run!r} ({bad.height} run(s))"
            )


def validate_table(df: pl.DataFrame, name: Literal["ratings", "runs", "tags"]) -> pl.DataFrame:
    """Check ``df`` against the named schema and return it with canonical dtypes.

    Raises :class:`StatisticsInputError` naming the table and the first missing or
    mistyped column, or a null in a required column, or a run amount (latency, cost,
    steps, tokens) that is not finite and non-negative. Extra columns are kept.
    """
    schema = _SCHEMAS[name]
    missing = [c for c in schema if c not in df.columns]
    if missing:
        raise StatisticsInputError(
            f"table {name!r} is missing column(s) {', '.join(repr(c) for c in missing)}"
        )
    casts: list[pl.Expr] = []
    for col, kind in schema.items():
        dtype = df.schema[col]
        if not _kind_ok(dtype, kind):
            raise StatisticsInputError(
                f"table {name!r}: column {col!r} has dtype {dtype}, expected {kind}"
            )
        nulls = df[col].null_count()
        if nulls:
            raise StatisticsInputError(f"table {name!r}: column {col!r} has {nulls} null(s)")
        target = {"str": pl.String, "int": pl.Int64, "float": pl.Float64, "bool": pl.Boolean}
        casts.append(pl.col(col).cast(target[kind]))
    out = df.with_columns(casts)
    if name == "runs":
        _amounts_ok(out)
    if name == "ratings" and out.height:
        lo, hi = out["score"].min(), out["score"].max()
        if not (isinstance(lo, int) and isinstance(hi, int) and lo >= 0 and hi <= 10):
            raise StatisticsInputError(
                f"table 'ratings': column 'score' must lie in 0-10, found {lo!r}..{hi!r}"
            )
    return out


def make_tables(
    ratings: pl.DataFrame, runs: pl.DataFrame, tags: pl.DataFrame | None = None
) -> Tables:
    """Validate the input tables and bundle them; ``tags`` defaults to an empty table.

    Also refuses a rating given twice (same run, judge, sample and dimension: never
    averaged), and checks that every rated run appears in ``runs`` (its infrastructure flag and
    attributes come from there), naming the first offending run.
    """
    r = validate_table(ratings, "ratings")
    u = validate_table(runs, "runs")
    if tags is None:
        tags = pl.DataFrame(schema={c: pl.String for c in TAGS_SCHEMA}).with_columns(
            pl.col("sample").cast(pl.Int64)
        )
    t = validate_table(tags, "tags")
    dup = u["run_id"].is_duplicated()
    if dup.any():
        raise StatisticsInputError(
            f"table 'runs': run_id {u['run_id'].filter(dup)[0]!r} appears more than once"
        )
    key = ["run_id", "judge_id", "sample", "dimension"]
    twice = r.select(key).filter(r.select(key).is_duplicated())
    if twice.height:
        run, judge, sample, dim = twice.sort(key).row(0)
        raise StatisticsInputError(
            f"table 'ratings': run {run!r}, judge {judge!r}, sample {sample}, dimension "
            f"{dim!r} is rated more than once"
        )
    unknown = r.select("run_id").unique().join(u.select("run_id"), on="run_id", how="anti")
    if unknown.height:
        raise StatisticsInputError(
            f"table 'ratings': run_id {unknown['run_id'].sort()[0]!r} is not in table 'runs'"
        )
    return _Checked(r, u, t)


def filter_campaign(tables: Tables, campaign_ids: str | list[str]) -> Tables:
    """Keep only rows of the given campaign(s) in every table."""
    ids = [campaign_ids] if isinstance(campaign_ids, str) else list(campaign_ids)
    keep = pl.col("campaign_id").is_in(ids)
    return Tables(tables.ratings.filter(keep), tables.runs.filter(keep), tables.tags.filter(keep))
