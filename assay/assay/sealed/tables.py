"""Tables among sealed files (CSV, TSV, XLSX, Parquet) read with polars: shape, dtypes,
head, summary. A module of its own because polars is only there with `assay[sealed]`."""

from __future__ import annotations

import io

import polars as pl

from ._readers import TABLE_SUFFIXES, ReadError, open_workbook

__all__ = ["read_table"]


def _frame(data: bytes, suffix: str, sheet: str | None) -> tuple[pl.DataFrame, str]:
    """Parse a table; returns the frame and a note (e.g. the sheets of a workbook)."""
    source = io.BytesIO(data)
    if suffix in (".csv", ".tsv", ".tab"):
        sep = "," if suffix == ".csv" else "\t"
        frame = pl.read_csv(
            source,
            separator=sep,
            infer_schema_length=10_000,
            truncate_ragged_lines=True,
            ignore_errors=True,
        )
        return frame, ""
    if suffix in (".parquet", ".pq"):
        return pl.read_parquet(source), ""
    return _excel(data, sheet)


def _excel(data: bytes, sheet: str | None) -> tuple[pl.DataFrame, str]:
    with open_workbook(data, "the workbook") as book:
        names = list(book.sheetnames)
        name = sheet or names[0]
        if name not in names:
            raise ReadError(f"no sheet {name!r}; sheets: {', '.join(names)}")
        note = f"sheets: {', '.join(names)} (showing {name!r})"
        try:
            return pl.read_excel(io.BytesIO(data), sheet_name=name, engine="openpyxl"), note
        except Exception:  # polars' openpyxl path rejects some sheets; read the cells directly
            rows = [list(r) for r in book[name].iter_rows(values_only=True)]
    if not rows:
        return pl.DataFrame(), note
    header = [str(h) if h is not None else f"column_{i}" for i, h in enumerate(rows[0])]
    body = [[None if v is None else str(v) for v in r] for r in rows[1:]]
    return pl.DataFrame(body, schema=header, orient="row"), note


DESCRIBE_LABEL = "statistic"
"""The column `polars.DataFrame.describe` adds for its row labels."""


def read_table(data: bytes, path: str, *, head: int = 10, sheet: str | None = None) -> str:
    """Shape, dtypes, the first `head` rows and a column summary of a table file."""
    suffix = "." + path.rsplit(".", 1)[-1].lower() if "." in path else ""
    if suffix not in TABLE_SUFFIXES:
        raise ReadError(f"not a table file ({', '.join(TABLE_SUFFIXES)}): {path}")
    try:
        frame, note = _frame(data, suffix, sheet)
    except ReadError:
        raise
    except Exception as e:  # polars/openpyxl raise many types on malformed input
        raise ReadError(f"cannot parse {path} as a table: {type(e).__name__}: {e}") from e
    head = min(max(1, head), 50)
    with pl.Config(tbl_rows=head + 2, tbl_cols=30, fmt_str_lengths=40, tbl_width_chars=200):
        parts = [
            f"shape: {frame.height} rows x {frame.width} columns",
            *([note] if note else []),
            "dtypes: " + ", ".join(f"{k}: {v}" for k, v in frame.schema.items()),
            f"head({head}):\n{frame.head(head)}",
        ]
        if frame.width and frame.height:
            parts.append(f"summary:\n{_summary(frame)}")
    return "\n".join(parts)


def _summary(frame: pl.DataFrame) -> pl.DataFrame:
    """`describe()` of the frame; its label column is named "statistic", so a column of
    that name (a common one in statistics output) is renamed for the summary alone."""
    taken = set(frame.columns)
    renames: dict[str, str] = {}
    if DESCRIBE_LABEL in taken:
        name = DESCRIBE_LABEL + "_"
        while name in taken:
            name += "_"
        renames[DESCRIBE_LABEL] = name
    return frame.rename(renames).describe()
