"""The main job in one command: embedded stack up, campaign in, live progress, report out."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import NamedTuple

from pydantic import ValidationError
from rich.console import Console

from assay.bus import Bus
from assay.campaign import campaign_warnings, load_campaign, submit_campaign
from assay.config import Settings
from assay.embedded import NatsServer
from assay.security.signing import ensure_operator
from assay.store import open_store
from assay.tasks import TaskDraft, build_task, load_tasks
from assay_aggregator.invariants import DEFAULT_GRACE_S
from assay_aggregator.rebuild import blob_loader, fold_stream
from assay_aggregator.service import AggregatorService
from assay_cli.check import CheckResult, check_stream, print_breaches
from assay_cli.command import assay_command
from assay_cli.commands._app import warn
from assay_cli.commands._watch import log_head, print_pending, watch_log
from assay_cli.doctor import checks_for, print_checks, run_checks
from assay_cli.progress import Progress
from assay_cli.settings import CliSettings
from assay_cli.stack import Stack
from assay_report.html import render_html
from assay_report.report import Report, build_report, report_json
from assay_report.terminal import print_report
from assay_runner.settings import RunnerSettings
from assay_runner.web import copy_snapshot, snapshot_blobs
from assay_schemas import (
    BlobNotFound,
    CacheSpec,
    CampaignSpec,
    ConfigError,
    InvalidInput,
    Problems,
    TaskInputError,
)
from assay_testing.demo import SCRIPTED_KEY_ENV, agent_scripts, judge_scripts, scripted_campaign
from assay_testing.scripted import Script, ScriptedModelServer, ScriptedServerNotStarted

__all__ = ["RunOutcome", "run_campaign"]

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
    problems: Problems
    """The report's problems section: `assay run` exits 1 unless it is `ok`."""
    settled: bool
    """Every run reached its outcome (seal and owed verdicts included) before the timeout;
    `assay run` exits 1 when it gave up waiting."""
    checked: CheckResult
    """The log's invariants on the run's log (`assay check`): `assay run` exits 1 on a breach."""


def scripted_port(home: Path) -> int:
    """The port the bundled scripted server takes for runs of `home` (20000-31999, below
    Linux's ephemeral range): the same on every run, as its URL is part of the development
    cache's key, so that a re-run of a scripted campaign hits."""
    digest = hashlib.sha256(str(home.resolve()).encode()).digest()
    return 20000 + int.from_bytes(digest[:4]) % 12000


def _scripted_server(examples: Path, home: Path) -> ScriptedModelServer:
    """The demo cast's server, started on the home's own port (any port when that is taken:
    another run of the home, or another program; then the development cache misses)."""
    scripts: dict[str, Script] = {**agent_scripts(examples), **judge_scripts()}
    server = ScriptedModelServer(scripts, prompt_cache=True)  # the demo shows what caching saves
    try:
        return server.start(scripted_port(home))
    except ScriptedServerNotStarted:
        return server.start()


class Drive(NamedTuple):
    """How a campaign's drive ended."""

    aggregator: AggregatorService
    """Its state folds the whole log, as a reopened run directory's report does."""
    settled: bool
    """The log said every run reached its outcome before the timeout."""


async def _drive(
    settings: Settings,
    spec: CampaignSpec,
    drafts: list[TaskDraft],
    progress: Progress,
    timeout_s: float,
) -> Drive:
    """Run the campaign until the log says every run reached its outcome (sealed, however
    it ended, and every owed verdict given or given up on), or until the timeout."""
    stack = Stack.for_settings(settings)
    await stack.start()
    aggregator = stack.started["aggregator"]
    assert isinstance(aggregator, AggregatorService)
    # One report.json per campaign: the run directory's, written below from this
    # aggregator's state; its own live report file would be a second copy of it.
    aggregator.write_report = False
    settled = False
    try:
        async with Bus(settings, service="cli") as bus:
            await submit_campaign(bus, stack.store, spec, drafts)
            submitted = await log_head(bus)
            try:
                await asyncio.wait_for(
                    watch_log(bus, progress, until_complete=True, settle_at=submitted), timeout_s
                )
                settled = True
            except TimeoutError:
                print_pending(progress, timeout_s)
            head = await log_head(bus)
        # Caught up live, its snapshot (written at its stop) is current; past this wait the
        # fold below catches up all the same.
        with contextlib.suppress(TimeoutError):
            await aggregator.wait_for(head, timeout=60)
    finally:
        await stack.stop()
    await _fold_rest(settings, aggregator)
    return Drive(aggregator, settled)


async def _fold_rest(settings: Settings, aggregator: AggregatorService) -> None:
    """Fold into the stopped aggregator's state what the log holds past it (events logged
    while the stack stopped): the report printed is then the one a reopened run directory
    folds, snapshot and the rest of the log, byte for byte."""
    async with Bus(settings, service="cli") as bus:
        await fold_stream(
            bus.js,
            bus.stream.name,
            bus.subjects.events,
            state=aggregator.state,
            trust=aggregator.trust,
            load=blob_loader(settings),
        )


def require(backend: str, console: Console) -> None:
    """Refuse to start when a prerequisite of the sandbox backend is missing."""
    failed = [c for c in run_checks(checks_for("run", backend)) if not c.ok and not c.optional]
    if failed:
        print_checks(failed, console)
        raise ConfigError(
            f"this machine cannot run the campaign ({len(failed)} problem(s) above); "
            f"`{assay_command()} doctor` checks everything"
        )


def _store_name(settings: Settings) -> str:
    if settings.store == "s3":
        return f"s3://{settings.s3_bucket}"
    return str(settings.blob_dir.resolve())


def _own_store(home: Settings, run: Settings) -> bool:
    """The run directory has a store of its own, apart from the home's, where a frozen web
    brought to the home must be copied (an S3 bucket, or a shared store_dir, is one store)."""
    return run.store == "local" and run.blob_dir.resolve() != home.blob_dir.resolve()


def frozen_web(spec: CampaignSpec, home: Settings) -> str | None:
    """The snapshot the campaign's web reads (`web.snapshot`, recording or replaying),
    checked whole in the home's store; ConfigError, in one line naming what is missing and
    the command that brings it, when the store lacks it or one of its blobs."""
    web = spec.web
    if web.mode not in ("record", "replay") or web.snapshot is None:
        return None
    sha, store, where = web.snapshot, open_store(home), _store_name(home)
    bring = f"`{assay_command()} web import FILE.tar`"
    try:
        wanted = snapshot_blobs(store, sha)
    except BlobNotFound as e:
        raise ConfigError(
            f"web snapshot {sha[:12]} is not in {where}: bring it with {bring} "
            f"(or `{assay_command()} web freeze --campaign C`)"
        ) from e
    except InvalidInput as e:
        raise ConfigError(f"{e} (in {where}): bring the frozen web again with {bring}") from e
    missing = [b for b in wanted if not store.exists(b)]
    if missing:
        raise ConfigError(
            f"web snapshot {sha[:12]} in {where} lacks {len(missing)} of its {len(wanted)} "
            f"blob(s), e.g. {missing[0][:12]}: bring them with {bring}"
        )
    return sha


def load_drafts(tasks: Sequence[Path], max_bytes: int, max_tasks: int = 10_000) -> list[TaskDraft]:
    """Task drafts from every path, in order; a task id given twice, or more than
    `max_tasks` tasks, is an error."""
    drafts: list[TaskDraft] = []
    for path in tasks:
        drafts.extend(load_tasks(path, max_bytes=max_bytes))
        if len(drafts) > max_tasks:
            raise TaskInputError(
                f"{path}: more than {max_tasks} tasks in one submission "
                "(max_tasks_per_submission; set ASSAY_MAX_TASKS_PER_SUBMISSION to raise it)"
            )
    ids = [d.task_id for d in drafts]
    twice = sorted({i for i in ids if ids.count(i) > 1})
    if twice:
        raise TaskInputError(f"task ids given more than once: {', '.join(twice)}")
    for draft in drafts:  # what submitting would refuse (an RE2-invalid pattern...), now:
        build_task(draft.fields, [])  # before a run directory or a stack is made for it
    for draft in drafts:
        warn(draft.warnings)  # what a task asked for that Assay does not do
    return drafts


def write_reports(report: Report, workdir: Path, html: Path | None) -> tuple[Path, Path]:
    """report.json and the HTML: the report as the aggregator builds it, problems included
    (the same bytes a replay rebuilds)."""
    json_path = workdir / "report.json"
    json_path.write_bytes(report_json(report))
    html_path = (html or workdir / "report.html").resolve()
    html_path.write_text(render_html(report), encoding="utf-8")
    return json_path, html_path


def print_next_steps(workdir: Path, console: Console) -> None:
    """The commands that look further into this run directory, each runnable as printed."""
    home = f"--home {workdir}"
    assay = assay_command()
    hint = ""
    if assay != "assay":
        bin_dir = Path(sys.executable).parent.absolute()
        hint = f"\n(to type just `assay`: export PATH={bin_dir}:$PATH)"
    steps = [
        ("every run, transcript, file and verdict in the browser", f"view {workdir}"),
        ("the report again, by domain", f"report {home} --group-by domain"),
        ("the event log", f"events {home}"),
        ("every figure rebuilt from the log", f"replay --verify {home}"),
        ("one run's events, files and verdicts", f"audit <run id> {home}"),
        ("where the run spent its time", f"trace <run id> {home}"),
        ("every table as Parquet", f"export {home} --parquet <folder>"),
    ]
    # A description on its own line: a command (with its paths) stays whole to copy,
    # and what it does fits a narrow terminal.
    lines = [f"  # {what}\n  {assay} {args}" for what, args in steps]
    console.print(
        "\nlook further (each reopens the run directory by itself):\n" + "\n".join(lines) + hint,
        highlight=False,
        soft_wrap=True,
    )


def with_cache(spec: CampaignSpec, ttl: str | None) -> CampaignSpec:
    """The campaign with ``--cache`` on (`ttl` "": its own ``cache:``, else the default
    expiry); unchanged for None."""
    if ttl is None:
        return spec
    if not ttl:
        return spec if spec.cache is not None else spec.model_copy(update={"cache": CacheSpec()})
    try:
        cache = CacheSpec.model_validate({"ttl": ttl})
    except ValidationError as e:
        raise ConfigError(f"--cache-ttl {ttl}: {e.errors()[0]['msg']}") from e
    return spec.model_copy(update={"cache": cache})


def run_campaign(
    tasks: Path | Sequence[Path],
    campaign_file: Path,
    *,
    settings: Settings | None = None,
    html: Path | None = None,
    console: Console | None = None,
    timeout_s: float = 1800.0,
    check: bool = True,
    scripted_server: ScriptedModelServer | None = None,
    cache: str | None = None,
) -> RunOutcome:
    """Run a campaign end to end on a fresh embedded stack under `.assay/runs/`.

    The report is printed once every run reached its outcome (its seal and every owed
    verdict included) or `timeout_s` passed (`RunOutcome.settled` says which), and is the
    report the run directory gives when reopened. With `check`, the prerequisites of the
    campaign's sandbox backend are checked first and a campaign that cannot succeed is
    refused (ConfigError) before anything starts.
    `scripted_server`: the started server a scripted campaign uses instead of the demo
    cast's (the caller keeps it running and reads what it received).
    `cache`: turn the development cache on with this expiry (``7d``; "" for the campaign's
    ``cache:`` expiry, else the default); its answers live under the home
    (``<home>/cache/models``), shared by every run."""
    console = console or Console()
    base = settings or Settings()
    paths = [tasks] if isinstance(tasks, Path) else list(tasks)
    spec = with_cache(load_campaign(campaign_file), cache)
    warn(campaign_warnings(spec))
    most = CliSettings.of(base).max_tasks_per_submission
    drafts = load_drafts(paths, base.max_attachment_bytes, most)
    if check:
        require(spec.sandbox.backend, console)
    snapshot = frozen_web(spec, base)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    workdir = (base.home / "runs" / f"{spec.campaign_id}-{stamp}").resolve()
    server = None
    if spec.scripted:
        console.print(BANNER)
        if scripted_server is None:
            server = _scripted_server(paths[0].parent, base.home)
        os.environ.setdefault(SCRIPTED_KEY_ENV, "scripted")
        url = (server or scripted_server).openai_base_url  # type: ignore[union-attr]
        spec = scripted_campaign(spec, url)
    progress = Progress(campaign_id=spec.campaign_id)
    try:
        with NatsServer(workdir / "nats") as nats:
            # The run's folder is new each time; the development cache outlives it.
            cache_dir = RunnerSettings.of(base).model_cache
            settings = base.model_copy(
                update={
                    "home": workdir,
                    "nats_url": nats.url,
                    "model_cache_dir": cache_dir.resolve(),
                }
            )
            # This run's operator key: every service signs, the report counts only what
            # an enrolled key signed, and `assay audit` can show who wrote each event.
            ensure_operator(settings)
            if snapshot is not None and _own_store(base, settings):
                copy_snapshot(open_store(base), open_store(settings), snapshot)
            console.print(
                f"campaign [bold]{spec.campaign_id}[/bold]: {len(drafts)} tasks × {len(spec.agents)} agents × "
                f"{spec.epochs} epoch(s); jury: {', '.join(j.judge_id for j in spec.judges)} + rules\n"
                + (
                    "plus control runs of known-good and known-bad answers, judged blind beside them (runs expected counts them; only Judge validity uses them)\n"
                    if spec.controls
                    else ""
                )
                + f"log and files under {workdir}"
            )
            drive = asyncio.run(_drive(settings, spec, drafts, progress, timeout_s))
            # The log's invariants, on the log just written (`assay check --home`).
            checked = asyncio.run(check_stream(settings, replay=True, grace_s=DEFAULT_GRACE_S))
    finally:
        if server is not None:
            server.stop()
    report = build_report(drive.aggregator.projections, campaign=spec.campaign_id)
    json_path, html_path = write_reports(report, workdir, html)
    if report.scripted:
        console.print()
        console.print(BANNER)
    # Problems last, where they are seen.
    print_report(report, console, doctor=f"{assay_command()} doctor")
    console.print(f"\nreport: {html_path}\n        {json_path}")
    print_breaches(checked.breaches, console)
    console.print(f"assay check: {checked.summary()}", highlight=False)
    print_next_steps(workdir, console)
    return RunOutcome(
        workdir, json_path, html_path, progress, report.problems, drive.settled, checked
    )
