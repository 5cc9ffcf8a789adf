"""`assay keys`: the operator key, the enrolled signing keys of services and judges, and
the put-only S3 keys of outside publishers."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
from pathlib import Path

import typer

from assay.config import Settings
from assay.security.signing import ensure_operator, role_of, signer_for
from assay.store import create_publisher_key, open_store
from assay_schemas import ID_PATTERN, AssayError

from ._app import app, console, err_console, fail

keys_app = typer.Typer(
    help="Signing keys (every service signs its events with a key the operator enrolled) "
    "and outside publishers' put-only S3 keys.",
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
        ...,
        help="runner, sandbox-manager, cli, judge-<judge id> (a judge's own key), "
        "publisher-<campaign> (an outside system submitting tasks to that campaign), or "
        "reviewer-<name> (a person grading runs in `assay view --review`).",
    ),
    out: Path = typer.Option(
        None, "--out", help="Also copy the seed and enrollment here (for another machine's home)."
    ),
    home: Path = typer.Option(
        None,
        "--home",
        help="The home whose operator enrolls the key (default: ASSAY_HOME), "
        "e.g. a run directory whose log a reviewer grades.",
    ),
) -> None:
    """Enroll a service's signing key with the operator key of this home (run where the
    operator seed is); a service started with this home signs with it from then on."""
    settings = Settings() if home is None else Settings(home=home.resolve())
    identity = role_of(service)
    if identity is None:
        err_console.print(
            f"[red]error:[/red] {service!r} publishes no events; nothing to enroll (runner, "
            "sandbox-manager, cli, judge-<judge id>, publisher-<campaign> or reviewer-<name>)",
            soft_wrap=True,
        )
        raise typer.Exit(2)
    if identity[0] in ("judge", "publisher", "reviewer") and not re.match(ID_PATTERN, identity[1]):
        # The name becomes a key file name and the scope of what the key may sign.
        err_console.print(
            f"[red]error:[/red] {identity[1]!r} in {service!r} is not an id (letters, digits, "
            "'-' and '_', starting with a letter or digit)",
            soft_wrap=True,
        )
        raise typer.Exit(2)
    ensure_operator(settings)
    signer = signer_for(settings, service, enroll=True)
    assert signer is not None  # the operator seed is here: enrollment cannot fail
    console.print(f"{service}: {signer.public_key}", highlight=False)
    if out is not None:
        out.mkdir(mode=0o700, parents=True, exist_ok=True)
        for suffix in (".seed", ".enrollment"):
            src = settings.home / "keys" / f"{service}{suffix}"
            shutil.copy2(src, out / src.name)
            (out / src.name).chmod(0o600)
        console.print(f"copied to {out} (put it in that machine's <home>/keys/)")


@keys_app.command("s3-publisher")
def s3_publisher(
    campaign: str = typer.Option(
        ..., "--campaign", "-c", help="The campaign whose outside publisher gets the key."
    ),
    as_json: bool = typer.Option(
        False, "--json", help="Print the key, secret included, as one JSON object (scripts)."
    ),
) -> None:
    """Create, on the S3 store the settings name (ASSAY_S3_*, with the operator's key), a key
    that may only put new blobs under the store's sha256/ prefix (no read, list or delete,
    no other prefix or bucket); write it to <home>/keys/s3-publisher-<campaign>-<user>.json
    (mode 0600) for the outside system, and print where."""
    settings = Settings()
    if settings.store != "s3":
        err_console.print(
            "[red]error:[/red] the store is local (set ASSAY_STORE=s3 and ASSAY_S3_*); an "
            "embedded publisher uploads into its campaign's JetStream bucket "
            "(`assay up --auth --publisher CAMPAIGN`)"
        )
        raise typer.Exit(2)
    if not re.match(ID_PATTERN, campaign):
        raise typer.BadParameter(f"not a campaign id: {campaign!r}", param_hint="--campaign")
    try:
        open_store(settings)  # the bucket exists before anyone is told to write into it
        key = create_publisher_key(settings, campaign)
    except AssayError as e:
        raise fail(e) from e
    body = json.dumps({**dataclasses.asdict(key), "endpoint_url": key.endpoint_url})
    if as_json:
        print(body)
        return
    # The secret goes to a file only its owner reads, never to the terminal.
    path = settings.home / "keys" / f"s3-publisher-{campaign}-{key.user}.json"
    _write_private(path, body + "\n")
    console.print(
        f"S3 publisher key for campaign {campaign} (user {key.user}): it may only put new "
        "blobs, each as object <prefix><first 2 hex digits>/<sha256> with If-None-Match: *",
        highlight=False,
    )
    for label, value in (
        ("endpoint", key.endpoint_url),
        ("region", key.region),
        ("bucket", key.bucket),
        ("prefix", key.prefix),
        ("access key", key.access_key),
        ("secret key", f"in {path} (mode 0600; give the file to the publisher)"),
    ):
        console.print(f"  {label:<11}{value}", highlight=False, soft_wrap=True)


def _write_private(path: Path, text: str) -> None:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    path.chmod(0o600)
