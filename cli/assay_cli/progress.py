"""Campaign progress for `assay watch` and `assay run`: the campaign's history
(`assay_schemas.CampaignHistory`), the one fold the report's problems section reads too."""

from __future__ import annotations

from assay_schemas import CampaignHistory, VerdictKey

__all__ = ["Progress", "VerdictKey"]

Progress = CampaignHistory
"""What `assay watch` folds the log into, live."""
