"""`assay keys`: the operator key and the enrolled signing keys of services and judges."""

from __future__ import annotations

import shutil
from pathlib import Path

import typer

from assay.config import Settings
from assay.security.signing import ensure_operator, role_of, signer_for

from ._app import app, console, err_console

keys_app = typer.Typer(
    help="Signing keys: every service signs its events with a key the operator enrolled.",
    no_args_is_help=True,
)
app.add_typer(keys_app, name="keys")


@keys_app.command("operator")
def operator() -> None:
    """Print the operator's public key (creating the operator key of this home if missing):
    with it and the stream, anyone can verify who wrote every event."""
    console.print(ensure_operator(Settings()), highlight=False)


@keys_app.command("enroll")
def enroll(
    service: str = typer.Argument(
        ..., help="runner, sandbox-manager, cli, or judge-<judge id> (a judge's own key)."
    ),
    out: Path = typer.Option(
        None, "--out", help="Also copy the seed and enrollment here (for another machine's home)."
    ),
) -> None:
    """Enroll a service's signing key with the operator key of this home (run where the
    operator seed is); a service started with this home signs with it from then on."""
    settings = Settings()
    if role_of(service) is None:
        err_console.print(f"[red]error:[/red] {service!r} publishes no events; nothing to enroll")
        raise typer.Exit(2)
    ensure_operator(settings)
    signer = signer_for(settings, service)
    assert signer is not None  # the operator seed is here: enrollment cannot fail
    console.print(f"{service}: {signer.public_key}", highlight=False)
    if out is not None:
        out.mkdir(mode=0o700, parents=True, exist_ok=True)
        for suffix in (".seed", ".enrollment"):
            src = settings.home / "keys" / f"{service}{suffix}"
            shutil.copy2(src, out / src.name)
            (out / src.name).chmod(0o600)
        console.print(f"copied to {out} (put it in that machine's <home>/keys/)")
