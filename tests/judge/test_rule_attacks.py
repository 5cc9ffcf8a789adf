"""A task check that cannot run ends in JudgmentFailed with the reason, not in retries."""

from __future__ import annotations

from assay.bus import Bus
from assay.config import Settings
from assay.store import LocalBlobStore
from assay_judge import build_rules
from assay_schemas import JudgmentFailed, TextContainsCheck

from .cases import running, seal_run, wait_log


async def test_a_bad_pattern_on_the_log_ends_in_judgment_failed(
    bus: Bus, settings: Settings, store: LocalBlobStore
) -> None:
    # Published straight to the log (submit would have refused it).
    bad = TextContainsCheck(name="mentions", path="notes.md", pattern="(unclosed")
    async with running(build_rules(settings, store=store)):
        await seal_run(
            bus,
            store,
            campaign_id="c1",
            run_id="bad-pattern",
            files={"notes.md": b"hello\n"},
            final_message="see notes.md",
            checks=[bad],
        )
        events = await wait_log(bus, lambda evs: any(isinstance(e, JudgmentFailed) for e in evs))
    [failed] = [e for e in events if isinstance(e, JudgmentFailed)]
    assert failed.judge_id == "rules" and failed.run_id == "bad-pattern"
    assert "rule check failed" in failed.error and "unterminated" in failed.error
