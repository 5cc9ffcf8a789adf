"""Settings from the environment (`ASSAY_*`), validated once at the edge.

The core's own settings only: each service keeps its own in its package, a subclass of
`Settings` read through `Settings.of` (``assay_runner.settings.RunnerSettings``, ...), and
the CLI its own (``assay_cli.settings``). Their variables keep the one ``ASSAY_`` prefix.
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Literal, Self

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

UPLOAD_BUCKET_MAX_BYTES = 10 * 2**30
"""The default room of one campaign's upload bucket (`Settings.upload_bucket_max_bytes`)."""

__all__ = ["UPLOAD_BUCKET_MAX_BYTES", "Settings", "get_settings"]


class Settings(BaseSettings):
    """Where the bus and the blob store are, and how the log is kept.

    A value for a service's own setting given here (``Settings(runner_concurrency=4)``) is
    carried along unread, and validated by the service's class when it reads it (`of`):
    one object configures a stack of services, each reading its part."""

    model_config = SettingsConfigDict(env_prefix="ASSAY_", extra="allow")

    home: Path = Path(".assay")
    """State directory of the embedded stack (NATS data, local blobs, snapshots)."""
    nats_url: str = "nats://127.0.0.1:4222"
    """NATS server URL; a cluster may be given as a comma-separated list of its nodes."""
    nats_user: str | None = None
    nats_password: str | None = None
    controls_secret: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$", repr=False)
    """The deployment's controls secret (64 hex digits), for a runner or an aggregator
    whose home does not hold the submitting home's ``keys/controls.secret`` (a container):
    it opens the sealed control declarations. Never give it to a judge."""
    nats_tls_ca: Path | None = None
    """CA bundle; setting it switches the client to TLS."""
    nats_auth: bool = False
    """`assay up` serves per-service users with least-privilege permissions (`--auth`)."""
    nats_tls_cert: Path | None = None
    """Server certificate of the embedded nats-server (with `nats_tls_key`: TLS on)."""
    nats_tls_key: Path | None = None
    """Private key of `nats_tls_cert`."""
    stream: str = "ASSAY"
    subject_prefix: str = Field(default="assay", pattern=r"^[A-Za-z0-9_-]+$")
    """First token of every subject (separate prefixes let tests share one server)."""
    stream_replicas: int = Field(default=1, ge=1, le=5)
    duplicate_window_s: float = Field(default=600.0, gt=0)
    """JetStream dedupe window for Nats-Msg-Id (consumers stay idempotent beyond it)."""
    max_deliver: int = Field(default=5, ge=1)
    ack_wait_s: float = Field(default=300.0, gt=0)
    """How long a consumer may work on one message before it is redelivered."""

    store: Literal["local", "s3"] = "local"
    store_dir: Path | None = None
    """Local blob directory; defaults to <home>/blobs."""
    s3_endpoint: str = "127.0.0.1:9000"
    s3_access_key: str = "minioadmin"
    s3_secret_key: str = "minioadmin"
    s3_bucket: str = "assay-blobs"
    s3_secure: bool = False
    s3_region: str = "us-east-1"
    s3_admin: Literal["iam", "minio"] = "iam"
    """How `assay keys s3-publisher` creates a key: AWS IAM (moto too) or MinIO's admin API."""
    s3_iam_endpoint: str | None = None
    """IAM endpoint URL; default: AWS's own for an amazonaws.com S3 endpoint, else the S3
    endpoint itself (moto serves both)."""

    instance: str = Field(default_factory=lambda: socket.gethostname().split(".")[0] or "local")
    """Stable name of this service instance (sandboxes are owned by one instance)."""
    state_dir: Path = Path("/var/tmp/assay/state")
    """Per-instance state (sandbox workspaces, snapshots). Sandboxes run as unprivileged
    uids that must traverse every parent folder, so it lives outside private homes."""

    operator_key: str | None = None
    """Public nkeys key (``O…``) that roots the trust list of signed events; default: the
    operator key in `<home>/keys/` when there is one."""
    max_attachment_bytes: int = Field(default=200_000_000, ge=0)
    """Largest attachment a task may carry."""
    upload_bucket_max_bytes: int = Field(default=UPLOAD_BUCKET_MAX_BYTES, ge=0)
    """Most bytes one campaign's upload bucket may hold (0: no limit), made so when the
    bucket is: an outside publisher fills no more of JetStream's disk than this, and the
    event log keeps its room. A put past it is refused; nothing stored is dropped."""

    @classmethod
    def of(cls, settings: Settings) -> Self:
        """`settings` as this class (a service's): every value they carry kept, the
        fields of this class they lack read from the environment, all validated."""
        if isinstance(settings, cls):
            return settings
        return cls(**settings.model_dump())

    @field_validator("controls_secret", mode="before")
    @classmethod
    def _unset_when_empty(cls, value: object) -> object:
        # Compose passes `${ASSAY_CONTROLS_SECRET:-}` through as "" when it is not given.
        return None if value == "" else value

    @property
    def instance_state(self) -> Path:
        """State directory of this instance."""
        return self.state_dir / self.instance

    @property
    def blob_dir(self) -> Path:
        """Directory of the local blob store."""
        return self.store_dir or self.home / "blobs"


def get_settings(**overrides: object) -> Settings:
    """Settings from the environment, with explicit overrides on top."""
    return Settings(**overrides)  # type: ignore[arg-type]
