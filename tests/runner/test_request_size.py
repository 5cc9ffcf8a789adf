"""A run's request size, measured once per message: the same figure as measuring the
whole conversation again at every turn, whatever the conversation does."""

from __future__ import annotations

import random

from assay.providers import AssistantMessage, Message, ToolCall, ToolResultMessage, UserMessage
from assay_runner.book import RequestSize, request_chars
from assay_runner.tools import TOOLS


def _turn(rng: random.Random, i: int) -> list[Message]:
    call = ToolCall(
        id=f"c{i}", name="bash", arguments='{"command": "%s"}' % ("x" * rng.randrange(50))
    )
    return [
        AssistantMessage(text="t" * rng.randrange(20) or None, tool_calls=(call,)),
        ToolResultMessage(call_id=f"c{i}", content="é" * rng.randrange(300)),
    ]


def test_a_growing_conversation_measures_as_a_whole() -> None:
    rng = random.Random(7)
    sizes = RequestSize()
    messages: list[Message] = [UserMessage(content="analyse the data")]
    for i in range(40):
        assert sizes.of(tuple(messages), TOOLS) == request_chars(messages, TOOLS)
        messages += _turn(rng, i)


def test_a_conversation_cut_replaced_or_other_tools_is_measured_again() -> None:
    rng = random.Random(11)
    sizes = RequestSize()
    messages: list[Message] = [UserMessage(content="p")]
    for i in range(6):
        messages += _turn(rng, i)
    assert sizes.of(messages, TOOLS) == request_chars(messages, TOOLS)
    cut = messages[:5]  # shorter than measured
    assert sizes.of(cut, TOOLS) == request_chars(cut, TOOLS)
    # As long as measured, its last message another: not the same conversation.
    other = [*cut[:-1], ToolResultMessage(call_id="c1", content="another answer, longer")]
    assert sizes.of(other, TOOLS) == request_chars(other, TOOLS)
    # Its first message another (the rest the same objects).
    again = [UserMessage(content="a different task, a longer prompt"), *other[1:]]
    assert sizes.of(again, TOOLS) == request_chars(again, TOOLS)
    assert sizes.of(again, TOOLS[:2]) == request_chars(again, TOOLS[:2])
    assert sizes.of([], ()) == 0
