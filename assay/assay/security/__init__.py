"""Least-privilege NATS users per service, the nats-server config that grants them, TLS."""

from ._embedded import (
    EmbeddedAuth,
    load_passwords,
    prepare_embedded,
    write_env_files,
)
from .nats_config import ClusterConfig, EnvRef, ServerTls, password_env_name, render_config
from .permissions import (
    ROLES,
    Permissions,
    Role,
    permission_map,
    publisher_user,
    role_permissions,
)

__all__ = [
    "ROLES",
    "ClusterConfig",
    "EmbeddedAuth",
    "EnvRef",
    "Permissions",
    "Role",
    "ServerTls",
    "load_passwords",
    "password_env_name",
    "permission_map",
    "prepare_embedded",
    "publisher_user",
    "render_config",
    "role_permissions",
    "write_env_files",
]
