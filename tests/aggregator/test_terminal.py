"""The terminal report at 80 and 160 columns and in a file: no name or figure is cut."""

from __future__ import annotations

import io
import math
from dataclasses import dataclass

import pytest
from rich.console import Console

from assay_aggregator import Projections, Report, build_report, fold
from assay_aggregator.terminal import print_report
from bench.synthetic_log import LogSpec, synthetic_events

# Long, hyphenated names: what a naive layout wraps mid-word or crops with an ellipsis.
NAMES = [
    "claude-sonnet-4-5-deep-research-agent",
    "gpt-5-mini-literature-review-agent-with-tools",
    "qwen3-235b-a22b-instruct-lab-notebook-agent",
]


@dataclass(frozen=True, kw_only=True)
class _LongNames(LogSpec):
    def agent_ids(self) -> list[str]:
        return NAMES[: self.n_agents]


@pytest.fixture(scope="module")
def report() -> Report:
    spec = _LongNames(campaign_id="wide", n_tasks=8, n_agents=3, scripted=True)
    projections = Projections(fold(enumerate(synthetic_events(spec), 1)))
    return build_report(projections, n_resamples=200, group_by="domain")


def _render(report: Report, width: int | None) -> tuple[str, int]:
    buf = io.StringIO()
    console = Console(file=buf, width=width) if width else Console(file=buf)
    print_report(report, console)
    return buf.getvalue(), console.width


def _figures(report: Report) -> list[str]:
    s = report.statistics
    out = []
    for r in s.agent_scores:
        if not math.isnan(r.estimate):
            out += [f"{r.estimate:.2f}", f"[{r.ci_low:.2f}, {r.ci_high:.2f}]"]
    for g in s.communication_gap:
        out.append(f"[{g.ci_low:.2f}, {g.ci_high:.2f}]")
    return out


@pytest.mark.parametrize("width", [80, 160, None], ids=["80", "160", "file"])
def test_no_name_or_figure_is_cut(
    report: Report, width: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    text, columns = _render(report, width)
    assert columns == (width or 80)  # a file gets rich's 80 columns
    lines = text.splitlines()
    assert "…" not in text  # nothing cropped
    for name in NAMES:
        whole = sum(line.count(name) for line in lines)
        assert whole >= 6, (name, whole)  # every section names it whole, on one line
    for figure in _figures(report):
        assert any(figure in line for line in lines), figure
    # Only a single unbreakable field may pass the width; tables never do.
    for line in lines:
        assert len(line) <= columns or " · " not in line.strip(), line


def test_wide_consoles_get_tables_narrow_ones_stacked_rows(report: Report) -> None:
    wide, _ = _render(report, 160)
    narrow, _ = _render(report, 80)
    assert "┃ group" in wide and "score: " not in wide.split("Per-dimension")[0]
    assert "score: " in narrow and f"  biology · {NAMES[0]}" in narrow
