"""`assay run` (the main job) and `assay up --all`'s in-process services."""

from __future__ import annotations

from pathlib import Path

import typer

from assay_schemas import AssayError

from ._app import app, console, fail


@app.command("run")
def run_command(
    tasks: list[Path] = typer.Argument(
        None, help="Task folders, .jsonl or ASI-Bench .json files (default: examples/tasks)."
    ),
    campaign: Path = typer.Option(
        Path("examples/campaign.yaml"), "--campaign", "-c", help="Campaign file."
    ),
    html: Path = typer.Option(None, "--html", help="Where to write the HTML report."),
    timeout: float = typer.Option(
        1800.0,
        help="Give up waiting after this many seconds: report what is in, exit 1 naming what is pending.",
    ),
    skip_checks: bool = typer.Option(
        False, "--skip-checks", help="Start even when `assay doctor` finds a problem."
    ),
    cache: bool = typer.Option(
        False,
        "--cache",
        help="Answer agents' and judges' repeated model requests from the development "
        "cache under the home, shared by its runs (same model, base URL, messages, epoch, "
        "judge sample, parameters and tools). Overrides the campaign's `cache:`. Off by "
        "default; cached steps and verdicts are marked in the log and counted at the top "
        "of the report.",
    ),
    cache_ttl: str = typer.Option(
        None,
        "--cache-ttl",
        help="How long a cached answer is served again (implies --cache; 7d, 12h, 30m; default "
        "7d, or the campaign's `cache: {ttl}`).",
        metavar="TTL",
    ),
) -> None:
    """Run a campaign end to end on a fresh embedded stack and print the report.

    The report is printed once every run reached its outcome (sealed however it ended,
    every owed verdict given or given up on): the same report `assay report --home` gives
    for the run directory. Traces go where OTEL_TRACES_EXPORTER says (console, otlp, none,
    or a list). Ends with `assay check` of the run's log. Exits 1 when a run failed for
    the platform's sake, anything expected is missing, the timeout passed first, or an
    invariant of the log is broken."""
    # run.py drives every service, the aggregator (polars, scipy: about 2 s) among them:
    # imported here so that `assay --help` and the other commands start without it.
    from assay.config import Settings
    from assay.telemetry import traced
    from assay_cli.run import run_campaign

    paths = tasks or [Path("examples/tasks")]
    try:
        # Every service of the one-process stack traces under its own service.name.
        with traced("assay", instance=Settings().instance):
            outcome = run_campaign(
                paths,
                campaign,
                html=html,
                console=console,
                timeout_s=timeout,
                check=not skip_checks,
                cache=cache_ttl or ("" if cache else None),
            )
    except AssayError as e:
        raise fail(e) from e
    if not outcome.problems.ok or not outcome.settled or not outcome.checked.clean:
        # Infrastructure failures, missing verdicts or seals, a wait given up on, or a
        # broken invariant of the log: the report is not the whole story.
        raise typer.Exit(1)
