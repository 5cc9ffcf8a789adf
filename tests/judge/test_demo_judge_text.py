"""The demo's scripted judges read the agent's final message with linear-time patterns,
and read it as the agent wrote it (the block's entities undone)."""

from __future__ import annotations

import time
from typing import Any

from assay.providers import UserMessage
from assay_judge.delimit import final_message_block
from assay_testing.demo import JudgeTemper, judge_script
from assay_testing.scripted import ScriptRequest


def _verdict(answer: str) -> dict[str, Any]:
    case = "- results/a.csv  (10 bytes, text/csv)\n" + final_message_block(answer)
    request = ScriptRequest(
        api="openai", model="m", messages=(UserMessage(content=case),), tools=(), turn=2
    )
    reply = judge_script(JudgeTemper("j", shift=0))(request)
    [call] = reply.tool_calls
    assert call.name == "submit_verdict"
    arguments: dict[str, Any] = call.arguments
    return arguments


def test_a_long_word_in_the_answer_is_read_in_linear_time() -> None:
    started = time.monotonic()
    verdict = _verdict("see results/a.csv " + "A" * 1_000_000)
    assert time.monotonic() - started < 2.0
    assert verdict["failure_tags"] == []


def test_claims_are_read_from_the_unescaped_answer() -> None:
    verdict = _verdict("B > A & see results/a.csv and missing.png")
    assert "claimed_file_missing" in verdict["failure_tags"]
