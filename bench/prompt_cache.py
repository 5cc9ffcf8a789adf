"""Prompt caching on against off in the same run, on the scripted server's simulation.

Two workloads, each run twice through the real Anthropic SDK (`cache_prompt` on, then
off) against one scripted server that simulates Anthropic's prompt cache as documented
(breakpoints, 1,024-token minimum, reads 0.1x, writes 1.25x), priced as Claude Sonnet 4.5:

- a 20-step agent run: the runner's tools, a task prompt, and per step a tool call whose
  result is ~2,000 characters, as a run's conversation grows;
- the bundled jury (the demo's three scripted judges, their samples) over the bundled
  tasks, eight runs each as the bundled campaign has them (three agents, five controls,
  shaped from the task's reference), judged one run after another as runs finish.

The scripted server counts four characters a token and an image as the API bills it (by
its size): a judge viewing a plot pays some 1,600 tokens for it, not its base64's length.

``python -m bench --only prompt_cache``
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from pathlib import Path
from typing import NamedTuple

from assay.pricing import DEFAULT_PRICES, PriceTable, cost
from assay.providers import (
    GenerationParams,
    Message,
    ModelProvider,
    SystemMessage,
    ToolResultMessage,
    Usage,
    UserMessage,
    make_provider,
    prompt_cache_key,
)
from assay.store import LocalBlobStore, store_file
from assay.tasks import load_task_dir
from assay_judge.files import SealedFiles
from assay_judge.handlers.llm import sampling_times
from assay_judge.llm.agent import judge_sample
from assay_runner.tools import TOOLS
from assay_schemas import FileRef, JudgeSpec, Task, default_rubric
from assay_testing.demo import judge_scripts
from assay_testing.scripted import Script, ScriptedModelServer, ScriptedSequence, ScriptReply
from bench.table import Row

__all__ = ["bench_prompt_cache"]

ROOT = Path(__file__).resolve().parents[1]
KEY_ENV = "ASSAY_BENCH_SCRIPTED_KEY"
PRICED_AS = "claude-sonnet-4-5"
"""Every model here is billed at this model's list prices (a pinned table)."""
AGENT_MODEL = "bench-cache-agent"
STEPS = 20
RESULT_CHARS = 2_000
SYSTEM = (
    "You are a research agent working in a sandbox with Python and the task's files. "
    "Run code to check every claim; write outputs under results/; submit a short answer. "
) * 12


class Spent(NamedTuple):
    """What a workload used and cost."""

    usage: Usage
    cost_usd: float


def _prices(models: list[str]) -> PriceTable:
    return {m: DEFAULT_PRICES[PRICED_AS] for m in models}


def _provider(server: ScriptedModelServer, model: str, on: bool) -> ModelProvider:
    return make_provider(
        "anthropic", model, base_url=server.base_url, api_key_env=KEY_ENV, cache_prompt=on
    )


def _agent_script() -> ScriptedSequence:
    step = ScriptReply.call("run_python", {"code": "import pandas as pd\nprint(df.describe())"})
    return ScriptedSequence([*([step] * (STEPS - 1)), "Done: results/summary.md."])


async def _agent_run(server: ScriptedModelServer, on: bool) -> Spent:
    provider = _provider(server, AGENT_MODEL, on)
    params = GenerationParams(cache_key=prompt_cache_key("bench", "agent", "task"))
    messages: list[Message] = [
        SystemMessage(text=SYSTEM),
        UserMessage(content="Compare the strains' growth rates in growth.csv. " * 20),
    ]
    usage, spent = Usage(), 0.0
    try:
        for step in range(STEPS):
            done = await provider.complete(messages, TOOLS, params)
            usage += done.usage
            spent += cost(done.usage, AGENT_MODEL, _prices([AGENT_MODEL]))
            messages.append(done.to_message())
            messages.extend(
                ToolResultMessage(call_id=c.id, content=f"step {step}: " + "x" * RESULT_CHARS)
                for c in done.tool_calls
            )
    finally:
        await provider.aclose()
    return Spent(usage, spent)


class _Run(NamedTuple):
    task: Task
    final_message: str
    files: list[FileRef]


_ALTERED = str.maketrans("0123456789", "3456789012")


def _task_runs(store: LocalBlobStore, folder: Path) -> list[_Run]:
    """A task's runs as the bundled campaign has them: its three agents' (careful work,
    an overclaim, nothing) and its five controls' (the reference, then altered numbers,
    a claimed file removed, outputs removed, the message alone)."""
    task = load_task_dir(folder, max_bytes=50_000_000).to_task(store)
    reference = ROOT / "examples" / "references" / task.task_id
    message = (reference / "message.md").read_text()
    attached = list(task.attachments)
    code = [store_file(store, reference / "solve.py", "solve.py")]
    outputs = [
        store_file(store, p, str(p.relative_to(reference)))
        for p in sorted((reference / "results").rglob("*"))
        if p.is_file()
    ]
    return [
        _Run(task, "Summary: " + message, [*attached, *code, *outputs]),
        _Run(task, message, attached),
        _Run(task, "I could not finish the analysis.", attached),
        _Run(task, message, [*attached, *code, *outputs]),
        _Run(task, message.translate(_ALTERED), [*attached, *code, *outputs]),
        _Run(task, message, [*attached, *code, *outputs[1:]]),
        _Run(task, message, [*attached, *code]),
        _Run(task, message, attached),
    ]


def _runs(store: LocalBlobStore) -> list[_Run]:
    """Every bundled task's runs, task after task."""
    folders = sorted((ROOT / "examples" / "tasks").iterdir())
    return [run for folder in folders for run in _task_runs(store, folder)]


async def _jury(server: ScriptedModelServer, store: LocalBlobStore, on: bool) -> Spent:
    models = sorted(judge_scripts())
    specs = [
        JudgeSpec(judge_id=m, model=m, provider="anthropic", base_url=server.base_url)
        for m in models
    ]
    providers = {s.judge_id: _provider(server, s.model, on) for s in specs}
    prices = _prices(models)
    rubric = default_rubric()
    usage, spent = Usage(), 0.0
    try:
        for run in _runs(store):
            attachments = {(a.path, a.sha256) for a in run.task.attachments}
            outcomes = await asyncio.gather(
                *(
                    judge_sample(
                        campaign_id="bench",
                        spec=spec,
                        provider=providers[spec.judge_id],
                        task=run.task,
                        final_message=run.final_message,
                        files=SealedFiles(files=run.files, store=store, attachments=attachments),
                        rubric=rubric,
                        sample=sample,
                    )
                    for spec in specs
                    for sample in range(sampling_times(spec, run.task))
                )
            )
            for outcome in outcomes:
                usage += outcome.usage
                spent += cost(outcome.usage, outcome.model, prices)
    finally:
        for provider in providers.values():
            await provider.aclose()
    return Spent(usage, spent)


async def _measure() -> list[Row]:
    os.environ.setdefault(KEY_ENV, "scripted")
    scripts: dict[str, Script] = {**judge_scripts(), AGENT_MODEL: _agent_script()}
    with (
        ScriptedModelServer(scripts, prompt_cache=True) as server,
        tempfile.TemporaryDirectory() as tmp,
    ):
        store = LocalBlobStore(Path(tmp))
        agent_on, agent_off = await _agent_run(server, True), await _agent_run(server, False)
        jury_on, jury_off = await _jury(server, store, True), await _jury(server, store, False)
    share = jury_on.usage.cached_tokens / max(1, jury_on.usage.input_tokens)
    return [
        Row(
            "prompt cache",
            f"{STEPS}-step Anthropic-API agent run, caching on",
            agent_on.cost_usd,
            "USD",
            agent_off.cost_usd,
            "caching off",
            "≤ 0.4×",
        ),
        Row(
            "prompt cache",
            "bundled jury's verdicts (3 judges × 8 tasks × 8 runs), caching on",
            jury_on.cost_usd,
            "USD",
            jury_off.cost_usd,
            "caching off",
            "≤ 0.5×",
        ),
        Row("prompt cache", "judge input tokens read from the cache", share * 100, "%"),
    ]


def bench_prompt_cache() -> list[Row]:
    """Cost with prompt caching on against off, agent and jury (see the module docstring)."""
    return asyncio.run(_measure())
