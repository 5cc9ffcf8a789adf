"""Finding 1 (issue #24): agent text is hostile input to every pattern the judge runs.

A long final answer or artifact must not freeze the rule judge (quadratic regexes under
the GIL), a check over its time budget ends in JudgmentFailed naming the check, and a
stuck check neither starves the other services of the process nor blocks shutdown."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from pathlib import Path

import pytest

from assay.bus import Bus
from assay.config import Settings
from assay.store import LocalBlobStore
from assay_judge import build_rules
from assay_judge.delimit import artifact_block, fold, one_line, quote_name
from assay_judge.rules.checks import claimed_files, evaluate, find_injection
from assay_schemas import (
    AgentStepLogged,
    FileRef,
    JudgmentFailed,
    Producer,
    Task,
    ToolCallRecord,
)

from . import stalls
from .cases import judgments, running, seal_run, wait_log

pytestmark = pytest.mark.timeout(120)

N = 200_000
"""Long enough that a quadratic pattern takes minutes; a linear one, milliseconds."""

SHAPES = {
    "word run (the issue's final answer)": "A" * N,
    "url-like run": "a" * N + "://",
    "path segments": "a/" * (N // 2),
    "dotted name": "a." * (N // 2),
    "dashes and dots": "-." * (N // 2),
    "digits": "1" * N,
    "decimal runs": "1." * (N // 2),
    "percent-less numbers": "1 " * (N // 2),
    "p-values": "p<" * (N // 2),
    "spaces after a bracket": "<" + " " * N,
    "brackets and slashes": "< / " * (N // 4),
    "ignore without a target": "ignore " + "x" * N,
    "many ignores": "ignore " * (N // 7),
    "many gives": "give " * (N // 5),
    "grader words": "grader " * (N // 7),
    "previous instructions": "previous instructions " * (N // 22),
    "as the": "as the " * (N // 7),
    "imports": "import " * (N // 7),
    "non-ascii word run": "é" * N,
    "invisible characters": "\u200b" * N,
    "combining marks": "a" + "\u0301" * N,
}


def _steps(text: str) -> list[AgentStepLogged]:
    calls = [
        ToolCallRecord(call_id="w", name="write_file", arguments=json.dumps({"path": "run.py"})),
        ToolCallRecord(call_id="b", name="bash", arguments=json.dumps({"cmd": text})),
    ]
    producer = Producer(service="test", version="0")
    ids = {"campaign_id": "c", "run_id": "r", "task_id": "t", "producer": producer}
    return [
        AgentStepLogged(event_id=AgentStepLogged.id_for("r", 0), step=0, tool_calls=calls, **ids)
    ]


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_every_rule_is_linear_in_agent_text(shape: str) -> None:
    text = SHAPES[shape]
    data = text.encode()
    files = [
        FileRef(path="notes.md", sha256="1" * 64, size=len(data)),
        FileRef(path="run.py", sha256="2" * 64, size=len(data)),
    ]
    started = time.monotonic()
    evaluate(
        task=Task(task_id="t", prompt=text),
        files=files,
        contents={"notes.md": data, "run.py": data},
        final_message=text,
        steps=_steps(text),
    )
    claimed_files(text)
    find_injection({"x": text})
    artifact_block("notes.md", "0" * 64, text)
    quote_name(text[:5000])
    one_line(text)
    fold(text)
    assert time.monotonic() - started < 3.0, shape


@pytest.mark.parametrize("size", [1_000_000, 10_000_000])
def test_a_huge_final_answer_is_checked_within_the_budget(size: int) -> None:
    text = "A" * size
    started = time.monotonic()
    verdict = evaluate(
        task=Task(task_id="t", prompt="p"), files=[], contents={}, final_message=text, steps=[]
    )
    assert time.monotonic() - started < 5.0
    assert {c.name for c in verdict.checks} >= {"claimed_files_exist", "no_prompt_injection"}


async def test_a_check_over_its_budget_ends_in_judgment_failed_naming_it(
    bus: Bus, settings: Settings, store: LocalBlobStore
) -> None:
    rules = build_rules(settings.model_copy(update={"judge_check_budget_s": 1.0}), store=store)
    rules.evaluator = stalls.stuck
    started = time.monotonic()
    async with running(rules):
        await seal_run(
            bus, store, campaign_id="c1", run_id="stuck", files={"a.md": b"x"}, final_message="x"
        )
        events = await wait_log(bus, lambda evs: any(isinstance(e, JudgmentFailed) for e in evs))
    [failed] = [e for e in events if isinstance(e, JudgmentFailed)]
    assert failed.judge_id == "rules" and "stuck_check" in failed.error
    assert "1" in failed.error and "budget" in failed.error
    assert time.monotonic() - started < 20


async def test_a_check_that_kills_its_worker_ends_in_judgment_failed(
    bus: Bus, settings: Settings, store: LocalBlobStore
) -> None:
    rules = build_rules(settings, store=store)
    rules.evaluator = stalls.crashing
    async with running(rules):
        await seal_run(
            bus, store, campaign_id="c1", run_id="crash", files={"a.md": b"x"}, final_message="x"
        )
        events = await wait_log(bus, lambda evs: any(isinstance(e, JudgmentFailed) for e in evs))
    [failed] = [e for e in events if isinstance(e, JudgmentFailed)]
    assert "crash_check" in failed.error


async def test_a_stuck_check_starves_nothing_and_does_not_block_shutdown(
    bus: Bus, settings: Settings, store: LocalBlobStore
) -> None:
    rules = build_rules(settings.model_copy(update={"judge_check_budget_s": 300.0}), store=store)
    rules.evaluator = stalls.stuck
    await rules.start()
    try:
        await seal_run(
            bus, store, campaign_id="c1", run_id="stuck", files={"a.md": b"x"}, final_message="x"
        )
        await asyncio.sleep(2.0)  # the check is running now
        # The event loop (every service of a one-process stack) keeps answering.
        lags = []
        for _ in range(20):
            t = time.monotonic()
            await asyncio.sleep(0.05)
            lags.append(time.monotonic() - t - 0.05)
        assert max(lags) < 0.5
    finally:
        started = time.monotonic()
        await rules.stop()
        assert time.monotonic() - started < 5.0


async def test_a_long_final_answer_leaves_the_loop_free_and_is_judged(
    bus: Bus, settings: Settings, store: LocalBlobStore
) -> None:
    # As large as the bus carries in one event (NATS' default payload limit is 1 MiB).
    answer = "A" * 900_000
    async with running(build_rules(settings, store=store)):
        await seal_run(
            bus, store, campaign_id="c1", run_id="long", files={"a.md": b"x"}, final_message=answer
        )
        lags = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            t = time.monotonic()
            await asyncio.sleep(0.05)
            lags.append(time.monotonic() - t - 0.05)
            events = [e.event async for e in bus.replay()]
            if judgments(events) or any(isinstance(e, JudgmentFailed) for e in events):
                break
    assert judgments(events), [e.event_type for e in events]
    assert max(lags) < 1.0


def _running(pid: int) -> bool:
    """Alive and not a zombie (a reaper may be slow to collect it)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


async def test_a_worker_does_not_outlive_its_service() -> None:
    # SIGKILL of the service ends its forkserver; a worker stuck in a check then exits too.
    import multiprocessing.forkserver
    import os
    import signal

    from assay_judge.killable import Killable

    processes = Killable()
    call = asyncio.create_task(processes.call(stalls.stuck, {}, seconds=60, steps=True))
    try:
        deadline = time.monotonic() + 30  # the first call launches the forkserver
        while time.monotonic() < deadline:
            live = list(processes._live)
            if live and live[0].pid is not None:
                break
            await asyncio.sleep(0.05)
        [worker] = live
        pid = worker.pid
        assert pid is not None
        await asyncio.sleep(0.5)  # stuck in its check now
        assert _running(pid)
        server = getattr(multiprocessing.forkserver._forkserver, "_forkserver_pid", None)
        assert server is not None
        os.kill(server, signal.SIGKILL)
        gone = time.monotonic() + 5
        while _running(pid) and time.monotonic() < gone:
            await asyncio.sleep(0.1)
        assert not _running(pid), "the worker outlived its forkserver"
    finally:
        processes.close()
        with contextlib.suppress(Exception):
            await call


def test_the_llm_judge_sees_a_bounded_final_message() -> None:
    from assay.store import LocalBlobStore as Store
    from assay_judge.files import SealedFiles
    from assay_judge.llm.prompts import FINAL_MESSAGE_CHARS, case_prompt
    from assay_schemas import default_rubric

    answer = "A" * 10_000_000
    files = SealedFiles(files=[], store=Store(Path("/nonexistent")))
    prompt = case_prompt(Task(task_id="t", prompt="p"), answer, files, default_rubric())
    assert len(prompt) < FINAL_MESSAGE_CHARS + 20_000
    assert "(truncated: 10000000 characters, the first 50000 shown)" in prompt


async def test_a_call_that_cannot_start_fails_at_once_and_leaves_nothing() -> None:
    from assay_judge.killable import Killable

    processes = Killable()
    with pytest.raises(Exception, match=r"(?i)pickl"):
        await processes.call(lambda: None, {}, seconds=1)
    assert not processes._live


async def test_a_run_the_rule_judge_gives_up_on_gets_a_judgment_failed(
    bus: Bus, settings: Settings, store: LocalBlobStore, tmp_path: Path
) -> None:
    """Every delivery fails (the judge's store lacks the run's files): the verdict the
    campaign waits for is an infrastructure JudgmentFailed, not a silence — as for a last
    delivery lost with its consumer (the bus hands both to the same give-up sink)."""
    rules = build_rules(settings, store=LocalBlobStore(tmp_path / "empty"))
    async with running(rules):
        await seal_run(
            bus, store, campaign_id="c1", run_id="lost", files={"a.md": b"x"}, final_message="x"
        )
        events = await wait_log(bus, lambda evs: any(isinstance(e, JudgmentFailed) for e in evs))
    [failed] = [e for e in events if isinstance(e, JudgmentFailed)]
    assert failed.judge_id == "rules" and failed.run_id == "lost"
    assert failed.infrastructure and failed.error_info is not None
    assert failed.error_info.error_class == "JudgeGivenUp"
