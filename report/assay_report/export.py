"""`assay export --parquet DIR`: every projection table and report frame as Parquet."""

from __future__ import annotations

from pathlib import Path

from .projections import Projections
from .report import Report, report_frames

__all__ = ["export_parquet"]


def export_parquet(p: Projections, report: Report, folder: Path) -> list[Path]:
    """Write ``projection_<table>.parquet`` and ``report_<frame>.parquet``; return the paths."""
    folder.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for prefix, frames in (("projection", p.tables()), ("report", report_frames(report))):
        for name, df in sorted(frames.items()):
            path = folder / f"{prefix}_{name}.parquet"
            df.write_parquet(path)
            written.append(path)
    return written
