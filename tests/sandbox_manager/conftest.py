"""Fixtures: the runtime (built and cached on first use) and one backend per implementation.

Every behavioural test takes the parametrized ``backend`` fixture, so the same test runs
against bubblewrap and Docker. Docker tests are marked ``docker`` and FAIL (not skip)
when dockerd is unreachable: deselect them with ``-m 'not docker'`` on purpose instead.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from assay_sandbox_manager.backends import (
    BubblewrapBackend,
    DockerBackend,
    SandboxBackend,
    SandboxSpec,
)
from assay_sandbox_manager.runtime import ensure_image, ensure_rootfs


@pytest.fixture(scope="session")
def host_dirs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """State/seal-copy root; pytest's 0700 tmp dirs on purpose (bwrap mounts by fd)."""
    return tmp_path_factory.mktemp("sandboxes")


@pytest.fixture(scope="session")
def rootfs() -> Path:
    """The runtime rootfs (a few minutes the first time, then cached)."""
    return ensure_rootfs()


@pytest.fixture(scope="session")
def docker_image() -> str:
    """The runtime imported as a Docker image; fails loudly without dockerd."""
    import docker

    try:
        docker.from_env(timeout=10).ping()
    except Exception as e:
        pytest.fail(f"docker tests need a running dockerd (or deselect -m 'not docker'): {e}")
    return ensure_image()


@pytest.fixture(scope="session")
def bubblewrap_backend(host_dirs: Path, rootfs: Path) -> Iterator[BubblewrapBackend]:
    """The bubblewrap backend over a test state dir."""
    be = BubblewrapBackend(host_dirs / "bw-state", host_dirs / "seals", rootfs=rootfs)
    yield be
    _drop_mount_root(be)


@pytest.fixture(scope="session")
def docker_backend(host_dirs: Path, docker_image: str) -> Iterator[DockerBackend]:
    """The Docker backend over a test state dir."""
    be = DockerBackend(host_dirs / "docker-state", host_dirs / "seals")
    yield be
    _drop_mount_root(be)


def _drop_mount_root(be: BubblewrapBackend | DockerBackend) -> None:
    """Destroy leftovers, which also removes the session's mount root."""
    for sb in be.list_live():
        be.destroy(sb.sandbox_id)
    assert not be.dirs.mount_root.exists()


@pytest.fixture(params=["bubblewrap", pytest.param("docker", marks=pytest.mark.docker)])
def backend(request: pytest.FixtureRequest) -> SandboxBackend:
    """Each backend in turn."""
    be: SandboxBackend = request.getfixturevalue(f"{request.param}_backend")
    return be


@pytest.fixture
def spec(backend: SandboxBackend, request: pytest.FixtureRequest) -> SandboxSpec:
    """Small limits so that the containment tests are quick."""
    image = request.getfixturevalue("docker_image") if backend.name == "docker" else "unused"
    return SandboxSpec(
        backend="docker" if backend.name == "docker" else "bubblewrap",
        cpu_seconds=30,
        memory_mb=768,
        max_processes=64,
        file_size_mb=32,
        disk_mb=64,
        exec_timeout_s=30,
        output_cap_bytes=4096,
        image=image,
    )


@pytest.fixture
def make_sandbox(backend: SandboxBackend, spec: SandboxSpec) -> Iterator[object]:
    """Factory creating sandboxes that are destroyed after the test."""
    made: list[str] = []

    def make(**labels: str) -> str:
        sid = f"t-{uuid.uuid4().hex[:12]}"
        backend.create(spec, sid, {"assay.campaign_id": "c1", "assay.run_id": sid, **labels})
        made.append(sid)
        return sid

    yield make
    live = {s.sandbox_id for s in backend.list_live()}
    for sid in made:
        if sid in live:
            backend.destroy(sid)


@pytest.fixture
def sandbox(make_sandbox: object) -> str:
    """One fresh sandbox id."""
    assert callable(make_sandbox)
    sid: str = make_sandbox()
    return sid
