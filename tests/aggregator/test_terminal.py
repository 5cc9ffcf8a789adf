"""The terminal report at 80 and 160 columns and in a file: no name or figure is cut."""

from __future__ import annotations

import io
import math
import re
from dataclasses import dataclass

import pytest
from rich.console import Console

from assay_aggregator import fold
from assay_report import Projections, Report, build_report
from assay_report.terminal import print_report
from assay_testing.synthetic_log import LogSpec, synthetic_events

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
    for j in report.judges:
        out.append(f"[{100 * j.repair_ci_low:.1f}, {100 * j.repair_ci_high:.1f}]")
        out.append(f"[{100 * j.failure_ci_low:.1f}, {100 * j.failure_ci_high:.1f}]")
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


def _section(text: str, title: str) -> list[str]:
    """The lines of one section: from its title to the next line neither indented nor
    part of a table."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(title))
    inside = (" ", *"┏┃┡│└")
    end = next((i for i in range(start + 1, len(lines)) if not lines[i].startswith(inside)), None)
    return lines[start + 1 : end]


def test_no_field_is_shown_with_an_empty_value(report: Report) -> None:
    narrow, _ = _render(report, 80)
    warnings = _section(narrow, "Warnings")
    assert warnings and not any(line.strip() == "" for line in warnings)
    for line in narrow.splitlines():
        # A label with nothing after it ("subject: "), not prose that ends on a colon.
        assert not re.match(r"\s*[\w ()-]{1,30}: ?(·|$)", line), line


def test_each_failed_check_is_one_block_of_labelled_fields(report: Report) -> None:
    failed = [(c, f) for c in report.reference_check_matrix for f in c.failed]
    assert failed
    narrow, _ = _render(report, 80)
    lines = _section(narrow, "Failed reference checks")
    assert "run: check — detail" not in narrow
    headings = [line for line in lines if line.startswith("  ") and not line.startswith("    ")]
    assert len(headings) == len(failed)
    for cell, f in failed:
        run, _, rest = f.partition(": ")
        check, _, detail = rest.partition(" — ")
        block = "\n".join(lines)
        assert f"{cell.task_id} · {cell.agent_id}" in block
        assert f"run: {run} · check: {check}" in block or f"run: {run}\n" in block
        assert f"value found: {detail}" in block


def test_judge_costs_are_one_block_per_judge(report: Report) -> None:
    judges = sorted({c.judge_id for c in report.judge_costs})
    assert len(judges) >= 2
    for width in (80, 160):
        text, _ = _render(report, width)
        lines = _section(text, "Judge cost and tokens")
        for judge in judges:
            assert sum(judge in line for line in lines) == 1, (width, judge, lines)
    narrow, _ = _render(report, 80)
    block = "\n".join(_section(narrow, "Judge cost and tokens"))
    assert block.count("input tokens: ") == len(judges)
    assert block.count("cost USD: 0.0000 / 0.0000 / 0.0000 / 0.0000") == len(judges)


def test_the_terminal_lists_the_refused_messages_it_points_to(report: Report) -> None:
    """The integrity line points at the refusals; the terminal itself lists them."""
    from assay_report.report import RefusedMessage

    refused = tuple(
        RefusedMessage(sequence=i, subject=f"assay.ev.X.c.r{i}", reason=f"forged {i}")
        for i in range(1, 13)
    )
    text, _ = _render(report.model_copy(update={"refused": refused}), 160)
    assert "12 message(s) refused" in text and "Refused messages" in text
    assert "forged 1" in text and "forged 10" in text and "forged 11" not in text
    assert "and 2 more refused message(s)" in text
