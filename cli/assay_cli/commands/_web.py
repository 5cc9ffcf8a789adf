"""`assay web freeze|export|import`: a campaign's recorded web, frozen and carried along.

A campaign run with `web.mode: record` keeps every web answer on its steps. `freeze`
stores them as one snapshot blob; `export` writes a snapshot and its blobs as a tar that
travels with the campaign's tasks; `import` stores such a tar and prints the snapshot's
hash, which a campaign replays with `web: {mode: replay, snapshot: HASH}`.
"""

from __future__ import annotations

from pathlib import Path

import typer

from assay.bus import Bus
from assay.config import Settings
from assay.store import open_store
from assay_schemas import AssayError

from ._app import app, console, err_console, fail, run_async
from ._home import HOME_HELP, home_settings

web_app = typer.Typer(
    help="A campaign's recorded web: freeze it, export it, import it.", no_args_is_help=True
)
app.add_typer(web_app, name="web")


async def _cache_bytes(settings: Settings, campaign: str) -> tuple[bytes, int]:
    from assay_runner.web import index_from_log, snapshot_bytes

    async with Bus(settings, service="cli") as bus:
        index = await index_from_log(bus, campaign)
    return snapshot_bytes(index), len(index)


@web_app.command()
def freeze(
    campaign: str = typer.Option(..., "--campaign", help="The campaign that recorded its web."),
) -> None:
    """Store a campaign's recorded web as one snapshot blob and print its hash."""
    settings = Settings()
    data, n = run_async(_cache_bytes(settings, campaign))
    info = open_store(settings).put_bytes(data)
    console.print(f"{info.sha256}  ({n} web answers of campaign {campaign})")


@web_app.command("export")
def export_(
    out: Path = typer.Option(..., "--out", help="The tar file to write."),
    campaign: str = typer.Option(None, "--campaign", help="Export this campaign's recorded web."),
    snapshot: str = typer.Option(None, "--snapshot", help="Export this snapshot (its hash)."),
    home: Path = typer.Option(None, "--home", help=HOME_HELP),
) -> None:
    """Write a recorded web (a campaign's, or a snapshot) and its blobs as a tar."""
    from assay_runner.web import export_snapshot

    if (campaign is None) == (snapshot is None):
        err_console.print("[red]error:[/red] name exactly one of --campaign and --snapshot")
        raise typer.Exit(2)
    with home_settings(home) as settings:
        store = open_store(settings)
        try:
            data = (
                run_async(_cache_bytes(settings, campaign))[0]
                if campaign is not None
                else store.get_bytes(snapshot)
            )
            n = export_snapshot(store, data, out)
        except AssayError as e:
            raise fail(e, 1) from e
    console.print(f"wrote {n} web answers and their blobs to {out}")


@web_app.command("import")
def import_(path: Path = typer.Argument(..., help="A tar written by `assay web export`.")) -> None:
    """Store an exported web (every blob re-hashed) and print the snapshot hash to replay."""
    from assay_runner.web import import_snapshot

    settings = Settings()
    try:
        sha = import_snapshot(open_store(settings), path)
    except AssayError as e:
        raise fail(e, 1) from e
    console.print(f"{sha}  (replay it with web: {{mode: replay, snapshot: {sha}}})")
