"""Events of a campaign that stops early (#51): the decision, and the runs it cancels."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ._envelope import Event

__all__ = ["CampaignStopped", "RunCancelled", "StoppingFigure", "StoppingReason"]

StoppingReason = Literal["ranking_settled", "ci_width", "decided", "max_cost"]
"""Why a campaign stopped: its rule was met, or its ``max_cost_usd`` was spent."""


class StoppingFigure(BaseModel):
    """One anytime-valid interval the stopping rule read when it decided."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    kind: Literal["score", "pass_share", "difference"]
    """An agent's mean score (0-10), its pass share (0-1), or the paired difference
    ``agent_id − other`` in score points."""
    agent_id: str
    other: str | None = None
    """The agent compared with (``difference`` only)."""
    n: int = Field(ge=0)
    """Complete tasks the interval rests on."""
    estimate: float
    low: float
    high: float


class CampaignStopped(Event):
    """The campaign's ``stopping:`` rule was met (or its cost cap spent) after a wave: the
    runs not yet requested are cancelled. Decided from a prefix of the log, so a replay
    decides the same at the same sequence; its id derives from the campaign id."""

    event_type: Literal["CampaignStopped"] = "CampaignStopped"
    written_by = ("aggregator",)
    reason: StoppingReason
    settled: bool
    """The rule itself was met (False: only ``max_cost_usd`` stopped it)."""
    leader: str | None = None
    """The agent with the highest mean score when it stopped."""
    figures: list[StoppingFigure] = Field(default_factory=list)
    """The intervals the rule read (score and pass share per agent; the leader's
    differences under ``ranking_settled``)."""
    decided_at_sequence: int = Field(ge=1)
    """The log sequence of the event after which the rule was met."""
    cost_usd: float = Field(default=0.0, ge=0.0, allow_inf_nan=False)
    """What the campaign had spent by then (agents and judges)."""
    warnings: list[str] = Field(default_factory=list)

    def summary_line(self) -> str:
        settled = "" if self.settled else ", not settled"
        leader = f", {self.leader} leads" if self.leader else ""
        return f"stopped: {self.reason}{settled}{leader} (at seq {self.decided_at_sequence})"


class RunCancelled(Event):
    """A planned run never requested: its campaign stopped. An ending of its own, never a
    failure (nothing ran); a run already requested is never cancelled."""

    event_type: Literal["RunCancelled"] = "RunCancelled"
    written_by = ("runner",)
    agent_id: str
    epoch: int = Field(ge=0)
    reason: Literal["campaign_stopped"] = "campaign_stopped"

    def summary_line(self) -> str:
        return f"cancelled ({self.reason}): agent {self.agent_id}, epoch {self.epoch}"
