"""The aggregator service: every event folded, in log order, into one state; snapshots,
replay, the counting rule (what counts), invariants, audit and rejudging.

What the state is and what is read off it (the projections, the statistics, the report
and its renderers) lives one floor down in `assay_report`, with no bus; the web app and
the review desk one floor up in `assay_viewer`.
"""

from .fold import apply, fold

__all__ = ["apply", "fold"]
