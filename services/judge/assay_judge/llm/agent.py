"""One judge sample: a tool-using conversation that ends in a validated verdict or gives up.

The loop is bounded: at most `max_steps` tool turns, then every turn without a valid
`submit_verdict` counts as an invalid output; after `max_repairs` repair prompts the
sample fails with every invalid output kept for inspection.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from assay.providers import (
    Completion,
    GenerationParams,
    Message,
    ModelProvider,
    SystemMessage,
    ToolResultMessage,
    Usage,
    UserMessage,
    prompt_cache_key,
)
from assay.telemetry import tracer
from assay_schemas import JudgeSpec, Rubric, Task

from ..files import SealedFiles
from ..killable import Killable
from .prompts import case_parts, repair_prompt, step_budget_prompt, system_prompt
from .tools import READ_TOOLS, JudgeToolBox
from .verdict import SUBMIT_VERDICT, Verdict, check_verdict, verdict_tool

__all__ = ["JudgeOutcome", "judge_sample", "sample_params"]


@dataclass(kw_only=True)
class JudgeOutcome:
    """What one sample produced: a verdict, or the invalid outputs that led to failure."""

    verdict: Verdict | None
    usage: Usage = field(default_factory=Usage)
    model: str = ""
    invalid_outputs: list[dict[str, Any]] = field(default_factory=list)
    """Each invalid output: its text, tool calls and the problems found."""
    turns: int = 0
    cached_turns: int = 0
    """Turns whose answer the development cache served (`Completion.cached_answer`)."""

    @property
    def cached(self) -> bool:
        """Every answer of the sample came from the development cache."""
        return self.turns > 0 and self.cached_turns == self.turns

    @property
    def problems(self) -> list[str]:
        """The problems of the last invalid output."""
        return list(self.invalid_outputs[-1]["problems"]) if self.invalid_outputs else []


_OPENING = 2
"""The system prompt and the case's shared part: the same for every run of a task."""


def sample_params(spec: JudgeSpec, sample: int, cache_key: str | None = None) -> GenerationParams:
    """Generation settings of one sample; a configured seed is offset by the sample index.
    `cache_key` groups the samples and runs of one task, which open alike: the system
    prompt and the case's shared part (`_OPENING` messages)."""
    p = spec.params
    return GenerationParams(
        max_tokens=int(p.get("max_tokens", 4096)),
        temperature=float(p["temperature"]) if "temperature" in p else None,
        seed=int(p["seed"]) + sample if "seed" in p else None,
        cache_key=cache_key,
        stable_messages=_OPENING,
    )


def _raw(completion: Completion, problems: list[str]) -> dict[str, Any]:
    return {
        "text": completion.text,
        "tool_calls": [c.model_dump() for c in completion.tool_calls],
        "problems": problems,
    }


async def judge_sample(
    *,
    campaign_id: str,
    spec: JudgeSpec,
    provider: ModelProvider,
    task: Task,
    final_message: str,
    files: SealedFiles,
    rubric: Rubric,
    sample: int,
    processes: Killable | None = None,
    final_message_bytes: int | None = None,
) -> JudgeOutcome:
    """Run one judge conversation to a verdict (or to failure). Provider errors propagate.
    Documents are parsed in `processes` (the service's, so that stopping it kills them).
    `final_message_bytes`: the whole answer's size, when `final_message` is only its start."""
    toolbox = JudgeToolBox(
        files=files,
        multimodal=bool(spec.params.get("multimodal", True)),
        processes=processes or Killable(),
    )
    tools = [*READ_TOOLS, verdict_tool(rubric)]
    manifest = {f.path for f in files.files} | set(files.source_names())
    params = sample_params(spec, sample, prompt_cache_key(campaign_id, spec.judge_id, task.task_id))
    case = case_parts(task, final_message, files, rubric, final_message_bytes)
    # The shared part and the evidence are two messages (merged into one user turn where
    # turns must alternate), so the prompt cache's breakpoint can sit between them.
    messages: list[Message] = [
        SystemMessage(text=system_prompt(task)),
        UserMessage(content=case.shared),
        UserMessage(content=case.evidence),
    ]
    outcome = JudgeOutcome(verdict=None, model=spec.model)
    steps = 0
    while True:
        completion = await _complete(provider, spec, messages, tools, params)
        outcome.usage += completion.usage
        outcome.model = completion.model or spec.model
        outcome.turns += 1
        outcome.cached_turns += completion.cached_answer
        messages.append(completion.to_message())
        submit = next((c for c in completion.tool_calls if c.name == SUBMIT_VERDICT), None)
        results = [
            await toolbox.run(c) if c.name != SUBMIT_VERDICT else None
            for c in completion.tool_calls
        ]
        if submit is not None:
            check = check_verdict(submit.arguments, rubric, manifest)
            if check.verdict is not None:
                outcome.verdict = check.verdict
                return outcome
            problems = check.problems
        elif not completion.tool_calls:
            problems = [f"no {SUBMIT_VERDICT} tool call: submit the verdict by calling the tool"]
        elif steps >= spec.max_steps:
            problems = [f"the tool budget is spent and there is still no {SUBMIT_VERDICT} call"]
        else:
            steps += 1
            messages.extend(r for r in results if r is not None)
            if steps >= spec.max_steps:
                messages.append(UserMessage(content=step_budget_prompt()))
            continue
        outcome.invalid_outputs.append(_raw(completion, problems))
        left = spec.max_repairs + 1 - len(outcome.invalid_outputs)
        if left <= 0:
            return outcome
        repair = repair_prompt(problems, left)
        # Every tool call needs its result; a rejected verdict's result is the repair itself.
        for call, result in zip(completion.tool_calls, results, strict=True):
            if result is not None:
                messages.append(result)
            else:
                text = repair if call is submit else f"only one {SUBMIT_VERDICT} call counts"
                messages.append(ToolResultMessage(call_id=call.id, content=text, is_error=True))
        if submit is None:
            messages.append(UserMessage(content=repair))


async def _complete(
    provider: ModelProvider,
    spec: JudgeSpec,
    messages: list[Message],
    tools: list[Any],
    params: GenerationParams,
) -> Completion:
    # The provider traces the call as a GenAI span (model, tokens, finish reason), a child
    # of this judge turn.
    with tracer("assay.judge").start_as_current_span(f"judge turn {spec.judge_id}") as span:
        span.set_attribute("assay.judge_id", spec.judge_id)
        return await provider.complete(messages, tools, params)
