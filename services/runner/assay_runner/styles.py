"""A model's house style as the log first shows it: what a control's answer opens with.

A model's answers open with a label of its own, or none (``Summary:``); a control that
wears the model keeps the reference's label where the model drops it, and is told by its
opening (issue #47). So a control's answer opens as its look-alike's *first answer in the
campaign's log* did (`assay.tasks.answer_opening`). That is one fact of the log, fixed
once it is there, the same whichever runner replica drives the control and whenever:
a replica that reads the campaign's answers so far and finds one of the look-alike's has
found its first, since every later answer is stored after what it read. A replica that
learned styles from the runs it drove itself answered by the plan's label until the
look-alike's first answer reached it, and two deployments of one campaign then differed
in some controls' verdicts.

Until the look-alike's first answer is in the log, the control waits for it before its
first step, aside (its worker slot given to other runs, the look-alike's among them, so
a control can never hold up what it waits for), and so counted in neither its steps'
latencies nor its duration, which start at its first model call.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

from assay.bus import Bus, read_campaign, waiting_aside
from assay.tasks import answer_opening
from assay_schemas import AgentFinished, run_id_for

__all__ = ["ANSWERED", "FirstAnswers"]

log = logging.getLogger("assay.runner")

ANSWERED = frozenset({"submitted", "model_stopped"})
"""Stop reasons of a run that answered (its final message is its answer)."""


@dataclass
class _Campaign:
    """What one campaign's log has shown so far: each agent's first answer's opening."""

    read_to: int = 0
    """The last sequence read of the campaign's AgentFinished events."""
    openings: dict[str, str] = field(default_factory=dict)
    """Agent id → the opening of its first answer in the log."""
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    """One read of the log at a time (the controls of a campaign start together)."""


@dataclass(kw_only=True)
class FirstAnswers:
    """Each campaign agent's first answer's opening, read from the log once and kept
    (a short label per agent and campaign)."""

    bus: Bus
    poll_s: float = 0.25
    """The first pause between two reads while waiting (doubled up to `most_poll_s`)."""
    most_poll_s: float = 2.0
    _campaigns: dict[str, _Campaign] = field(default_factory=dict)

    async def opening(self, campaign_id: str, agent_id: str, *, most_s: float) -> str | None:
        """The opening of `agent_id`'s first answer in the campaign, waited for aside
        while the log holds none (None after `most_s`, which the log says)."""
        found = await self._read(campaign_id, agent_id)
        if found is not None:
            return found
        loop = asyncio.get_running_loop()
        deadline = loop.time() + most_s
        pause = self.poll_s
        async with waiting_aside():
            while found is None and loop.time() < deadline:
                await asyncio.sleep(min(pause, max(0.0, deadline - loop.time())))
                pause = min(pause * 2, self.most_poll_s)
                found = await self._read(campaign_id, agent_id)
        if found is None:
            log.warning(
                "campaign %s: no answer of agent %s in %.0f s; its controls answer as planned",
                campaign_id,
                agent_id,
                most_s,
            )
        return found

    async def _read(self, campaign_id: str, agent_id: str) -> str | None:
        """Read the campaign's answers stored since the last read; `agent_id`'s first's
        opening, if one is there by now."""
        seen = self._campaigns.setdefault(campaign_id, _Campaign())
        if agent_id in seen.openings:
            return seen.openings[agent_id]
        async with seen.lock:
            spec = await read_campaign(self.bus, campaign_id)
            if spec is None:
                return None
            subject = self.bus.subjects.event(AgentFinished.__name__, campaign_id, "*")
            async for logged in self.bus.replay(start=seen.read_to + 1, subject=subject, lookups=4):
                seen.read_to = logged.sequence
                end = logged.event
                if not isinstance(end, AgentFinished) or end.stop_reason not in ANSWERED:
                    continue
                if end.task_id is None:
                    continue
                for agent in spec.agents:  # whose run it is: the run id says, by a hash
                    if agent.agent_id in seen.openings:
                        continue
                    if any(
                        end.run_id == run_id_for(campaign_id, end.task_id, agent.agent_id, e)
                        for e in range(spec.epochs)
                    ):
                        seen.openings[agent.agent_id] = answer_opening(end.final_message)
                        break
        return seen.openings.get(agent_id)
