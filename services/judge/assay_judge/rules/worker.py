"""Rule checks in a worker process, each check under a time budget.

The checks are linear-time, but linear over megabytes of agent text is still CPU: run in
the service's process they would hold the GIL that every other service of a one-process
stack needs. Each evaluation runs in a `Killable` process that names each check as it
starts it; one that runs past the budget is killed and the error names the check.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from assay_schemas import JudgingError

from ..killable import Died, Killable, OverTime, Raised
from .checks import RuleVerdict

__all__ = ["CheckFailed", "Evaluator", "RuleWorkers"]

Evaluator = Callable[..., RuleVerdict]
"""`evaluate` or a stand-in: keyword arguments plus `on_check`; module-level (the worker
imports it by name)."""


class CheckFailed(JudgingError):
    """A check ran past its budget, raised, or ended its worker; the message says which."""


@dataclass
class RuleWorkers:
    """Runs evaluations in worker processes with a per-check time budget."""

    budget_s: float
    processes: Killable = field(default_factory=Killable)

    async def run(self, evaluator: Evaluator, **kwargs: Any) -> RuleVerdict:
        """`evaluator(**kwargs, on_check=...)` in a worker; CheckFailed says what went wrong
        (Closed, when the service stops, propagates: the message is redelivered)."""
        try:
            verdict: RuleVerdict = await self.processes.call(
                evaluator, kwargs, seconds=self.budget_s, steps=True
            )
        except OverTime as e:
            raise CheckFailed(f"check {e.step!r} ran past its {e.seconds:g} s budget") from e
        except Died as e:
            raise CheckFailed(f"check {e}") from e
        except Raised as e:  # by a check: the task's or the agent's fault
            raise CheckFailed(str(e)) from e
        return verdict

    def close(self) -> None:
        """Kill running checks and refuse new ones."""
        self.processes.close()
