"""Inspect AI's side of `make bench-peer`: runs × steps of `bash true`, a scripted model.

Runs in Inspect's own venv (scripts/peer-venv.sh), started by `python -m bench.peer`,
which serves the zero-latency scripted model and passes its OpenAI-compatible URL. The
agent is Inspect's `react()` with its `bash()` tool on the `local` sandbox; the model is
reached through Inspect's `openai-api` provider (the OpenAI SDK, chat completions). With
`--mock-steps N` the model is instead Inspect's in-process mock (`mockllm/model`, no HTTP
at all: Inspect in its best configuration), answering each sample as the scripted model
does: `bash true` N times, then submit. A small warm-up eval runs first, so the timed
eval pays no imports or first connections. Prints one JSON line: the timed eval's wall,
samples, steps and errors.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time

from inspect_ai import Task
from inspect_ai import eval as inspect_eval
from inspect_ai.agent import react
from inspect_ai.dataset import Sample
from inspect_ai.log import EvalLog
from inspect_ai.model import (
    ChatMessage,
    GenerateConfig,
    Model,
    ModelOutput,
    ModelUsage,
    get_model,
)
from inspect_ai.tool import ToolChoice, ToolInfo, bash


def _task(runs: int) -> Task:
    samples = [Sample(id=i, input="Run the check.") for i in range(runs)]
    return Task(dataset=samples, solver=react(tools=[bash(timeout=30)]), sandbox="local")


def _mock(steps: int) -> Model:
    """Inspect's in-process mock model playing the script: `steps` calls of `bash true`
    in each sample's conversation, then submit (read from the sample's own messages, so
    any number of samples may run at once)."""

    def answer(
        messages: list[ChatMessage],
        tools: list[ToolInfo],
        choice: ToolChoice,
        config: GenerateConfig,
    ) -> ModelOutput:
        turn = sum(m.role == "assistant" for m in messages)
        if turn < steps:
            out = ModelOutput.for_tool_call("mockllm/model", "bash", {"command": "true"})
        else:
            out = ModelOutput.for_tool_call("mockllm/model", "submit", {"answer": "done"})
        # Usage given, as the scripted server gives it: else the mock counts tokens with
        # tiktoken, whose encoding is fetched from the internet on first use.
        out.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
        return out

    return get_model("mockllm/model", custom_outputs=answer, memoize=False)


def _eval(
    model: str | Model, base_url: str | None, runs: int, concurrency: int, log_dir: str
) -> EvalLog:
    [log] = inspect_eval(
        _task(runs),
        model=model,
        model_base_url=base_url,
        max_samples=concurrency,
        max_connections=concurrency,
        # No max_sandboxes: with one set, Inspect sleeps a random 0-1 s before each
        # sample's sandbox (inspect_ai/_eval/task/sandbox.py, so that tasks interleave),
        # half a second a sample that is no work of Inspect's best configuration. Its local
        # sandbox has no limit of its own, so max_samples bounds them as it bounds samples.
        #
        # Its local sandbox runs at most this many commands at once (default: the CPU
        # count): at the same concurrency as Assay, every run's command may run at once.
        max_subprocesses=concurrency,
        log_dir=log_dir,
        display="none",
        log_samples=True,
        score=False,
    )
    return log


def _tool_steps(log: EvalLog) -> int:
    """bash calls the samples made, counted from their messages."""
    total = 0
    for sample in log.samples or []:
        for message in sample.messages:
            calls = getattr(message, "tool_calls", None) or []
            total += sum(1 for c in calls if c.function == "bash")
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--base-url", help="the scripted model's URL (without --mock-steps)")
    parser.add_argument("--model", help="the scripted model's name (without --mock-steps)")
    parser.add_argument(
        "--mock-steps",
        type=int,
        help="Inspect's in-process mock model instead, `bash true` this many times a sample",
    )
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--concurrency", type=int, default=10)
    args = parser.parse_args()
    os.environ.setdefault("SCRIPTED_API_KEY", "scripted")
    model: str | Model = f"openai-api/scripted/{args.model}"
    if args.mock_steps is not None:
        model = _mock(args.mock_steps)
    elif not (args.base_url and args.model):
        parser.error("--base-url and --model, or --mock-steps")
    with tempfile.TemporaryDirectory(prefix="assay-peer-inspect-") as logs:
        _eval(model, args.base_url, 2, min(2, args.concurrency), logs)
        t0 = time.perf_counter()
        log = _eval(model, args.base_url, args.runs, args.concurrency, logs)
        wall = time.perf_counter() - t0
        samples = log.samples or []  # read while the log file is still there
        summary = {
            "wall_s": wall,
            "status": log.status,
            "samples": len(samples),
            "errors": sum(1 for s in samples if s.error is not None),
            "steps": _tool_steps(log),
            "version": log.eval.packages.get("inspect_ai", ""),
        }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
