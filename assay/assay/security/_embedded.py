"""The embedded stack with per-service users: passwords, config file, env lines."""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from assay.config import Settings
from assay.contract import service_contracts
from assay_schemas import BusError

from .nats_config import ServerTls, password_env_name, render_config
from .permissions import Permissions, permission_map

__all__ = [
    "EmbeddedAuth",
    "load_passwords",
    "prepare_embedded",
    "service_user",
    "write_env_files",
]


def service_user(service: str) -> str:
    """The NATS user the in-process service `service` (`assay up --all --auth`) connects as:
    its contract's role, the same least-privilege user the split stack's service uses."""
    contract = service_contracts().get(service)
    if contract is None:
        raise BusError(f"no NATS user for the service {service!r} in the embedded stack")
    return contract.role


def _write_private(path: Path, text: str) -> None:
    """Write a file only its owner can read (it holds passwords)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    path.chmod(0o600)  # an older file may have been created with wider rights


def load_passwords(
    users: list[str], path: Path, env: Mapping[str, str] | None = None
) -> dict[str, str]:
    """Each user's password: `ASSAY_NATS_PASSWORD_<USER>` if set, else the one stored
    in `path` by an earlier start, else a new random one (stored, mode 0600)."""
    env = os.environ if env is None else env
    stored: dict[str, str] = {}
    if path.exists():
        stored = {str(k): str(v) for k, v in json.loads(path.read_text()).items()}
    out: dict[str, str] = {}
    for user in users:
        out[user] = (
            env.get(password_env_name(user)) or stored.get(user) or secrets.token_urlsafe(24)
        )
    if out != {u: stored.get(u) for u in users}:
        _write_private(path, json.dumps({**stored, **out}, indent=2, sort_keys=True) + "\n")
    return out


@dataclass(frozen=True, kw_only=True)
class EmbeddedAuth:
    """What `assay up --auth` produced: the server config and every user's password."""

    config_file: Path
    users: dict[str, Permissions]
    passwords: dict[str, str]

    def env_lines(self, user: str, settings: Settings) -> list[str]:
        """The `ASSAY_*` lines that make a service connect as `user`."""
        env = {
            "ASSAY_NATS_URL": settings.nats_url,
            "ASSAY_NATS_USER": user,
            "ASSAY_NATS_PASSWORD": self.passwords[user],
            "ASSAY_NATS_TLS_CA": settings.nats_tls_ca,
        }
        return [f"{name}={value}" for name, value in env.items() if value is not None]

    def settings_for(self, user: str, settings: Settings) -> Settings:
        """`settings` connecting as `user`."""
        return settings.model_copy(
            update={"nats_user": user, "nats_password": self.passwords[user]}
        )

    def service_settings(self, service: str, settings: Settings) -> Settings:
        """`settings` of the in-process service `service`, connecting as its own user."""
        return self.settings_for(service_user(service), settings)


def prepare_embedded(
    settings: Settings, *, auth: bool = True, publisher_campaigns: tuple[str, ...] = ()
) -> EmbeddedAuth | None:
    """Write `<home>/nats/server.conf` (and the password file beside it) for `settings`.

    With `auth`, one user per role (see `permission_map`), the sandbox-manager narrowed
    to this machine's instance name. TLS is switched on when `ASSAY_NATS_TLS_CERT` and
    `ASSAY_NATS_TLS_KEY` are set. None when neither applies (a plain server).
    """
    folder = settings.home / "nats"
    has_tls = settings.nats_tls_cert is not None and settings.nats_tls_key is not None
    if not auth and not has_tls:
        return None
    users: dict[str, Permissions] = {}
    passwords: dict[str, str] = {}
    if auth:
        users = permission_map(
            settings, publisher_campaigns=publisher_campaigns, instances=(settings.instance,)
        )
        passwords = load_passwords(list(users), folder / "passwords.json")
    tls = None
    if settings.nats_tls_cert is not None and settings.nats_tls_key is not None:
        tls = ServerTls(cert_file=settings.nats_tls_cert, key_file=settings.nats_tls_key)
    config = folder / "server.conf"
    _write_private(config, render_config(users, passwords, tls=tls))
    return EmbeddedAuth(config_file=config, users=users, passwords=passwords)


def write_env_files(auth: EmbeddedAuth, settings: Settings) -> list[Path]:
    """`<home>/nats/<user>.env` for every user (mode 0600), ready for `set -a; . FILE`."""
    out = []
    for user in auth.users:
        path = settings.home / "nats" / f"{user}.env"
        _write_private(path, "\n".join(auth.env_lines(user, settings)) + "\n")
        out.append(path)
    return out
