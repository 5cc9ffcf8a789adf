"""What did not go as planned in a campaign, from its `CampaignHistory`: failures grouped
by cause, and whatever the log still owes. A section of the report (so a replay rebuilds
it), shown by `assay watch` and `assay run`, and what `assay run`'s exit code follows.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict, Field

from ._campaign_history import CampaignHistory
from ._events import JudgmentFailed, RunFailed

__all__ = ["Cause", "Problems", "problems_of"]


class Cause(BaseModel):
    """Failures that share a stage and an error class; the first message as the example."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    stage: str
    error_class: str
    first_message: str
    count: int = Field(ge=1)


class Problems(BaseModel):
    """Failures by cause and what is still pending; `ok` when all went well."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    causes: tuple[Cause, ...] = ()
    """Infrastructure failures (runs and judgments the platform failed: never scored)."""
    pending_runs: int = 0
    """Expected runs short of their outcome: not ended, or ended and not sealed."""
    pending_verdicts: dict[str, int] = {}
    """judge id -> owed verdicts not given."""
    complete: bool = True
    scored_failures: tuple[Cause, ...] = ()
    """Failures of the agents or judges themselves (the scores already count them)."""

    @property
    def ok(self) -> bool:
        """Nothing failed for the platform's sake and nothing is missing."""
        return self.complete and not self.causes

    def lines(self) -> list[str]:
        """One line per pending item, for the terminal and the HTML."""
        out = []
        if self.pending_runs:
            out.append(f"{self.pending_runs} expected run(s) never ended (or were never sealed)")
        out += [f"{n} verdict(s) of {j} never came" for j, n in self.pending_verdicts.items()]
        return out


def _causes(failures: Iterable[tuple[str, RunFailed | JudgmentFailed]]) -> tuple[Cause, ...]:
    grouped: dict[tuple[str, str], list[str]] = defaultdict(list)
    for stage, failure in failures:
        info = failure.error_info
        grouped[(stage, info.error_class or "")].append(info.message)
    return tuple(
        Cause(stage=stage, error_class=cls or "-", first_message=messages[0], count=len(messages))
        for (stage, cls), messages in sorted(grouped.items(), key=lambda kv: -len(kv[1]))
    )


def problems_of(histories: CampaignHistory | Iterable[CampaignHistory]) -> Problems:
    """Group the failures on the log by cause and count what is still owed (over one
    campaign's history, or several: complete when each of them is)."""
    folds = [histories] if isinstance(histories, CampaignHistory) else list(histories)
    failures: list[tuple[str, RunFailed | JudgmentFailed]] = []
    for h in folds:
        failures += [(f.stage, f) for f in h.failures.values()]
        failures += [("judge", f) for f in h.judgment_failures.values()]
    pending = Counter(judge for h in folds for _, judge, _ in h.pending_verdicts())
    return Problems(
        causes=_causes((s, f) for s, f in failures if f.infrastructure),
        pending_runs=sum(len(h.pending_runs()) for h in folds),
        pending_verdicts=dict(sorted(pending.items())),
        complete=all(h.complete for h in folds),
        scored_failures=_causes((s, f) for s, f in failures if not f.infrastructure),
    )
