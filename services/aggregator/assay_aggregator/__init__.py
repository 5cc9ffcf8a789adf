"""The aggregator: projections folded from the log, the report, replay, audit, rejudging.

Light names are re-exported here; the service (``app``), the CLI helpers (``verify``,
``audit``, ``rejudge``, ``html``, ``terminal``) and the statistics library
(``statistics``) are imported from their modules.
"""

from .canonical import canonical_json
from .fold import apply, fold
from .projections import TABLE_NAMES, Projections
from .report import Report, build_report, report_json, report_seed
from .state import State

__all__ = [
    "TABLE_NAMES",
    "Projections",
    "Report",
    "State",
    "apply",
    "build_report",
    "canonical_json",
    "fold",
    "report_json",
    "report_seed",
]
