"""The report: what a campaign's log comes to, read off the aggregator's state, with no bus.

The state the fold keeps (`State`) and the tables read from it (`Projections`), the
statistics, the report builder (`build_report`), its renderers (terminal, HTML, charts),
judge validity and export. Nothing here talks to NATS: the aggregator service folds the
log into a `State` and calls `build_report`, and so do `assay report` and the viewer.

Light names are re-exported here; the statistics library (``statistics``), the renderers
(``html``, ``terminal``) and the rest are imported from their modules.
"""

from .canonical import canonical_json
from .projections import TABLE_NAMES, Projections
from .report import Report, build_report, report_json, report_seed
from .state import State

__all__ = [
    "TABLE_NAMES",
    "Projections",
    "Report",
    "State",
    "build_report",
    "canonical_json",
    "report_json",
    "report_seed",
]
