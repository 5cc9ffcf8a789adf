"""What a judge service or a reviewer can read of each run: one feature dict per run.

:func:`run_features` collects, from a campaign's log, the run request's fields, its step
events, its end, its seal, when each arrived, and what a reader of the whole log has
beside (the roster, the agent's runs on the task, the task's sealed control
declarations as a reader without the controls secret sees them: how many; how many other
runs left the same files or the same answer).
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import PurePosixPath

import numpy as np

from assay_schemas import (
    AgentFinished,
    AgentStepLogged,
    ArtifactsSealed,
    CampaignStarted,
    ControlDeclared,
    ControlDetails,
    Event,
    RunRequested,
    SandboxReady,
)

__all__ = ["Features", "control_labels", "openings_no_agent_made", "run_features"]

Features = dict[str, float | str]
"""One run's readable fields: numbers, or strings (one indicator per value)."""

_NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
_HEX = re.compile(r"^[0-9a-f]+$")


def _shape(prefix: str, text: str) -> Features:
    """The shape of an identifier or name: length, digits, hex-ness, first character."""
    return {
        f"{prefix}.len": float(len(text)),
        f"{prefix}.digits": float(sum(c.isdigit() for c in text)),
        f"{prefix}.hexlike": float(bool(_HEX.match(text[1:])) and len(text) > 8),
        f"{prefix}.dashes": float(text.count("-") + text.count("_")),
        f"{prefix}.first": text[:1],
    }


def _request(e: RunRequested) -> Features:
    a = e.agent
    out: Features = {
        "agent.kind": a.kind,
        "agent.model": a.model,
        "agent.provider": a.provider,
        "agent.family": a.family or "",
        "agent.has_program": float(a.program is not None),
        "agent.has_system_prompt": float(a.system_prompt is not None),
        "agent.has_limits": float(a.limits is not None),
        "run.max_steps": float(e.limits.max_steps),
        "run.epoch": float(e.epoch),
        "run.attempt": float(e.attempt),
        "run.causation_task": float(e.causation_id == e.task.task_id),
        "run.producer": e.producer.service,
    }
    out.update(_shape("agent.id", a.agent_id))
    out.update(_shape("agent.model_name", a.model))
    out.update(_shape("run.id", e.run_id or ""))
    return out


def _command(call_arguments: str) -> str:
    try:
        args = json.loads(call_arguments)
    except ValueError:
        return ""
    return str(args.get("command", "")) if isinstance(args, dict) else ""


def _call_ids(ids: Sequence[str]) -> Features:
    """The shape of a run's tool-call ids (a model API's own: `call_…`, `toolu_01…`): how
    long, how many letters, digits and underscores, the prefix, how many distinct."""
    chars = "".join(ids)
    n = max(1, len(chars))
    return {
        "calls.id_len": float(np.mean([len(i) for i in ids] or [0])),
        "calls.id_letters": sum(c.isalpha() for c in chars) / n,
        "calls.id_digits": sum(c.isdigit() for c in chars) / n,
        "calls.id_underscores": chars.count("_") / max(1, len(ids)),
        "calls.id_prefix": ids[0].split("_", 1)[0] if ids else "",
        "calls.id_distinct": len(set(ids)) / max(1, len(ids)),
    }


def _steps(steps: Sequence[AgentStepLogged]) -> Features:
    names: Counter[str] = Counter()
    commands: list[str] = []
    ids: list[str] = []
    arg_chars, out_chars, result_chars, errors = 0, 0, 0, 0
    for s in steps:
        out_chars += len(s.model_output)
        for c in s.tool_calls:
            names[c.name] += 1
            ids.append(c.call_id)
            arg_chars += len(c.arguments)
            if c.name == "bash":
                commands.append(_command(c.arguments))
        for r in s.tool_results:
            result_chars += len(r.output)
            errors += r.is_error
    latencies = [s.latency_ms for s in steps] or [0.0]
    n_calls = max(1, sum(names.values()))
    joined = "\n".join(commands)
    out: Features = {
        "steps.logged": float(len(steps)),
        "steps.input_tokens": float(sum(s.usage.input_tokens for s in steps)),
        "steps.output_tokens": float(sum(s.usage.output_tokens for s in steps)),
        "steps.latency_ms_mean": float(np.mean(latencies)),
        "steps.latency_ms_max": float(np.max(latencies)),
        "steps.latency_ms_min": float(np.min(latencies)),
        "steps.cost_usd": float(sum(s.cost_usd for s in steps)),
        "steps.model_output_chars": float(out_chars),
        "steps.arg_chars_per_call": arg_chars / n_calls,
        "steps.result_chars": float(result_chars),
        "steps.tool_errors": float(errors),
        "steps.has_request_blob": float(any(s.request_sha256 for s in steps)),
        # The first step's sealed choice: a control's names its plan, an agent's none.
        "steps.sealed_choice_chars": float(sum(len(s.sealed_choice or "") for s in steps)),
        "transcript.heredocs": float(joined.count("<<")),
        "transcript.base64": float(joined.count("base64")),
        "transcript.runs_code": float(
            sum(bool(re.search(r"\b(python3?|Rscript|julia)\b", c)) for c in commands)
        ),
        "transcript.shell_share": names["bash"] / n_calls,
        "transcript.write_share": names["write_file"] / n_calls,
        "transcript.read_calls": float(names["read_file"] + names["list_files"]),
    }
    for name, n in names.items():
        out[f"tool.{name}"] = float(n)
    out.update(_call_ids(ids))
    out.update(_order(steps))
    return out


def _order(steps: Sequence[AgentStepLogged]) -> Features:
    """How the transcript opens, as a reader sees it: the tools its first two steps call
    first, and the step that first writes a file (-1: none): a control that wrote at once
    wearing a model whose runs always looked first was told by it (2026-12-07)."""
    steps = sorted(steps, key=lambda s: s.step)
    firsts = [s.tool_calls[0].name if s.tool_calls else "" for s in steps]
    writes = [i for i, s in enumerate(steps) if any(c.name == "write_file" for c in s.tool_calls)]
    return {
        "transcript.first_tool": firsts[0] if firsts else "",
        "transcript.second_tool": firsts[1] if len(firsts) > 1 else "",
        "transcript.first_write_step": float(writes[0] if writes else -1),
    }


def _finished(e: AgentFinished) -> Features:
    return {
        "end.stop_reason": e.stop_reason,
        "end.steps": float(e.steps),
        "end.input_tokens": float(e.usage.input_tokens),
        "end.output_tokens": float(e.usage.output_tokens),
        "end.cached_tokens": float(e.usage.cached_tokens),
        "end.cost_usd": e.cost_usd,
        "end.duration_s": e.duration_s,
        "end.log_duration_s": math.log1p(e.duration_s),
    }


def _sealed(e: ArtifactsSealed) -> Features:
    files = e.files
    sizes = [f.size for f in files] or [0]
    suffixes = Counter(PurePosixPath(f.path).suffix.lower() for f in files)
    out: Features = {
        "seal.files": float(len(files)),
        "seal.bytes": float(sum(sizes)),
        "seal.log_bytes": math.log1p(sum(sizes)),
        "seal.max_bytes": float(max(sizes)),
        "seal.depth_mean": float(np.mean([f.path.count("/") for f in files] or [0])),
        "seal.excluded": float(len(e.excluded)),
        "seal.outcome": e.outcome,
        "seal.code_files": float(sum(suffixes[s] for s in (".py", ".r", ".jl", ".sh"))),
        "seal.name_chars": float(np.mean([len(f.path) for f in files] or [0])),
        "message.chars": float(len(e.final_message)),
        "message.numbers": float(len(_NUMBER.findall(e.final_message))),
        "message.lines": float(e.final_message.count("\n")),
    }
    for suffix, n in suffixes.items():
        out[f"seal.suffix{suffix or '(none)'}"] = float(n)
    for media, n in Counter(f.media_type for f in files).items():
        out[f"seal.media.{media}"] = float(n)
    return out


def _log_reader(
    requests: Mapping[str, RunRequested],
    roster: set[tuple[str, str]],
    declared: Counter[tuple[str, str]],
) -> dict[str, Features]:
    """What a reader of the whole log has of each run beyond its own events: whether its
    agent is in the campaign's roster, how many runs its agent has on the task and how
    many tasks it runs, and the task's control declarations as a reader without the
    controls secret sees them (how many)."""
    runs = Counter((q.campaign_id, q.task_id, q.agent.agent_id) for q in requests.values())
    tasks = {(q.campaign_id, q.task_id) for q in requests.values()}
    per_agent = Counter((c, a) for c, _, a in runs)
    out: dict[str, Features] = {}
    for run, q in requests.items():
        agent, task = (q.campaign_id, q.agent.agent_id), (q.campaign_id, q.task_id or "")
        n_task = sum(n for (c, t, _), n in runs.items() if (c, t) == task)
        out[run] = {
            "roster.in_roster": float(agent in roster),
            "roster.runs_on_task": float(runs[(q.campaign_id, q.task_id, q.agent.agent_id)]),
            "roster.task_share": per_agent[agent] / max(1, len(tasks)),
            "declared.on_task": float(declared[task]),
            "declared.share": declared[task] / max(1, n_task),
        }
    return out


def _repeats(sealed: Mapping[str, ArtifactsSealed]) -> dict[str, Features]:
    """How many other runs of the campaign left exactly the same files (by content), and
    the same answer: a sampled model's runs differ, a control repeated on a task (its
    epochs) leaves the same each time."""

    def files(e: ArtifactsSealed) -> frozenset[tuple[str, str]]:
        return frozenset((f.path, f.sha256) for f in e.files)

    same_files = Counter((e.campaign_id, files(e)) for e in sealed.values() if e.files)
    same_message = Counter((e.campaign_id, e.final_message) for e in sealed.values())
    return {
        run: {
            "repeats.same_files": float(same_files[(e.campaign_id, files(e))] - 1)
            if e.files
            else 0.0,
            "repeats.same_message": float(same_message[(e.campaign_id, e.final_message)] - 1),
        }
        for run, e in sealed.items()
    }


def run_features(events: Iterable[Event]) -> dict[str, Features]:
    """Every run's readable fields, by run id, from a campaign's log (in log order)."""
    start: float | None = None
    requested: dict[str, RunRequested] = {}
    arrivals: dict[str, dict[str, float]] = {}
    order: list[str] = []
    steps: dict[str, list[AgentStepLogged]] = {}
    finished: dict[str, AgentFinished] = {}
    sealed: dict[str, ArtifactsSealed] = {}
    roster: set[tuple[str, str]] = set()
    declared: Counter[tuple[str, str]] = Counter()
    for e in events:
        t = e.occurred_at.timestamp()
        if isinstance(e, CampaignStarted):
            start = t if start is None else start
            roster |= {(e.campaign_id, a.agent_id) for a in e.campaign.agents}
        if isinstance(e, ControlDeclared):  # sealed: its campaign and task are all one reads
            declared[(e.campaign_id, e.task_id or "")] += 1
        if isinstance(e, ControlDeclared) or e.run_id is None:
            continue
        run = e.run_id
        arrivals.setdefault(run, {}).setdefault(e.event_type, t)
        if isinstance(e, RunRequested):
            if run not in requested:
                order.append(run)
            requested[run] = e
        elif isinstance(e, AgentStepLogged):
            steps.setdefault(run, []).append(e)
        elif isinstance(e, AgentFinished):
            finished[run] = e
        elif isinstance(e, ArtifactsSealed):
            sealed[run] = e
    t0 = (
        start
        if start is not None
        else min((a["RunRequested"] for a in arrivals.values()), default=0)
    )
    out: dict[str, Features] = {}
    log_reader = _log_reader(requested, roster, declared)
    repeats = _repeats(sealed)
    for i, run in enumerate(order):
        f: Features = {"arrival.request_rank": i / max(1, len(order) - 1)}
        f.update(_request(requested[run]))
        f.update(log_reader[run])
        f.update(_steps(steps.get(run, [])))
        if run in finished:
            f.update(_finished(finished[run]))
        if run in sealed:
            f.update(_sealed(sealed[run]))
            f.update(repeats[run])
        at = arrivals[run]
        for kind in (
            "RunRequested",
            SandboxReady.__name__,
            "AgentStepLogged",
            "AgentFinished",
            "ArtifactsSealed",
        ):
            if kind in at:
                f[f"arrival.{kind}_s"] = at[kind] - t0
        if "ArtifactsSealed" in at:
            f["arrival.request_to_seal_s"] = at["ArtifactsSealed"] - at["RunRequested"]
        out[run] = f
    return out


def control_labels(declared: Iterable[ControlDetails]) -> set[str]:
    """The run ids the campaign declared controls (what the classifier must not find),
    from its declarations opened with the deployment's controls key."""
    return {d.control_run_id for d in declared}


def openings_no_agent_made(
    features: Mapping[str, Features], controls: set[str]
) -> list[tuple[float | str, float | str]]:
    """(model, first tool) of each control whose first tool no agent's run wearing the
    same model opened with: a reader comparing a model's transcripts tells it by that."""
    made = {
        (f.get("agent.model", ""), f.get("transcript.first_tool", ""))
        for run, f in features.items()
        if run not in controls
    }
    pairs = [
        (features[r].get("agent.model", ""), features[r].get("transcript.first_tool", ""))
        for r in controls
        if r in features
    ]
    return sorted((p for p in pairs if p not in made), key=str)
