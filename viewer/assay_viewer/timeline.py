"""A run's spans on one time axis (a waterfall), from the timestamps of its logged events.

Each agent-side event closes a span that began at the previous agent-side event: the
sandbox start, every step (its model call shaded inside it, from the step's own
`latency_ms`), the seal. Judgments run after the seal, side by side, each from the seal
to its own verdict. Drawn as SVG rectangles (attributes, no inline style: the CSP forbids
it); labels and tooltips are strings the template escapes.
"""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple

from assay_aggregator.audit import ChainLine
from assay_schemas import AgentStepLogged

__all__ = ["Bar", "Timeline", "timeline"]

LABEL_W = 170
BAR_W = 600
ROW_H = 16
MAX_BARS = 400
"""Longer runs show their first spans and say how many were left out."""
_LABELS = {
    "SandboxReady": "sandbox",
    "AgentFinished": "finished",
    "RunFailed": "failed",
    "ArtifactsSealed": "seal",
    "RunRequested": "requested",
    "RunCancelled": "cancelled",
}
_JUDGED = ("JudgmentRecorded", "JudgmentFailed")


class Bar(NamedTuple):
    """One span as drawn: label, geometry in SVG units, tooltip, kind (a CSS class)."""

    label: str
    x: float
    width: float
    y: float
    inner: float
    """Width of the shaded part (a step's model call)."""
    title: str
    kind: str


class Timeline(NamedTuple):
    """The waterfall: bars, total duration, size of the drawing, bars left out."""

    bars: list[Bar]
    total_s: float
    width: int
    height: int
    left_out: int


def _time(c: ChainLine) -> datetime:
    return datetime.fromisoformat(c.occurred_at)


def timeline(chain: list[ChainLine], steps: list[AgentStepLogged]) -> Timeline:
    """The spans of one run's chain (in log order), scaled to the run's whole duration."""
    if not chain:
        return Timeline([], 0.0, LABEL_W + BAR_W, 0, 0)
    t0 = _time(chain[0])
    spans: list[tuple[str, float, float, float, str, str]] = []
    latency = {s.step: s.latency_ms / 1000 for s in steps}
    prev = 0.0
    sealed_at: float | None = None
    for c in chain[1:]:
        t = (_time(c) - t0).total_seconds()
        title = f"{c.event_type} at +{t:.1f} s: {c.summary[:200]}"
        if c.event_type in _JUDGED:
            start = sealed_at if sealed_at is not None else prev
            judge = c.summary.split(":", 1)[0][:40]
            spans.append((judge, start, t, 0.0, title, "judge"))
            continue
        if c.event_type == "AgentStepLogged":
            label = c.summary.split(":", 1)[0][:40]
            step = int(label.split()[-1]) if label.split()[-1].isdigit() else -1
            spans.append((label, prev, t, latency.get(step, 0.0), title, "step"))
        else:
            spans.append(
                (_LABELS.get(c.event_type, c.event_type[:40]), prev, t, 0.0, title, "mark")
            )
        if c.event_type == "ArtifactsSealed":
            sealed_at = t
        prev = max(prev, t)
    total = max([end for _, _, end, _, _, _ in spans] + [1e-9])
    scale = BAR_W / total
    bars = [
        Bar(
            label,
            LABEL_W + start * scale,
            max(2.0, (end - start) * scale),
            i * ROW_H,
            min(inner * scale, max(0.0, (end - start) * scale)),
            title,
            kind,
        )
        for i, (label, start, end, inner, title, kind) in enumerate(spans[:MAX_BARS])
    ]
    height = len(bars) * ROW_H + 4
    return Timeline(bars, total, LABEL_W + BAR_W + 10, height, max(0, len(spans) - MAX_BARS))
