"""How blind are the judges and reviewers? A classifier tries to tell controls from agents.

For every run of a campaign, :func:`run_features` collects what a judge service or a
reviewer can read of it (issue #47): the run request's fields (agent id, kind, model,
family, limits), its step events (counts, tokens, latencies, tool calls, the
transcript's shape), its end (steps, tokens, duration, stop reason), its seal (file
names, sizes, media types, exclusions, the final message) and when each arrived
relative to the campaign's start, and what a reader of the whole log has beside (whether
its agent is in the campaign's roster, its agent's runs on the task, and the task's sealed
``ControlDeclared`` events as a reader without the controls secret sees them: how many).
The declarations, opened with the home's key, give the labels. :func:`blindness_auc` then trains a logistic regression, cross-validated, to tell
the controls from the agents' runs: an AUC near 0.5 means nothing read marks a control,
near 1 that something does. :func:`top_tells` names the features that carried it.

`python -m bench.blindness` (and the ``blindness`` suite of ``make bench``) runs the
bundled scripted campaign and prints the AUC.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import tempfile
import warnings
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, NamedTuple

import numpy as np
import yaml
from rich.console import Console

from assay.bus import Bus, decode_log, read_raw
from assay.config import Settings
from assay.security.controls import controls_key
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
from bench.table import Row

__all__ = [
    "Blindness",
    "BlindnessWarning",
    "Campaign",
    "Features",
    "bench_blindness",
    "blindness_auc",
    "bundled_campaign",
    "control_labels",
    "group_aucs",
    "run_features",
    "top_tells",
]

Features = dict[str, float | str]
"""One run's readable fields: numbers, or strings (one indicator per value)."""

MIN_PER_CLASS = 4
"""Fewest controls and agents' runs a cross-validated AUC is computed from."""


class BlindnessWarning(UserWarning):
    """The runs cannot carry a cross-validated AUC (too few of one class)."""


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


def _steps(steps: Sequence[AgentStepLogged]) -> Features:
    names: Counter[str] = Counter()
    commands: list[str] = []
    arg_chars, out_chars, result_chars, errors = 0, 0, 0, 0
    for s in steps:
        out_chars += len(s.model_output)
        for c in s.tool_calls:
            names[c.name] += 1
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
    return out


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
    t0 = start if start is not None else min((a["RunRequested"] for a in arrivals.values()), default=0)  # fmt: skip
    out: dict[str, Features] = {}
    log_reader = _log_reader(requested, roster, declared)
    for i, run in enumerate(order):
        f: Features = {"arrival.request_rank": i / max(1, len(order) - 1)}
        f.update(_request(requested[run]))
        f.update(log_reader[run])
        f.update(_steps(steps.get(run, [])))
        if run in finished:
            f.update(_finished(finished[run]))
        if run in sealed:
            f.update(_sealed(sealed[run]))
        at = arrivals[run]
        for kind in ("RunRequested", SandboxReady.__name__, "AgentStepLogged", "AgentFinished", "ArtifactsSealed"):  # fmt: skip
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


@dataclass(frozen=True)
class Blindness:
    """A cross-validated classifier's power to tell controls from agents' runs."""

    auc: float
    """Area under the ROC curve of out-of-fold predictions (0.5: chance); NaN when the
    runs cannot carry it (see ``warnings``)."""
    n_controls: int
    n_agent_runs: int
    folds: int
    scores: tuple[float, ...]
    """Out-of-fold probability of "control", in the order of ``run_ids``."""
    run_ids: tuple[str, ...]
    labels: tuple[int, ...]
    warnings: tuple[str, ...] = ()


def _matrix(features: Mapping[str, Features], runs: Sequence[str]) -> tuple[np.ndarray, list[str]]:
    from sklearn.feature_extraction import DictVectorizer

    vec = DictVectorizer(sparse=False)
    x = vec.fit_transform([features[r] for r in runs])
    return np.nan_to_num(np.asarray(x, dtype=float)), list(vec.get_feature_names_out())


def _model() -> Any:
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    return make_pipeline(StandardScaler(), LogisticRegression(C=1.0, max_iter=5000))


def blindness_auc(
    features: Mapping[str, Features], controls: set[str], *, seed: int = 0, folds: int = 5
) -> Blindness:
    """Cross-validated AUC of a logistic regression (standardized features) telling the
    runs in `controls` from the others, from `features` alone."""
    from sklearn.metrics import roc_auc_score
    from sklearn.model_selection import StratifiedKFold, cross_val_predict

    runs = sorted(features)
    y = np.array([int(r in controls) for r in runs])
    n_pos, n_neg = int(y.sum()), int(len(y) - y.sum())
    if min(n_pos, n_neg) < MIN_PER_CLASS:
        message = (
            f"{n_pos} controls and {n_neg} agents' runs: a cross-validated AUC needs at "
            f"least {MIN_PER_CLASS} of each"
        )
        warnings.warn(message, BlindnessWarning, stacklevel=2)
        return Blindness(float("nan"), n_pos, n_neg, 0, (), tuple(runs), tuple(y), (message,))
    k = min(folds, n_pos, n_neg)
    x, _ = _matrix(features, runs)
    split = StratifiedKFold(n_splits=k, shuffle=True, random_state=seed)
    proba = cross_val_predict(_model(), x, y, cv=split, method="predict_proba")[:, 1]
    auc = float(roc_auc_score(y, proba))
    return Blindness(auc, n_pos, n_neg, k, tuple(float(p) for p in proba), tuple(runs), tuple(int(v) for v in y))  # fmt: skip


def top_tells(features: Mapping[str, Features], controls: set[str], n: int = 10) -> list[tuple[str, float]]:  # fmt: skip
    """The `n` features weighing most in a model fit on every run (standardized
    coefficients, positive: more of it, more likely a control): what gives controls away."""
    runs = sorted(features)
    y = np.array([int(r in controls) for r in runs])
    x, names = _matrix(features, runs)
    model = _model()
    model.fit(x, y)
    coef = model[-1].coef_[0]
    ranked = sorted(zip(names, coef, strict=True), key=lambda kv: -abs(kv[1]))
    return [(name, float(c)) for name, c in ranked[:n]]


GROUPS = ("agent", "run", "arrival", "steps", "transcript", "tool", "end", "seal", "message", "roster", "declared")  # fmt: skip
"""Feature groups by name prefix: what each kind of readable field gives away alone."""


def group_aucs(features: Mapping[str, Features], controls: set[str], *, seed: int = 0) -> dict[str, float]:  # fmt: skip
    """The cross-validated AUC of each feature group (`GROUPS`) on its own."""
    out = {}
    for group in GROUPS:
        part = {
            run: {k: v for k, v in f.items() if k.split(".", 1)[0] == group} or {"none": 0.0}
            for run, f in features.items()
        }
        out[group] = blindness_auc(part, controls, seed=seed).auc
    return out


ROOT = Path(__file__).resolve().parents[1]


class Campaign(NamedTuple):
    """A finished campaign: its whole log, the model server that answered it, its report."""

    events: list[Event]
    server: Any
    """The started `ScriptedModelServer` (the caller stops it): what the judges received."""
    report: dict[str, Any]
    controls: list[ControlDetails]
    """Its control declarations, opened with the home's controls key (the labels)."""


async def _events(settings: Settings) -> list[Event]:
    async with Bus(settings, service="cli") as bus:
        raws = read_raw(bus.js, bus.stream.name, subject=bus.subjects.events)
        return [logged.event async for logged in decode_log(raws)]


def bundled_campaign(tmp: Path, update: Mapping[str, Any] | None = None) -> Campaign:
    """examples/campaign.yaml (with `update` over it) over every bundled task, run on a
    fresh embedded stack under `tmp` with the scripted cast; the server is left running."""
    from assay_cli.commands._home import home_settings
    from assay_cli.run import run_campaign
    from assay_testing.demo import agent_scripts, judge_scripts
    from assay_testing.scripted import ScriptedModelServer

    campaign = yaml.safe_load((ROOT / "examples" / "campaign.yaml").read_text())
    campaign.update(update or {})
    controls = dict(campaign.get("controls") or {})
    controls["references"] = str(ROOT / "examples" / "references")
    campaign["controls"] = controls
    path = tmp / "campaign.yaml"
    path.write_text(yaml.safe_dump(campaign))
    server = ScriptedModelServer(
        {**agent_scripts(ROOT / "examples" / "solutions"), **judge_scripts()}
    ).start()
    state = Path(tempfile.mkdtemp(prefix="blind-", dir="/tmp"))
    state.chmod(0o711)
    settings = Settings(home=tmp / "home", state_dir=state)
    outcome = run_campaign(
        ROOT / "examples" / "tasks", path, settings=settings,
        console=Console(record=True, width=200), timeout_s=800, scripted_server=server,
    )  # fmt: skip
    with home_settings(outcome.workdir) as reopened:
        events = asyncio.run(_events(reopened))
        key = controls_key(reopened)
    declared = [key.open(e) for e in events if isinstance(e, ControlDeclared)]
    return Campaign(events, server, json.loads(outcome.report_json.read_text()), declared)


def bench_blindness() -> list[Row]:
    """The classifier's AUC on the bundled scripted campaign (target: at most 0.6)."""
    with tempfile.TemporaryDirectory(prefix="bench-blind-") as tmp:
        ran = bundled_campaign(Path(tmp))
        ran.server.stop()
    features = run_features(ran.events)
    controls = control_labels(ran.controls)
    found = blindness_auc(features, controls, seed=47)
    name = f"classifier AUC, controls vs agents' runs ({found.n_controls} vs {found.n_agent_runs}, bundled)"  # fmt: skip
    rows = [Row("blindness", name, found.auc, "AUC", 0.5, "chance", "≤ 0.6")]
    for group, auc in group_aucs(features, controls, seed=47).items():
        rows.append(Row("blindness", f"  {group} fields alone", auc, "AUC", 0.5, "chance", "≤ 0.6"))
    return rows


if __name__ == "__main__":
    from bench.table import print_rows

    print_rows(bench_blindness())
