"""A task check that cannot run ends in JudgmentFailed with the reason, not in retries."""

from __future__ import annotations

import time

from assay_judge.rules.checks import evaluate
from assay_schemas import FileRef, JudgmentFailed, Task, TextContainsCheck

from .cases import Judging, any_judgment, judgments


async def test_a_bad_pattern_on_the_log_ends_in_judgment_failed(judging: Judging) -> None:
    # Published straight to the log (submit would have refused it).
    bad = TextContainsCheck(name="mentions", path="notes.md", pattern="(unclosed")
    async with judging.running(judging.rules()):
        notes = {"notes.md": b"hello\n"}
        await judging.seal("bad-pattern", files=notes, final_message="see notes.md", checks=[bad])
        events = await judging.wait(lambda evs: any(isinstance(e, JudgmentFailed) for e in evs))
    [failed] = [e for e in events if isinstance(e, JudgmentFailed)]
    assert failed.judge_id == "rules" and failed.run_id == "bad-pattern"
    assert "rule check failed" in failed.error and "'mentions'" in failed.error
    assert "missing )" in failed.error


async def test_a_catastrophic_pattern_on_an_agent_file_is_judged_at_once(judging: Judging) -> None:
    # Python's `re` takes ~20 s on this; RE2 is linear in the text.
    slow = TextContainsCheck(name="as", path="notes.md", pattern="(a+)+$")
    started = time.monotonic()
    async with judging.running(judging.rules()):
        notes = {"notes.md": b"a" * 26 + b"b"}
        await judging.seal("redos", files=notes, final_message="see notes.md", checks=[slow])
        events = await judging.wait(any_judgment)
    [judgment] = judgments(events)
    [check] = [c for c in judgment.checks if c.name == "as"]
    assert not check.passed and time.monotonic() - started < 10


def test_reference_patterns_are_evaluated_by_re2() -> None:
    task = Task(
        task_id="t",
        prompt="p",
        reference_checks=[TextContainsCheck(name="as", path="a.md", pattern="(a+)+$")],
    )
    files = [FileRef(path="a.md", sha256="0" * 64, size=27)]
    started = time.monotonic()
    verdict = evaluate(
        task=task, files=files, contents={"a.md": b"a" * 26 + b"b"}, final_message="", steps=[]
    )
    assert time.monotonic() - started < 1.0
    assert [c.passed for c in verdict.checks if c.name == "as"] == [False]
