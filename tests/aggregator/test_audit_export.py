"""`assay audit` on a corrupted blob; Parquet export; the report CLI writing HTML and JSON."""

from __future__ import annotations

import asyncio
import io
import json
import math
import os
from pathlib import Path

import numpy as np
import polars as pl
from rich.console import Console

from assay.bus import Bus
from assay.config import Settings
from assay_aggregator.audit import audit_run, load_run_events
from assay_aggregator.audit_view import print_audit
from assay_aggregator.rebuild import fold_stream
from assay_report import Projections, build_report
from assay_report.export import export_parquet
from assay_report.statistics._panel import prepare
from assay_schemas import ArtifactsSealed

from .conftest import Published, run_cli


def _victim(published: Published) -> ArtifactsSealed:
    return next(e for e in published.events if isinstance(e, ArtifactsSealed) and len(e.files) > 1)


def _corrupt(published: Published, sha: str) -> None:
    path = published.store.path_of(sha)
    os.chmod(path, 0o644)
    path.write_bytes(b"tampered\n")


async def test_audit_finds_a_corrupted_blob_and_recomputes_the_score(
    bus: Bus, settings: Settings, published: Published, tmp_path: Path
) -> None:
    sealed = _victim(published)
    target = sealed.files[-1]
    _corrupt(published, target.sha256)
    events, _ = await load_run_events(bus, sealed.run_id or "")
    audit = audit_run(events, published.store)
    assert [e.event_type for e in [x.event for x in events]][:2] == ["RunRequested", "SandboxReady"]
    assert [(b.path, b.status) for b in audit.corrupted] == [(target.path, "corrupted")]
    roles = {b.role for b in audit.blobs}
    assert roles == {"attachment", "workspace", "tool_output", "artifact"}
    assert {v.judge_id for v in audit.verdicts} == {"judge_a", "judge_b", "rules"}
    # The run score equals the one the statistics library computes for this run.
    p = Projections(await fold_stream(bus.js, bus.stream.name, bus.subjects.events))
    panel = prepare(p.statistics_tables())
    expected = panel.run_score[panel.run_ids.index(sealed.run_id)]
    assert math.isclose(audit.contribution.run_score, float(expected))
    assert audit.contribution.passed == bool(expected >= 8)
    assert np.isfinite(expected)

    out = await asyncio.to_thread(run_cli, ["audit", sealed.run_id or ""], settings, tmp_path)
    assert out.returncode == 1, out.stderr
    assert "CORRUPTED" in out.stdout and "contribution: run score" in out.stdout
    assert "1 blob(s) failed verification" in out.stderr
    # Read by people at any width: one summary per event, never a JSON dump; stacked at 80.
    for width in (80, 200):
        buf = io.StringIO()
        print_audit(audit, Console(file=buf, width=width))
        text = buf.getvalue()
        assert "{" not in text and "step 0: " in text and "…" not in text
        assert all(len(line) <= width for line in text.splitlines() if " · " in line)
    # And by scripts: the whole audit as canonical JSON on standard output.
    out = await asyncio.to_thread(
        run_cli, ["audit", sealed.run_id or "", "--json", "-"], settings, tmp_path
    )
    assert out.returncode == 1, out.stderr
    doc = json.loads(out.stdout)
    assert doc["run_id"] == sealed.run_id and doc["n_corrupted"] == 1
    assert [b["status"] for b in doc["blobs"] if b["path"] == target.path] == ["corrupted"]
    assert math.isclose(doc["contribution"]["run_score"], float(expected))


async def test_export_writes_parquet_that_polars_reads_back(
    bus: Bus, published: Published, tmp_path: Path
) -> None:
    p = Projections(await fold_stream(bus.js, bus.stream.name, bus.subjects.events))
    report = build_report(p, n_resamples=100)
    paths = export_parquet(p, report, tmp_path / "out")
    names = {path.name for path in paths}
    assert "projection_judgments.parquet" in names and "report_agent_scores.parquet" in names
    for path in paths:
        df = pl.read_parquet(path)
        if path.name.startswith("projection_"):
            assert df.equals(p.table(path.stem.removeprefix("projection_"))), path.name
    scores = pl.read_parquet(tmp_path / "out" / "report_agent_scores.parquet")
    assert scores.height == 3


async def test_report_cli_writes_html_and_canonical_json(
    settings: Settings, published: Published, tmp_path: Path
) -> None:
    html, js = tmp_path / "r.html", tmp_path / "r.json"
    args = [
        "report",
        "--campaign",
        "camp",
        "--resamples",
        "200",
        "--html",
        str(html),
        "--json",
        str(js),
    ]
    out = await asyncio.to_thread(run_cli, args, settings, tmp_path)
    assert out.returncode == 0, out.stderr
    for heading in (
        "SCRIPTED CAMPAIGN",
        "Leaderboard",
        "Per-dimension",
        "Failure tags",
        "Reference checks",
        "Judge strictness",
        "Self-preference",
        "Judge agreement",
        "Rank stability",
        "Infrastructure failures",
        "Empty-artifact",
    ):
        assert heading in out.stdout, heading
    assert out.stdout.index("overclaiming") < out.stdout.index("no_artifacts")
    assert "<svg" in html.read_text()
    assert json.loads(js.read_bytes())["statistics"]["n_resamples"] == 200
    exported = await asyncio.to_thread(
        run_cli,
        ["export", "--parquet", str(tmp_path / "pq"), "--resamples", "100"],
        settings,
        tmp_path,
    )
    assert exported.returncode == 0, exported.stderr
    assert len(list((tmp_path / "pq").glob("*.parquet"))) > 20
