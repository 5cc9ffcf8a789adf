"""One run's trace as a waterfall, from what the log already holds: no collector needed.

Each event carries its time (``occurred_at``) and the trace context it was published in
(a W3C ``traceparent`` header), and the agent's steps carry their model and tool
durations. From those alone the run is laid out as rows: the top-level rows tile the run
from its ``RunRequested`` to its last event without gap or overlap (time nobody accounts
for is an explicit ``wait`` row), so their durations add up to the run's wall time; the
rows under them (model call, tool calls, each judgment) show where a phase went.

Times written by different machines can disagree: a row is never drawn before the one it
follows (it is clamped), and the clamping is reported as a warning.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Literal, NamedTuple

from pydantic import BaseModel, ConfigDict
from rich.console import Console
from rich.markup import escape
from rich.text import Text

from assay_cli.width import line_width
from assay_schemas import (
    AgentFinished,
    AgentStepLogged,
    ArtifactsSealed,
    Event,
    JudgmentFailed,
    JudgmentRecorded,
    RunFailed,
    RunHistory,
    RunRequested,
    SandboxReady,
)

__all__ = ["Row", "Waterfall", "build_waterfall", "print_waterfall", "trace_id_of"]

RowKind = Literal[
    "sandbox", "wait", "step", "model", "tool", "seal", "judging", "judgment", "failed"
]
MAX_ROWS = 20_000
"""A run with more rows than this (a huge step count) is cut, with a warning."""
_WIDE = 160
"""Columns from which a waterfall row keeps its service and detail beside its bar."""

_TRACEPARENT = re.compile(r"00-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}")


class Row(BaseModel):
    """One bar of the waterfall: a phase of the run, or a part of one (depth 1)."""

    model_config = ConfigDict(frozen=True)

    depth: int
    kind: RowKind
    name: str
    service: str
    """The service that did it (``assay-runner``, ``assay-judge-<id>``, ...)."""
    start_ms: float
    """Milliseconds after the run was requested."""
    duration_ms: float
    detail: str = ""


class Waterfall(BaseModel):
    """A run's rows, its trace id (the one a collector shows) and its wall time."""

    model_config = ConfigDict(frozen=True)

    run_id: str
    campaign_id: str
    task_id: str
    agent_id: str
    trace_id: str | None
    started_at: datetime
    wall_ms: float
    """From ``RunRequested`` to the run's last event (its last verdict, when judged)."""
    rows: list[Row]
    warnings: list[str]

    @property
    def covered_ms(self) -> float:
        """The top-level rows' durations added up (equal to `wall_ms` by construction)."""
        return sum(r.duration_ms for r in self.rows if r.depth == 0)


class _Builder:
    def __init__(self, start: datetime) -> None:
        self.start = start
        self.cursor = 0.0
        self.rows: list[Row] = []
        self.warnings: list[str] = []

    def at(self, when: datetime) -> float:
        return (when - self.start).total_seconds() * 1000

    def top(self, kind: RowKind, name: str, service: str, end_ms: float, detail: str = "") -> Row:
        """A top-level row from the cursor to `end_ms` (clamped: never before the cursor)."""
        if end_ms < self.cursor - 1:
            self.warnings.append(
                f"{name}: logged {self.cursor - end_ms:.0f} ms before the row it follows "
                "(clocks of different machines?); drawn as taking no time"
            )
        row = Row(
            depth=0,
            kind=kind,
            name=name,
            service=service,
            start_ms=self.cursor,
            duration_ms=max(0.0, end_ms - self.cursor),
            detail=detail,
        )
        self.rows.append(row)
        self.cursor = max(self.cursor, end_ms)
        return row

    def wait_until(self, start_ms: float, why: str) -> None:
        if start_ms - self.cursor > 0.5:
            self.top("wait", "wait", "", start_ms, why)

    def child(
        self, kind: RowKind, name: str, service: str, start: float, dur: float, detail: str = ""
    ) -> None:
        self.rows.append(
            Row(
                depth=1,
                kind=kind,
                name=name,
                service=service,
                start_ms=start,
                duration_ms=max(0.0, dur),
                detail=detail,
            )
        )


class _RunEvents(NamedTuple):
    request: RunRequested
    steps: list[AgentStepLogged]
    sandbox: SandboxReady | None
    finish: AgentFinished | None
    failed: RunFailed | None
    seal: ArtifactsSealed | None
    verdicts: list[JudgmentRecorded | JudgmentFailed]


def trace_id_of(headers: Mapping[str, str]) -> str | None:
    """The trace id in a message's W3C ``traceparent`` header (None when absent or malformed)."""
    match = _TRACEPARENT.fullmatch(headers.get("traceparent", "")[:64])
    return match.group(1) if match and match.group(1) != "0" * 32 else None


def _sorted(events: Sequence[Event]) -> _RunEvents | None:
    """The run's events as its one fold (`RunHistory`) reads them: the seal every reader
    shows, the end that counts, the failure that decided the run."""
    run = RunHistory.fold(events)
    if run.request is None:
        return None
    return _RunEvents(
        request=run.request,
        steps=run.steps,
        sandbox=run.sandbox,
        finish=run.finish,
        failed=run.failure,
        seal=run.seal,
        verdicts=[*run.verdicts.values(), *run.judgment_failures.values()],
    )


def _steps(b: _Builder, steps: Sequence[AgentStepLogged]) -> None:
    for step in steps:
        end = b.at(step.occurred_at)
        tools = sum(r.duration_ms for r in step.tool_results)
        b.wait_until(end - step.latency_ms, "the agent loop between steps (logging, publishing)")
        row = b.top(
            "step",
            f"step {step.step}",
            "assay-runner",
            end,
            f"{step.usage.input_tokens} in / {step.usage.output_tokens} out tokens",
        )
        model_ms = max(0.0, row.duration_ms - tools)
        b.child("model", "model call", "assay-runner", row.start_ms, model_ms)
        at = row.start_ms + model_ms
        for result in step.tool_results:
            state = "error" if result.is_error else "ok"
            if result.exit_code is not None:
                state += f", exit {result.exit_code}"
            b.child(
                "tool", f"tool {result.name[:40]}", "assay-runner", at, result.duration_ms, state
            )
            at += result.duration_ms


def _judging(b: _Builder, verdicts: Sequence[JudgmentRecorded | JudgmentFailed]) -> None:
    if not verdicts:
        return
    begin = b.cursor
    last = max(b.at(v.occurred_at) for v in verdicts)
    b.top("judging", "judging", "", last, f"{len(verdicts)} verdict(s), judges in parallel")
    for v in sorted(verdicts, key=lambda v: v.occurred_at):
        end = max(begin, b.at(v.occurred_at))
        if isinstance(v, JudgmentRecorded):
            scores = ", ".join(f"{k} {s.score}" for k, s in sorted(v.scores.items())[:6])
            detail = scores or f"{sum(c.passed for c in v.checks)}/{len(v.checks)} checks pass"
        else:
            detail = f"failed: {v.error[:80]}"
        name = f"judgment {v.judge_id}" + (f" #{v.sample}" if v.sample else "")
        b.child("judgment", name, f"assay-judge-{v.judge_id}", begin, end - begin, detail)


def build_waterfall(events: Sequence[Event], trace_id: str | None) -> Waterfall | None:
    """The waterfall of one run's events (log order); None when the run was never requested."""
    run = _sorted(events)
    if run is None:
        return None
    b = _Builder(run.request.occurred_at)
    if run.sandbox is not None:
        b.top(
            "sandbox",
            "sandbox create",
            "assay-sandbox-manager",
            b.at(run.sandbox.occurred_at),
            f"{run.sandbox.backend}; includes the wait for a free slot",
        )
    _steps(b, run.steps)
    if run.finish is not None:
        b.top(
            "wait",
            "agent finished",
            "assay-runner",
            b.at(run.finish.occurred_at),
            f"stop: {run.finish.stop_reason}",
        )
    if run.failed is not None:
        b.top(
            "failed",
            f"run failed ({run.failed.stage})",
            run.failed.producer.service,
            b.at(run.failed.occurred_at),
            run.failed.error[:100],
        )
    if run.seal is not None:
        b.top(
            "seal",
            "seal artifacts",
            "assay-sandbox-manager",
            b.at(run.seal.occurred_at),
            f"{run.seal.n_files} file(s)",
        )
    _judging(b, run.verdicts)
    rows = b.rows
    if len(rows) > MAX_ROWS:
        b.warnings.append(f"{len(rows)} rows: only the first {MAX_ROWS} are shown")
        rows = rows[:MAX_ROWS]
    req = run.request
    return Waterfall(
        run_id=req.run_id or "",
        campaign_id=req.campaign_id,
        task_id=req.task_id or "",
        agent_id=req.agent.agent_id,
        trace_id=trace_id,
        started_at=req.occurred_at,
        wall_ms=b.cursor,
        rows=rows,
        warnings=b.warnings,
    )


def _ms(value: float) -> str:
    return f"{value / 1000:.2f} s" if value >= 1000 else f"{value:.0f} ms"


def print_waterfall(w: Waterfall, console: Console, width: int = 40) -> None:
    """The waterfall in the terminal: one bar per row on the run's time axis."""
    scale = width / w.wall_ms if w.wall_ms > 0 else 0.0
    console.print(
        f"run [bold]{escape(w.run_id)}[/bold]  task {escape(w.task_id)}  agent "
        f"{escape(w.agent_id)}  campaign {escape(w.campaign_id)}",
        highlight=False,
    )
    console.print(
        f"trace id {w.trace_id or '(none in the log)'}   wall time {_ms(w.wall_ms)} "
        f"(rows cover {_ms(w.covered_ms)})   started {w.started_at.isoformat()}",
        highlight=False,
    )
    fit = line_width(console)
    narrow = fit if fit is not None and fit < _WIDE else None
    if narrow is not None:  # the bar takes what times and label leave, at least 10 columns
        width = max(10, narrow - 22 - 36)
        scale = width / w.wall_ms if w.wall_ms > 0 else 0.0
    for r in w.rows:
        lead = int(r.start_ms * scale)
        bar = " " * lead + "█" * max(1, round(r.duration_ms * scale))
        label = escape(("  " * r.depth + r.name)[:34])
        times = f"{_ms(r.start_ms):>9} {_ms(r.duration_ms):>9}  {bar[: width + 1]:<{width + 1}} "
        if narrow is None:
            console.print(
                f"{times}{label:<34} {escape(r.service)[:28]:<28} {escape(r.detail[:60])}",
                highlight=False,
                soft_wrap=True,
            )
            continue
        # Narrow: who did it and the detail on a line of their own, under the label.
        console.print(f"{times}{label}", highlight=False, soft_wrap=True)
        said = Text(f"{'':>21}{r.service}  {r.detail[:60]}".rstrip(), style="dim")
        said.truncate(narrow, overflow="ellipsis")
        console.print(said, highlight=False, soft_wrap=True)
    for warning in w.warnings:
        console.print(f"[yellow]warning:[/yellow] {escape(warning)}", highlight=False)
