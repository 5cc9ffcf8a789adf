"""What did not go as planned in a campaign, seen live by `assay watch` and `assay run`:
the section the report carries (`Report.problems`), computed from the same fold."""

from __future__ import annotations

from assay_schemas import Cause, Problems, problems_of

__all__ = ["Cause", "Problems", "problems_of"]
