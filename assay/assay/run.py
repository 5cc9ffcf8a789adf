"""The main job in one command: embedded stack up, campaign in, live progress, report out."""

from __future__ import annotations

import asyncio
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple

from rich.console import Console

from assay.bus import Bus
from assay.campaign import load_campaign, submit_campaign
from assay.config import Settings
from assay.embedded import NatsServer
from assay.progress import Progress
from assay.stack import Stack
from assay.tasks import load_tasks
from assay_schemas import CampaignSpec

__all__ = ["RunOutcome", "run_campaign", "scripted_campaign"]

SCRIPTED_KEY_ENV = "ASSAY_SCRIPTED_API_KEY"
BANNER = (
    "[bold yellow]Scripted campaign:[/bold yellow] agents and judges are scripted stand-ins served "
    "over the real OpenAI API by a local scripted model server; sandboxes, artifacts, sealing, "
    "rule and reference checks, and statistics are real. Name real models in the campaign file to "
    "evaluate them."
)


class RunOutcome(NamedTuple):
    """Where a run's results are."""

    workdir: Path
    report_json: Path
    report_html: Path
    progress: Progress


def scripted_campaign(spec: CampaignSpec, base_url: str) -> CampaignSpec:
    """The campaign with every model pointed at the scripted server (recorded as such)."""
    agents = [
        a.model_copy(update={"base_url": base_url, "api_key_env": SCRIPTED_KEY_ENV})
        for a in spec.agents
    ]
    judges = [
        j.model_copy(update={"base_url": base_url, "api_key_env": SCRIPTED_KEY_ENV})
        for j in spec.judges
    ]
    return spec.model_copy(update={"agents": agents, "judges": judges, "scripted": True})


def _scripted_server(solutions: Path) -> Any:
    from assay.demo import agent_scripts, judge_scripts
    from assay.scripted import ScriptedModelServer

    scripts: dict[str, Any] = {**agent_scripts(solutions), **judge_scripts()}
    return ScriptedModelServer(scripts)


async def _drive(
    settings: Settings, spec: CampaignSpec, drafts: list[Any], console: Console, timeout_s: float
) -> tuple[Progress, Any]:
    from assay.cli._watch import watch_log

    stack = Stack.for_settings(settings)
    await stack.start()
    try:
        async with Bus(settings, service="cli") as bus:
            await submit_campaign(bus, stack.store, spec, drafts)
            progress = await asyncio.wait_for(
                watch_log(bus, Progress(campaign_id=spec.campaign_id), until_complete=True),
                timeout_s,
            )
            head = (await bus.js.stream_info(settings.stream)).state.last_seq
        from assay_aggregator.service import AggregatorService

        aggregator = stack.started["aggregator"]
        assert isinstance(aggregator, AggregatorService)
        await aggregator.wait_for(head, timeout=60)
        return progress, aggregator
    finally:
        await stack.stop()


def run_campaign(
    tasks: Path,
    campaign_file: Path,
    *,
    settings: Settings | None = None,
    html: Path | None = None,
    console: Console | None = None,
    timeout_s: float = 1800.0,
) -> RunOutcome:
    """Run a campaign end to end on a fresh embedded stack under `.assay/runs/`."""
    from assay_aggregator.html import render_html
    from assay_aggregator.report import build_report, report_json
    from assay_aggregator.terminal import print_report

    console = console or Console()
    base = settings or Settings()
    spec = load_campaign(campaign_file)
    drafts = load_tasks(tasks, max_bytes=base.max_attachment_bytes)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    workdir = (base.home / "runs" / f"{spec.campaign_id}-{stamp}").resolve()
    server = None
    if spec.scripted:
        console.print(BANNER)
        server = _scripted_server(tasks.parent / "solutions").start()
        os.environ.setdefault(SCRIPTED_KEY_ENV, "scripted")
        spec = scripted_campaign(spec, server.openai_base_url)
    try:
        with NatsServer(workdir / "nats") as nats:
            settings = base.model_copy(update={"home": workdir, "nats_url": nats.url})
            console.print(
                f"campaign [bold]{spec.campaign_id}[/bold]: {len(drafts)} tasks × {len(spec.agents)} agents × "
                f"{spec.epochs} epoch(s); jury: {', '.join(j.judge_id for j in spec.judges)} + rules\n"
                f"log and files under {workdir}"
            )
            progress, aggregator = asyncio.run(_drive(settings, spec, drafts, console, timeout_s))
    finally:
        if server is not None:
            server.stop()
    report = build_report(aggregator.projections, campaign=spec.campaign_id)
    json_path = workdir / "report.json"
    json_path.write_bytes(report_json(report))
    html_path = (html or workdir / "report.html").resolve()
    html_path.write_text(render_html(report), encoding="utf-8")
    if report.scripted:
        console.print()
        console.print(BANNER)
    print_report(report, console)
    console.print(f"\nreport: {html_path}\n        {json_path}")
    return RunOutcome(workdir, json_path, html_path, progress)
