"""The committed cluster configs are what the renderer writes, and nats-server accepts them."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from assay.embedded import nats_server_binary
from assay.security import password_env_name
from assay.security._deploy import deploy_configs

pytestmark = pytest.mark.timeout(30)

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "nats"


def test_committed_configs_are_up_to_date() -> None:
    for name, text in deploy_configs().items():
        committed = (DEPLOY / name).read_text() if (DEPLOY / name).exists() else None
        assert committed == text, (
            f"deploy/nats/{name} is stale: run `python -m assay.security deploy/nats`"
        )


def _check_config(config: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`nats-server -t`: the config checked, the server not started."""
    return subprocess.run(
        [str(nats_server_binary()), "-c", str(config), "-t"],
        env=env,
        capture_output=True,
        text=True,
        timeout=20,
    )


@pytest.mark.parametrize("name", ["cluster.conf", "cluster-tls.conf"])
def test_nats_server_accepts_the_config(name: str, tmp_path: Path) -> None:
    text = (DEPLOY / name).read_text()
    # Point the TLS files at real (throwaway) PEMs so `-t` can load them.
    if "tls {" in text:
        from .certs import make_pki

        pki = make_pki(tmp_path / "pki")
        text = (
            text.replace("/etc/nats/tls/tls.crt", str(pki.cert))
            .replace("/etc/nats/tls/tls.key", str(pki.key))
            .replace("/etc/nats/tls/ca.crt", str(pki.ca))
        )
    config = tmp_path / name
    config.write_text(text.replace('"/data"', f'"{tmp_path / "js"}"'))
    users = [line.split('"')[1] for line in text.splitlines() if line.strip().startswith("user:")]
    env = dict(os.environ, NATS_SERVER_NAME="nats-0")
    env.update({password_env_name(u): f"pw-{u}" for u in users})
    result = _check_config(config, env)
    assert result.returncode == 0, result.stdout + result.stderr
    # Without the passwords in the environment the server refuses to start.
    env.pop(password_env_name("runner"))
    result = _check_config(config, env)
    assert result.returncode != 0
