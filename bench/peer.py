"""Peer rows (`make bench-peer`): Assay beside Inspect AI on the same workload, same run.

100 runs × 10 agent steps of `bash true` then submit, a zero-latency scripted model, at
concurrency 10 and 1. Inspect AI runs in its own cached venv (scripts/peer-venv.sh; never
one of the project's dependencies) with `react()`, its `bash()` tool and its `local`
sandbox (no isolation); Assay runs its real runner and sandbox-manager (bubblewrap, a
sandbox per run) in one process on a fresh nats-server. Both talk through the OpenAI SDK
to one scripted model server in a process of its own, so neither side shares its
interpreter with the stand-in. Inspect AI is measured a second time in its best
configuration: its in-process mock model (`mockllm/model` playing the same script, no
HTTP at all), and Assay's wall is shown against both. Each side warms up first (imports,
first connections, first sandboxes); a wall runs from the timed eval's call (Inspect) or
the campaign's submit (Assay) until every run has ended. ``python -m bench.peer [--runs N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import logging
import os
import subprocess
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import NamedTuple

from assay.embedded import NatsServer
from assay_schemas import AgentFinished, AgentSpec, AgentStepLogged, RunFailed
from bench.model_process import MODEL, scripted_process
from bench.runner import (
    KEY_ENV,
    _campaign,
    _drafts,
    _Stack,
    _submit_and_wait,
)
from bench.table import Row, breaches_row, percentile, print_rows

__all__ = ["bench_peer", "peer_python", "run_inspect"]

ROOT = Path(__file__).resolve().parent.parent
INSPECT_EVAL = ROOT / "scripts" / "peer" / "inspect_eval.py"
PEER_VENV = ROOT / "scripts" / "peer-venv.sh"


class Side(NamedTuple):
    """One side's timed campaign: wall, and what its runs did."""

    wall_s: float
    runs: int
    steps: int
    failed: int
    step_p50_ms: float = float("nan")
    breaches: tuple[str, ...] = ()
    """The log's invariants the campaign broke (Assay's side; `assay check`'s)."""


# --- Inspect AI -----------------------------------------------------------------------------


def peer_python() -> str:
    """Inspect's venv (built once, then cached) and its interpreter."""
    out = subprocess.run(["bash", str(PEER_VENV)], check=True, capture_output=True, text=True)
    return out.stdout.strip().splitlines()[-1]


def run_inspect(
    python: str,
    base_url: str | None,
    runs: int,
    concurrency: int,
    timeout_s: float | None = None,
    *,
    mock_steps: int | None = None,
) -> tuple[Side, str]:
    """Inspect AI's timed eval against the scripted model at base_url, or with `mock_steps`
    against its in-process mock model playing the same script; its side and version
    (subprocess.TimeoutExpired past timeout_s)."""
    args = [python, str(INSPECT_EVAL)]
    if mock_steps is not None:
        args += ["--mock-steps", str(mock_steps)]
    elif base_url is not None:
        args += ["--base-url", base_url, "--model", MODEL]
    else:
        raise ValueError("Inspect AI needs the scripted model's URL or mock_steps")
    args += ["--runs", str(runs), "--concurrency", str(concurrency)]
    # Inspect's venv alone: none of this workspace's packages on its path. An empty HOME:
    # its `bash()` tool runs `bash --login`, and a host's own profile (pyenv init costs
    # ~0.5 s a shell on the machine this was written on) is not Inspect AI's cost.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    with tempfile.TemporaryDirectory(prefix="assay-peer-home-") as home:
        env["HOME"] = home
        out = subprocess.run(
            args, capture_output=True, text=True, cwd=home, env=env, timeout=timeout_s
        )
    if out.returncode != 0:
        raise RuntimeError(f"Inspect AI's eval failed ({out.returncode}):\n{out.stderr[-4000:]}")
    doc = json.loads(out.stdout.strip().splitlines()[-1])
    failed = doc["errors"] + (runs - doc["samples"])
    return Side(doc["wall_s"], doc["samples"], doc["steps"], failed), doc["version"]


# --- Assay ----------------------------------------------------------------------------------


async def _assay(base: Path, base_url: str, runs: int, steps: int, concurrency: int) -> Side:
    campaign = f"peer{concurrency}"
    with NatsServer(base / "nats") as server:
        async with _Stack(base, server, concurrency=concurrency) as stack:
            agent = AgentSpec(agent_id="steps", model=MODEL, base_url=base_url)
            warm = _campaign("warm", [agent], steps + 2)
            await _submit_and_wait(stack, warm, _drafts(2, "w"), 120)
            spec = _campaign(campaign, [agent], steps + 2)
            ended = await _submit_and_wait(stack, spec, _drafts(runs, "t"), 900)
    events, wall = ended.events, ended.wall_s
    by_run: dict[str, list[float]] = defaultdict(list)
    for e in events:
        if isinstance(e, AgentStepLogged) and e.run_id is not None:
            by_run[e.run_id].append(e.occurred_at.timestamp())
    intervals = [
        (b - a) * 1000 for times in by_run.values() for a, b in itertools.pairwise(sorted(times))
    ]
    finished = [e for e in events if isinstance(e, AgentFinished)]
    failed = sum(isinstance(e, RunFailed) for e in events)
    tool_steps = sum(max(0, e.steps - 1) for e in finished)  # the last step is the submit
    return Side(wall, len(finished), tool_steps, failed, percentile(intervals, 50), ended.breaches)


def _assay_side(base_url: str, runs: int, steps: int, concurrency: int) -> Side:
    os.environ.setdefault(KEY_ENV, "scripted")
    with tempfile.TemporaryDirectory(prefix="assay-peer-", dir="/var/tmp") as tmp:
        base = Path(tmp)
        base.chmod(0o711)  # sandbox uids must traverse to their workspace mounts
        return asyncio.run(_assay(base, base_url, runs, steps, concurrency))


# --- rows -----------------------------------------------------------------------------------


def _rows(
    concurrency: int, steps: int, inspect: Side, mock: Side, assay: Side, version: str
) -> list[Row]:
    g = "peer"
    total = inspect.runs * steps or 1
    return [
        Row(
            g,
            f"Inspect AI {version}, {inspect.runs} × {steps} `bash true`, concurrency "
            f"{concurrency}, local sandbox: wall",
            inspect.wall_s,
            "s",
        ),
        Row(
            g,
            f"Assay, {assay.runs} × {steps} `bash true`, concurrency {concurrency}, "
            "bubblewrap: wall",
            assay.wall_s,
            "s",
            inspect.wall_s,
            "Inspect AI's wall",
            "≤ 0.5× Inspect AI",
        ),
        Row(
            g,
            f"Inspect AI {version}, in-process mock model (mockllm, no HTTP), {mock.runs} × "
            f"{steps} `bash true`, concurrency {concurrency}, local sandbox: wall",
            mock.wall_s,
            "s",
        ),
        Row(
            g,
            "  Assay's wall against Inspect AI's with its in-process mock model",
            assay.wall_s,
            "s",
            mock.wall_s,
            "Inspect AI's (mock) wall",
            "≤ 1.0× Inspect AI (mock)" if concurrency == 1 else "",
        ),
        Row(
            g,
            "  Assay wall per agent step",
            assay.wall_s / total * 1000,
            "ms",
            inspect.wall_s / total * 1000,
            "Inspect AI's",
        ),
        Row(
            g,
            "  Assay step interval p50 (consecutive AgentStepLogged"
            + (")" if concurrency == 1 else f", {concurrency} runs sharing the CPUs)"),
            assay.step_p50_ms,
            "ms",
            target="≤ 10 ms" if concurrency == 1 else "",
        ),
        Row(
            g,
            "  bash steps run (Assay; baseline Inspect AI)",
            float(assay.steps),
            "steps",
            float(inspect.steps),
            "Inspect AI's",
        ),
        Row(
            g,
            "  runs failed (Assay; baseline Inspect AI)",
            float(assay.failed),
            "runs",
            float(inspect.failed),
            "Inspect AI's",
        ),
        breaches_row(g, "  the log's invariants broken (Assay, `assay check`)", assay.breaches),
        Row(
            g,
            "  runs failed (Inspect AI, mock model)",
            float(mock.failed),
            "runs",
        ),
    ]


def bench_peer(
    runs: int = 100,
    steps: int = 10,
    concurrencies: tuple[int, ...] = (10, 1),
    inspect_python: str | None = None,
) -> list[Row]:
    """Assay and Inspect AI on the same workload, one after the other at each concurrency."""
    python = inspect_python or peer_python()
    rows: list[Row] = []
    with scripted_process(steps) as base_url:
        for concurrency in concurrencies:
            print(f"  Inspect AI, concurrency {concurrency} ...", flush=True)
            inspect, version = run_inspect(python, base_url, runs, concurrency)
            print(f"  Inspect AI (in-process mock), concurrency {concurrency} ...", flush=True)
            mock, _ = run_inspect(python, None, runs, concurrency, mock_steps=steps)
            print(f"  Assay, concurrency {concurrency} ...", flush=True)
            assay = _assay_side(base_url, runs, steps, concurrency)
            rows += _rows(concurrency, steps, inspect, mock, assay, version)
    return rows


def main() -> None:
    """Print the peer rows."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[10, 1])
    parser.add_argument("--inspect-python", help="Inspect's venv python (default: build/find it)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    print_rows(bench_peer(args.runs, args.steps, tuple(args.concurrency), args.inspect_python))


if __name__ == "__main__":
    main()
