"""`assay dlq list|show`: the dead-letter stream, where messages no consumer could take go."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape

from assay.bus import (
    DEAD_DELIVERIES,
    DEAD_REASON,
    DEAD_SEQUENCE,
    DEAD_SUBJECT,
    Bus,
    RawMessage,
    read_raw,
)
from assay.config import Settings

from ._app import app, console, err_console, run_async
from ._home import HOME_HELP, home_settings

dlq_app = typer.Typer(
    help="Dead letters: what no consumer could take, and why.", no_args_is_help=True
)
app.add_typer(dlq_app, name="dlq")

SHOW_BYTES = 4096


async def _dead_letters(settings: Settings) -> list[RawMessage]:
    async with Bus(settings, service="cli") as bus:
        info = await bus.js.stream_info(f"{settings.stream}_DLQ")
        if not info.state.messages:
            return []
        reader = read_raw(bus.js, f"{settings.stream}_DLQ", subject=bus.subjects.dead_letters)
        return [raw async for raw in reader]


def _row(raw: RawMessage) -> dict[str, str | int]:
    h = raw.headers
    return {
        "sequence": raw.sequence,
        "consumer": raw.subject.rsplit(".", 1)[-1],
        "subject": h.get(DEAD_SUBJECT, ""),
        "log_sequence": int(h.get(DEAD_SEQUENCE, "0") or 0),
        "deliveries": int(h.get(DEAD_DELIVERIES, "0") or 0),
        "reason": h.get(DEAD_REASON, ""),
        "bytes": len(raw.data),
    }


@dlq_app.command("list")
def list_(
    as_json: bool = typer.Option(False, "--json", help="One JSON object per dead letter."),
    home: Path = typer.Option(None, "--home", help=HOME_HELP),
) -> None:
    """Every dead letter: which consumer gave up on which logged message, and why."""
    with home_settings(home) as settings:
        letters = run_async(_dead_letters(settings))
    rows = [_row(raw) for raw in letters]
    if as_json:
        for row in rows:
            print(json.dumps(row, sort_keys=True))
        return
    if not rows:
        console.print("no dead letters")
        return
    print_dead_letters(rows, console)


def print_dead_letters(rows: list[dict[str, str | int]], out: Console) -> None:
    """A table when it fits; else one block per dead letter ("seq 5 · consumer judge"),
    its reason wrapped between words, never folded mid-word into fragments."""
    # Here, not at the top: assay_report loads polars and scipy (about 2 s), which
    # `assay --help` and the other commands need not wait for.
    from assay_report.terminal_table import print_table

    cells = [
        [str(r[k]) for k in ("sequence", "consumer", "log_sequence", "subject", "deliveries")]
        + [str(r["reason"])[:300]]
        for r in rows
    ]
    columns = ["seq", "consumer", "log seq", "subject", "tries", "reason"]
    print_table(out, f"{len(rows)} dead letter(s)", columns, cells, keys=2, label_keys=True)


@dlq_app.command("show")
def show(
    sequence: int = typer.Argument(..., help="The dead letter's sequence (from `assay dlq list`)."),
    raw_out: Path = typer.Option(None, "--raw", help="Write the message's bytes to this file."),
    home: Path = typer.Option(None, "--home", help=HOME_HELP),
) -> None:
    """One dead letter: its headers and (the start of) its bytes, shown as data, never run."""
    with home_settings(home) as settings:
        letters = run_async(_dead_letters(settings))
    found = [raw for raw in letters if raw.sequence == sequence]
    if not found:
        err_console.print(f"[red]error:[/red] no dead letter at sequence {sequence}")
        raise typer.Exit(2)
    raw = found[0]
    for key, value in _row(raw).items():
        console.print(f"{key}: {escape(str(value))}", highlight=False)
    text = raw.data[:SHOW_BYTES].decode("utf-8", "backslashreplace")
    more = f"\n… {len(raw.data) - SHOW_BYTES} more bytes" if len(raw.data) > SHOW_BYTES else ""
    console.print(f"payload:\n{escape(text)}{more}", highlight=False, soft_wrap=True)
    if raw_out is not None:
        raw_out.write_bytes(raw.data)
        console.print(f"wrote {len(raw.data)} bytes to {raw_out}")
