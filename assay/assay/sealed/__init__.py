"""Reading sealed files: the one reader the judge's tools and the viewer's previews share.

Text pages, DOCX and PDF text, XLSX workbooks and image headers here; tables with polars
in `assay.sealed.tables`. The office parsers (python-docx, pypdf, openpyxl) and polars come
with the `sealed` extra of `assay`. Each caller keeps its own way of bounding a parse in
time (the judge kills a process, the viewer abandons a thread).
"""

# `_readers` lists its public names once, in its own ``__all__``.
from . import _readers
from ._readers import *  # noqa: F403

__all__ = [*_readers.__all__]
