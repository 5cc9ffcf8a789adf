"""Invalid verdicts are repaired, or recorded as JudgmentFailed with the raw output kept."""

from __future__ import annotations

import json

import pytest

from assay_schemas import JudgmentFailed, Price, Usage
from assay_testing.scripted import Fault, ScriptedSequence, ScriptedToolCall, ScriptReply

from .cases import RUBRIC, Judging, judgments, of_type, verdict

pytestmark = pytest.mark.timeout(60)

MISSING_DIMENSION = verdict(7)
del MISSING_DIMENSION["scores"]["communication"]


async def test_garbage_twice_then_valid_is_repaired(judging: Judging) -> None:
    model = judging.scripted(
        ScriptedSequence(
            [
                ScriptReply.say("Overall I would give it a 7."),
                ScriptReply.call("submit_verdict", '{"scores": {"accuracy": 11'),
                ScriptReply.call("submit_verdict", verdict(7, files=["out.csv"])),
            ]
        ),
    )
    events, _ = await judging.one_run([judging.spec("fixable", model, max_repairs=2)])
    [judgment] = judgments(events)
    assert judgment.scores["communication"].score == 7 and judgment.files_cited == ["out.csv"]
    assert judgment.attempts == 3 and judgment.rejected_outputs is not None
    requests = [r.request for r in judging.server.requests(model) if r.request]
    assert len(requests) == 3
    # Each repair prompt names the problem.
    assert "no submit_verdict tool call" in requests[1].last_user_text
    assert "not valid JSON" in requests[2].tool_results[0].text
    assert requests[2].tool_results[0].text.count("attempt") == 1


async def test_repaired_verdict_records_two_attempts_the_rejected_output_and_campaign_cost(
    judging: Judging,
) -> None:
    boolean = verdict(7)
    boolean["scores"]["communication"]["score"] = True  # strict: never read as 1
    usage = Usage(input_tokens=1000, output_tokens=200, cached_tokens=400)

    def submit(arguments: dict[str, object]) -> ScriptReply:
        call = ScriptedToolCall(name="submit_verdict", arguments=arguments)  # type: ignore[arg-type]
        return ScriptReply(tool_calls=(call,), usage=usage)

    model = judging.scripted(ScriptedSequence([submit(boolean), submit(verdict(7))]))
    spec = judging.spec("repaired", model, max_repairs=2)
    prices = {model: Price(input_per_mtok=2.0, output_per_mtok=8.0, cached_input_per_mtok=0.5)}
    events, _ = await judging.one_run([spec], prices=prices)
    [judgment] = judgments(events)
    assert judgment.attempts == 2
    assert judgment.rejected_outputs is not None
    raw = json.loads(judging.store.get_bytes(judgment.rejected_outputs.sha256))
    assert len(raw["attempts"]) == 1
    assert "communication" in json.dumps(raw["attempts"][0]["problems"])
    # By hand, two turns of 1000 input (400 cached) and 200 output tokens:
    # (2·600·2.0 + 2·400·0.5 + 2·200·8.0) / 1e6 USD.
    assert judgment.usage == Usage(input_tokens=2000, output_tokens=400, cached_tokens=800)
    assert judgment.cost_usd == pytest.approx((2400 + 400 + 3200) / 1e6, abs=1e-12)


async def test_never_valid_gives_judgment_failed_with_raw_output(judging: Judging) -> None:
    bad_tag = verdict(5, tags=["sloppy"], files=["nope.txt"])
    out_of_range = verdict(5)
    out_of_range["scores"]["data_handling"]["score"] = 12
    model = judging.scripted(
        ScriptedSequence(
            [
                ScriptReply.call("submit_verdict", MISSING_DIMENSION),
                ScriptReply.call("submit_verdict", bad_tag),
                ScriptReply.call("submit_verdict", out_of_range),
            ]
        ),
    )
    spec = judging.spec("hopeless", model, max_repairs=2)
    events, _ = await judging.one_run([spec], lambda evs: bool(of_type(evs, JudgmentFailed)))
    [failed] = of_type(events, JudgmentFailed)
    assert not judgments(events)
    assert failed.judge_id == "hopeless" and failed.attempts == 3 and not failed.infrastructure
    assert "data_handling" in failed.error
    assert failed.raw_output is not None and judging.store.exists(failed.raw_output.sha256)
    raw = json.loads(judging.store.get_bytes(failed.raw_output.sha256))
    problems = [a["problems"] for a in raw["attempts"]]
    assert problems[0] == ["scores is missing dimensions: communication"]
    assert any("unknown failure tags sloppy" in p for p in problems[1])
    assert any("not in the manifest: nope.txt" in p for p in problems[1])
    assert raw["attempts"][2]["tool_calls"][0]["name"] == "submit_verdict"
    assert len(judging.server.requests(model)) == 3
    assert RUBRIC.dimension_keys[0] in json.dumps(raw)


async def test_provider_outage_is_an_infrastructure_failure_and_acked(judging: Judging) -> None:
    bus, server = judging.bus, judging.server
    model = judging.scripted(ScriptedSequence([ScriptReply.call("submit_verdict", verdict())]))
    server.fail_always(model, Fault.server_error(503))
    spec = judging.spec("down", model)
    await judging.campaign([spec])
    async with judging.running(judging.llm(spec)):
        await judging.seal()
        events = await judging.wait(lambda evs: bool(of_type(evs, JudgmentFailed)))
        [failed] = of_type(events, JudgmentFailed)
        assert (failed.infrastructure and "503" in failed.error) or "Unavailable" in failed.error
        # The message was acked: nothing pending, nothing dead-lettered.
        info = await bus.js.consumer_info(judging.settings.stream, "judge-down")
        assert info.num_ack_pending == 0 and info.num_pending == 0
    assert await bus.dead_letters("judge-down") == []
    assert len(server.requests(model)) == 4  # RetryPolicy.for_tests: 4 attempts, then give up
