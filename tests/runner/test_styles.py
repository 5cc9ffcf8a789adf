"""A control's answer opens as its look-alike's first answer in the log did (issue #47):
read from a real nats-server's log, the same for every reader and whenever it reads."""

from __future__ import annotations

import asyncio
import logging

import pytest

from assay.bus import Bus
from assay_runner.styles import FirstAnswers
from assay_schemas import AgentFinished, AgentSpec, CampaignSpec, StopReason, Usage, run_id_for
from assay_testing.events import campaign_started

CAMPAIGN = CampaignSpec(
    campaign_id="c1",
    agents=[AgentSpec(agent_id="careful", model="m1"), AgentSpec(agent_id="terse", model="m2")],
    epochs=2,
)


def _answer(
    bus: Bus, agent: str, task: str, answer: str, *, epoch: int = 0, stop: StopReason = "submitted"
) -> AgentFinished:
    run_id = run_id_for("c1", task, agent, epoch)
    return AgentFinished(
        event_id=AgentFinished.id_for(run_id),
        campaign_id="c1",
        run_id=run_id,
        task_id=task,
        stop_reason=stop,
        final_message=answer,
        steps=3,
        usage=Usage(),
        producer=bus.producer,
    )


async def test_the_first_answer_in_the_log_is_every_readers(bus: Bus) -> None:
    await bus.publish(campaign_started(CAMPAIGN, producer=bus.producer))
    # Not answers, or not a campaign agent's run: none of them sets a style.
    await bus.publish(_answer(bus, "careful", "t0", "Notes:\n\nran out", stop="max_steps"))
    await bus.publish(_answer(bus, "someone-else", "t0", "Forged:\n\nx"))
    await bus.publish(_answer(bus, "careful", "t1", "Summary:\n\nfound it", epoch=1))
    await bus.publish(_answer(bus, "terse", "t1", "found it, no label"))
    await bus.publish(_answer(bus, "careful", "t2", "Findings:\n\nlater, another label"))
    early = FirstAnswers(bus=bus)
    assert await early.opening("c1", "careful", most_s=1) == "Summary:\n\n"
    assert await early.opening("c1", "terse", most_s=1) == ""
    # A second reader (another replica) reading later finds the same first answers.
    late = FirstAnswers(bus=bus)
    await bus.publish(_answer(bus, "terse", "t2", "Result:\n\nthen a label"))
    assert await late.opening("c1", "terse", most_s=1) == ""
    assert await late.opening("c1", "careful", most_s=1) == "Summary:\n\n"


async def test_a_reader_waits_for_the_first_answer_and_gives_up_saying_so(
    bus: Bus, caplog: pytest.LogCaptureFixture
) -> None:
    await bus.publish(campaign_started(CAMPAIGN, producer=bus.producer))
    answers = FirstAnswers(bus=bus, poll_s=0.05, most_poll_s=0.1)
    waiting = asyncio.create_task(answers.opening("c1", "careful", most_s=30))
    await asyncio.sleep(0.3)
    assert not waiting.done()
    await bus.publish(_answer(bus, "careful", "t3", "Summary:\n\nok"))
    assert await asyncio.wait_for(waiting, 10) == "Summary:\n\n"
    # An agent that never answers: the plan's style (None) once the wait is over.
    with caplog.at_level(logging.WARNING, logger="assay.runner"):
        assert await answers.opening("c1", "terse", most_s=0.3) is None
    assert "no answer of agent terse" in caplog.text
    # A campaign never declared: nothing to wear.
    assert await answers.opening("c9", "careful", most_s=0.1) is None


async def test_a_hostile_answer_opening_is_bounded(bus: Bus) -> None:
    """An agent's answer is hostile input: its opening is read by a linear pattern over a
    bounded prefix, and a label longer than a label is none."""
    await bus.publish(campaign_started(CAMPAIGN, producer=bus.producer))
    await bus.publish(_answer(bus, "careful", "t1", "a" * 60_000 + ":\n\n" + "b" * 4000))
    await bus.publish(_answer(bus, "terse", "t1", ("x" * 30 + ":\n") * 2000))
    answers = FirstAnswers(bus=bus)
    assert await answers.opening("c1", "careful", most_s=1) == ""
    assert await answers.opening("c1", "terse", most_s=1) == "x" * 30 + ":\n"
