"""What `assay up` does: nats-server (optionally every service) until SIGINT or SIGTERM."""

from __future__ import annotations

import asyncio
import re
import signal
import time
from typing import TYPE_CHECKING

import typer

from assay.config import Settings
from assay.embedded import NatsServer
from assay.security.signing import ensure_operator
from assay_schemas import ID_PATTERN, AssayError

from ._app import console, fail, run_async

if TYPE_CHECKING:
    from assay.security import EmbeddedAuth


def _check_campaigns(campaigns: list[str]) -> None:
    """A publisher's campaign names a NATS user, subjects and a bucket: an id or nothing."""
    for campaign in campaigns:
        if not re.match(ID_PATTERN, campaign):
            raise typer.BadParameter(
                f"{campaign!r} is not a campaign id (letters, digits, '-' and '_', starting "
                "with a letter or digit; no dots, wildcards or spaces)",
                param_hint="--publisher",
            )


def start_up(
    settings: Settings, port: int, *, all_services: bool, auth: bool, publisher: list[str]
) -> None:
    """`assay up`: nats-server on `port` (with every service when `all_services`; with
    per-service users when `auth`) until SIGINT or SIGTERM."""
    from assay.security import prepare_embedded, write_env_files
    from assay_cli.stack import create_streams

    if publisher and not (auth or settings.nats_auth):
        raise typer.BadParameter("--publisher needs --auth (users exist only with auth on)")
    _check_campaigns(publisher)
    secured = prepare_embedded(
        settings, auth=auth or settings.nats_auth, publisher_campaigns=tuple(publisher)
    )
    config = secured.config_file if secured else None
    operator = ensure_operator(settings)
    server = NatsServer(settings.home / "nats", port=port, config_file=config)
    try:
        server.start()
        settings = settings.model_copy(update={"nats_url": server.url})
        if secured and secured.users:
            # Services may only look the streams up: the admin creates them now.
            admin = secured.settings_for("admin", settings)
            asyncio.run(create_streams(admin, upload_campaigns=tuple(publisher)))
    except AssayError as e:
        server.stop()
        raise fail(e) from e
    except BaseException:
        server.stop()
        raise
    console.print(
        f"[green]nats-server[/green] with JetStream on {server.url} (data: {server.data_dir})"
    )
    if secured and secured.users:
        # Passwords go to files only its owner reads, never to the terminal (scrollback,
        # screen sharing, CI logs).
        files = write_env_files(secured, settings)
        console.print(
            "per-service users: one env file each (mode 0600; `set -a; . FILE` before "
            "`assay serve` or a command):",
            highlight=False,
        )
        for path in files:
            console.print(f"  {path}", highlight=False, soft_wrap=True)
    console.print(f"operator key (verifies every signed event): {operator}")
    console.print(f"blob store: {settings.blob_dir}   —   Ctrl-C to stop")
    if all_services:
        try:
            _serve_all(settings, secured)
        finally:
            server.stop()
            console.print("stopped")
        return
    _wait(server)


def _wait(server: NatsServer) -> None:
    """Until SIGINT or SIGTERM, or the server ends; then stop it."""
    stop = False

    def _stop(*_: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGINT, _stop)
    signal.signal(signal.SIGTERM, _stop)
    try:
        while not stop and server.process is not None and server.process.poll() is None:
            time.sleep(0.2)
    finally:
        server.stop()
        console.print("stopped")


def _serve_all(settings: Settings, secured: EmbeddedAuth | None) -> None:
    """Every service in this process until SIGINT/SIGTERM (judges start per campaign).

    With users, each service connects as its own (the split stack's least privilege):
    a fault in one service cannot publish another's events or pull its work."""
    from assay.service import run_until_signal
    from assay.store import open_store
    from assay.telemetry import traced
    from assay_cli.stack import EMBEDDED_SERVICES, Stack

    stack = Stack(settings=settings, store=open_store(settings), auth=secured)
    services = [stack.build(name) for name in EMBEDDED_SERVICES]
    users = ", ".join(stack.settings_of(n).nats_user or "-" for n in EMBEDDED_SERVICES)
    console.print(
        f"services: {', '.join(EMBEDDED_SERVICES)}"
        + (f" (NATS users: {users})" if secured and secured.users else ""),
        highlight=False,
    )
    try:
        with traced("assay", instance=settings.instance):
            run_async(run_until_signal(services))
    except AssayError as e:  # a bad OTEL_* exporter name: one line, not a traceback
        raise fail(e) from e
