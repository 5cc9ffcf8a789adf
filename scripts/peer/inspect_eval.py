"""Inspect AI's side of `make bench-peer`: runs × steps of `bash true`, a scripted model.

Runs in Inspect's own venv (scripts/peer-venv.sh), started by `python -m bench.peer`,
which serves the zero-latency scripted model and passes its OpenAI-compatible URL. The
agent is Inspect's `react()` with its `bash()` tool on the `local` sandbox; the model is
reached through Inspect's `openai-api` provider (the OpenAI SDK, chat completions). A
small warm-up eval runs first, so the timed eval pays no imports or first connections.
Prints one JSON line: the timed eval's wall, samples, steps and errors.
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
from inspect_ai.tool import bash


def _task(runs: int) -> Task:
    samples = [Sample(id=i, input="Run the check.") for i in range(runs)]
    return Task(dataset=samples, solver=react(tools=[bash(timeout=30)]), sandbox="local")


def _eval(model: str, base_url: str, runs: int, concurrency: int, log_dir: str) -> EvalLog:
    [log] = inspect_eval(
        _task(runs),
        model=model,
        model_base_url=base_url,
        max_samples=concurrency,
        max_connections=concurrency,
        max_sandboxes=concurrency,
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
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--model", required=True, help="the scripted model's name")
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--concurrency", type=int, default=10)
    args = parser.parse_args()
    os.environ.setdefault("SCRIPTED_API_KEY", "scripted")
    model = f"openai-api/scripted/{args.model}"
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
