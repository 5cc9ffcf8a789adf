"""A campaign's ``stopping:``: stop running when the answer is settled.

The rule is checked after every wave of ``check_every`` tasks on anytime-valid
confidence sequences (``assay_report.statistics.decide``), so stopping at whichever
wave meets it keeps the stated confidence. The unit is the task: a task counts for an
agent once all its runs (every epoch) are scored, so waves are counted in tasks, not
epochs (a task's mean must not change after it entered the sequence).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["StoppingRule", "StoppingSpec"]

StoppingRule = Literal["ranking_settled", "ci_width", "decided"]


class StoppingSpec(BaseModel):
    """When a campaign may stop before running every task."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    when: StoppingRule
    """``ranking_settled``: the leader's difference to every other agent is above zero;
    ``ci_width``: every agent's score interval is narrower than ``width``;
    ``decided``: every agent's pass share is above or below ``threshold``."""
    confidence: float = Field(default=0.95, ge=0.5, le=0.999)
    """Confidence of the claim the rule makes, whenever it stops."""
    min_tasks_per_agent: int = Field(default=10, ge=2, le=1_000_000)
    """Tasks every agent must have complete before the rule may stop the campaign."""
    check_every: int = Field(default=10, ge=1, le=1_000_000)
    """Tasks per wave: the rule is checked after each wave."""
    width: float | None = Field(default=None, gt=0, le=10)
    """``ci_width`` only: the widest interval (score points, 0-10) that counts as settled."""
    threshold: float | None = Field(default=None, gt=0, lt=1)
    """``decided`` only: the pass share each agent is decided against."""
    max_cost_usd: float | None = Field(default=None, ge=0.0, allow_inf_nan=False)
    """Stop once this much is spent, settled or not (the report then says it was not)."""

    @model_validator(mode="after")
    def _rule_figures(self) -> StoppingSpec:
        needs = {"ci_width": "width", "decided": "threshold"}
        for rule, field in needs.items():
            given = getattr(self, field) is not None
            if self.when == rule and not given:
                raise ValueError(f"stopping: when: {rule} needs {field}")
            if self.when != rule and given:
                raise ValueError(f"stopping: {field} applies only to when: {rule}")
        return self
