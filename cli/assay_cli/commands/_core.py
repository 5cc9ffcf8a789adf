"""Commands of the event backbone: up, submit, events, schemas export."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlparse

import typer
from rich.markup import escape
from rich.text import Text

from assay.asyncapi import ASYNCAPI_FILE, render_asyncapi
from assay.bus import Bus, Skipped, describe_skipped
from assay.campaign import campaign_warnings, load_campaign, submit_campaign
from assay.config import Settings
from assay.store import open_store
from assay_cli.settings import CliSettings
from assay_cli.width import line_width
from assay_schemas import Event, export_schemas

from ._app import app, console, err_console, run_async, schemas_app, warn
from ._home import HOME_HELP, home_settings

# assay_report and assay_judge load polars, scipy and numpy (about 2 s): imported
# inside the commands that use them, so that `assay --help` and every other command
# start without them; the names are imported here for the type checker only.
if TYPE_CHECKING:
    from assay_report.state import State


@app.command()
def up(
    port: int = typer.Option(None, help="NATS port (default: the port in ASSAY_NATS_URL, 4222)."),
    all_services: bool = typer.Option(
        False, "--all", help="Also run every service in this process (one-machine use)."
    ),
    auth: bool = typer.Option(
        False, "--auth", help="One NATS user per service, least privilege (ASSAY_NATS_AUTH=1)."
    ),
    publisher: list[str] = typer.Option(
        [],
        "--publisher",
        help="With --auth: a user that may only submit tasks to this campaign (repeatable).",
    ),
) -> None:
    """Start the embedded stack: nats-server with JetStream on .assay/, until Ctrl-C."""
    from ._up import start_up

    settings = Settings()
    port = port or urlparse(settings.nats_url).port or 4222
    start_up(settings, port, all_services=all_services, auth=auth, publisher=publisher)


@app.command()
def submit(
    tasks: list[Path] = typer.Argument(
        ..., help="Task folders, folders of tasks, .jsonl or ASI-Bench .json files"
    ),
    campaign: Path = typer.Option(..., "--campaign", "-c", help="Campaign file (YAML/TOML/JSON)."),
) -> None:
    """Upload attachments and publish CampaignStarted and one TaskSubmitted per task."""
    settings = Settings()

    from assay_cli.run import load_drafts  # run.py drives the aggregator: see above

    async def main() -> None:
        spec = load_campaign(campaign)
        warn(campaign_warnings(spec))
        drafts = load_drafts(
            tasks, settings.max_attachment_bytes, CliSettings.of(settings).max_tasks_per_submission
        )
        store = open_store(settings)
        async with Bus(settings, service="cli") as bus:
            submitted = await submit_campaign(bus, store, spec, drafts)
        console.print(
            f"campaign [bold]{spec.campaign_id}[/bold]: {len(submitted)} task(s) submitted "
            f"({len(spec.agents)} agent(s) × {spec.epochs} epoch(s))"
        )

    run_async(main())


def _summary(event: Event) -> str:
    data = event.model_dump(
        exclude={
            "event_id",
            "event_type",
            "schema_version",
            "occurred_at",
            "campaign_id",
            "run_id",
            "task_id",
            "causation_id",
            "producer",
        }
    )
    text = json.dumps(data, default=str)
    return text if len(text) <= 100 else text[:97] + "..."


def _row(sequence: int, ev: Event, state: State, agents: dict[str, str]) -> str:
    """One event as `assay events` prints it: its run's agent, REFUSED when it counts nowhere."""
    rid = ev.run_id or ""
    named = getattr(getattr(ev, "agent", None), "agent_id", "") or getattr(ev, "agent_id", "")
    if rid and named:
        agents[rid] = str(named)  # a refused run is in no fold: its request still names it
    run = state.runs.get(rid)
    agent = run.agent_id if run is not None and run.agent_id else agents.get(rid, "-")
    refused = state.refused.get(sequence)
    mark = f" [red]REFUSED: {escape(refused.reason)}[/red]" if refused is not None else ""
    return (
        f"[dim]{sequence:>6}[/dim] {ev.occurred_at:%H:%M:%S} [bold]{ev.event_type:<17}[/bold] "
        f"{ev.campaign_id} {rid or '-'} {agent}{mark} [dim]{escape(_summary(ev))}[/dim]"
    )


@app.command()
def events(
    run: str = typer.Option("*", "--run", help="Only this run's events."),
    campaign: str = typer.Option("*", "--campaign", help="Only this campaign's events."),
    event_type: str = typer.Option("*", "--type", help="Only this event type."),
    follow: bool = typer.Option(False, "--follow", "-f", help="Keep printing new events."),
    as_json: bool = typer.Option(False, "--json", help="One JSON event per line."),
    start: int = typer.Option(1, "--from", help="Start at this stream sequence."),
    home: Path = typer.Option(None, "--home", help=HOME_HELP),
) -> None:
    """Print the event log in order."""

    from assay.security.signing import trust_for
    from assay_aggregator.audit import counted_until

    skipped: list[Skipped] = []
    width = line_width(console)

    async def main(settings: Settings) -> None:
        trust = trust_for(settings)
        async with Bus(settings, service="cli") as bus:
            subject = bus.subjects.event(event_type, campaign, run)
            replay = bus.replay(start=start, subject=subject, follow=follow, skipped=skipped)
            state = None
            agents: dict[str, str] = {}
            async for logged in replay:
                ev = logged.event
                if as_json:
                    print(ev.model_dump_json())
                    continue
                # The counting rule's decision, as the report takes it: one fold of the whole log,
                # caught up again only when following past its end.
                state = await counted_until(bus, logged.sequence, trust, state)
                row = Text.from_markup(_row(logged.sequence, ev, state, agents))
                if width is not None:  # one event a line, cut to the terminal's width
                    row.truncate(width, overflow="ellipsis")
                console.print(row, highlight=False, soft_wrap=True)

    with contextlib.suppress(KeyboardInterrupt), home_settings(home) as settings:
        run_async(main(settings))
    if skipped:
        err_console.print(f"[yellow]{describe_skipped(skipped)}[/yellow]")


@schemas_app.command("export")
def schemas_export(
    out: Path = typer.Option(None, "--out", help="Folder (default: the package's schemas/json)."),
) -> None:
    """Write one JSON Schema per event (and domain model), and the AsyncAPI document of
    every subject and event, into schemas/json."""
    paths = export_schemas(out) if out else export_schemas()
    asyncapi = paths[0].parent / ASYNCAPI_FILE
    asyncapi.write_text(render_asyncapi(), encoding="utf-8")
    console.print(f"wrote {len(paths)} schema files and {asyncapi.name} to {paths[0].parent}")
