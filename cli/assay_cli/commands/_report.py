"""Commands of the aggregator: report, replay, audit, export, rejudge."""

from __future__ import annotations

import sys
import time
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from assay.bus import Bus, LoggedEvent, messages_at, read_campaign
from assay.config import Settings
from assay.security.signing import trust_for
from assay_cli.command import assay_command
from assay_schemas import ANCHOR, AssayError

from ._app import app, console, err_console, fail, run_async
from ._home import HOME_HELP, home_settings

# assay_report and assay_judge load polars, scipy and numpy (about 2 s): imported
# inside the commands that use them, so that `assay --help` and every other command
# start without them; the names are imported here for the type checker only.
if TYPE_CHECKING:
    from assay_report.projections import Projections
    from assay_report.state import RefusedRecord


JSON_HELP = "Write canonical JSON to this file ('-': standard output, for scripts)."


def _write_json(path: Path, data: bytes) -> None:
    if str(path) == "-":
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
        return
    path.write_bytes(data)
    console.print(f"wrote {path}")


class GroupBy(StrEnum):
    """Task attributes a report can be grouped by."""

    domain = "domain"
    phase = "phase"
    difficulty = "difficulty"


async def _projections(settings: Settings, *, fresh: bool = False) -> Projections:
    """Projections of the whole log: the live snapshot caught up (or a fresh fold)."""
    from assay_aggregator.snapshot import read_projections

    p = await read_projections(settings, service="cli", fresh=fresh)
    if p.state.refused:
        err_console.print(f"[yellow]{describe_refused(list(p.state.refused.values()))}[/yellow]")
    return p


def describe_refused(refused: list[RefusedRecord]) -> str:
    """One line for people: how many stored messages reached no number, and where to look."""
    return (
        f"refused {messages_at(refused)} (undecodable, forged or repeated); "
        "see assay dlq and the report's refusals"
    )


@app.command()
def report(
    campaign: str = typer.Option(None, "--campaign", help="Only this campaign (default: all)."),
    group_by: GroupBy = typer.Option(None, "--group-by", help="Group by a task attribute."),
    html: Path = typer.Option(None, "--html", help="Write one self-contained HTML file."),
    json_out: Path = typer.Option(None, "--json", help=JSON_HELP),
    resamples: int = typer.Option(10_000, "--resamples", min=1, help="Bootstrap resamples."),
    home: Path = typer.Option(None, "--home", help=HOME_HELP),
) -> None:
    """Scores with task-bootstrap CIs, failure tags, judge agreement, rank stability."""
    from assay_report.html import render_html
    from assay_report.report import build_report, report_json
    from assay_report.terminal import print_report

    with home_settings(home) as settings:
        p = run_async(_projections(settings))
    rep = build_report(
        p, campaign=campaign, group_by=group_by.value if group_by else None, n_resamples=resamples
    )
    # With the JSON on standard output, everything for people goes to standard error.
    people = err_console if str(json_out) == "-" else console
    print_report(rep, people, doctor=f"{assay_command()} doctor")
    if html:
        html.write_text(render_html(rep), encoding="utf-8")
        people.print(f"wrote {html}")
    if json_out:
        _write_json(json_out, report_json(rep))


@app.command()
def replay(
    verify: bool = typer.Option(
        False, "--verify", help="Compare a fresh rebuild with the live aggregator."
    ),
    json_out: Path = typer.Option(None, "--json", help=JSON_HELP),
    home: Path = typer.Option(None, "--home", help=HOME_HELP),
) -> None:
    """Rebuild every projection and the report from sequence 1."""
    from assay_aggregator.verify import verify as run_verify
    from assay_report.report import build_report, report_json

    if verify:
        with home_settings(home) as settings:
            results = run_async(run_verify(settings))
        bad = [r for r in results if not r.identical]
        for r in bad:
            console.print(f"[red]differs:[/red] {r.name}")
            console.print(r.diff, markup=False, highlight=False)
        if bad:
            err_console.print(f"[red]{len(bad)} of {len(results)} comparisons differ[/red]")
            raise typer.Exit(1)
        console.print(
            f"identical ({len(results)} comparisons: {', '.join(r.name for r in results)})"
        )
        return
    t0 = time.perf_counter()
    with home_settings(home) as settings:
        p = run_async(_projections(settings, fresh=True))
    took = time.perf_counter() - t0
    (err_console if str(json_out) == "-" else console).print(
        f"rebuilt {p.state.applied} events up to sequence {p.state.last_sequence} in {took:.2f}s: "
        f"{len(p.state.runs)} runs, {len(p.state.verdicts)} verdicts"
    )
    if json_out:
        _write_json(json_out, report_json(build_report(p)))


@app.command()
def audit(
    run_id: str = typer.Argument(..., help="The run to audit."),
    json_out: Path = typer.Option(None, "--json", help=JSON_HELP),
    home: Path = typer.Option(None, "--home", help=HOME_HELP),
) -> None:
    """A run's event chain, every blob re-verified, each verdict with its evidence, its score."""
    from assay.store import open_store
    from assay_aggregator.audit import audit_document, audit_run, load_run_events
    from assay_aggregator.audit_view import print_audit
    from assay_report.canonical import canonical_json

    async def load(settings: Settings) -> tuple[list[LoggedEvent], dict[int, str], int]:
        async with Bus(settings, service="cli") as bus:
            events, signers = await load_run_events(bus, run_id, trust_for(settings))
            anchor = ANCHOR
            if events and (campaign := await read_campaign(bus, events[0].event.campaign_id)):
                anchor = campaign.rubric.pass_threshold
            return events, signers, anchor

    with home_settings(home) as settings:
        events, signers, anchor = run_async(load(settings))
    if not events:
        err_console.print(f"[red]error:[/red] no events for run {run_id}")
        raise typer.Exit(2)
    result = audit_run(events, open_store(settings), anchor=anchor, signers=signers)
    if json_out:
        _write_json(json_out, canonical_json(audit_document(result)))
    else:
        print_audit(result, console)
    if result.corrupted:
        err_console.print(f"[red]{len(result.corrupted)} blob(s) failed verification[/red]")
        raise typer.Exit(1)


@app.command()
def export(
    parquet: Path = typer.Option(..., "--parquet", help="Folder for the Parquet files."),
    campaign: str = typer.Option(None, "--campaign", help="Report frames of this campaign only."),
    resamples: int = typer.Option(10_000, "--resamples", min=1, help="Bootstrap resamples."),
    home: Path = typer.Option(None, "--home", help=HOME_HELP),
) -> None:
    """Write every projection table and report frame as Parquet."""
    from assay_report.export import export_parquet
    from assay_report.report import build_report

    with home_settings(home) as settings:
        p = run_async(_projections(settings))
    paths = export_parquet(p, build_report(p, campaign=campaign, n_resamples=resamples), parquet)
    console.print(f"wrote {len(paths)} Parquet files to {parquet}")


@app.command()
def rejudge(
    judge: Path = typer.Option(..., "--judge", help="Judge spec (YAML/JSON)."),
    campaign: str = typer.Option(None, "--campaign", help="Only this campaign (default: all)."),
    timeout: float = typer.Option(None, "--timeout", help="Give up after this many seconds."),
) -> None:
    """Judge every sealed run again with a new or changed judge, without rerunning agents."""
    from assay_judge.rejudge import rejudge as run_rejudge
    from assay_judge.spec import load_judge_spec

    settings = Settings()
    try:
        spec = load_judge_spec(judge)
    except AssayError as e:
        raise fail(e) from e

    def progress(done: int, total: int) -> None:
        console.print(f"{spec.judge_id}: {done}/{total} sealed runs judged", end="\r")

    result = run_async(
        run_rejudge(settings, spec, campaign=campaign, timeout_s=timeout, on_progress=progress)
    )
    console.print(
        f"{result.judge_id}: {result.n_done}/{result.n_sealed} sealed runs judged "
        f"({result.n_failed} failed judgments) in {', '.join(result.campaigns) or 'no campaign'}"
    )
    if not result.complete:
        raise typer.Exit(1)
