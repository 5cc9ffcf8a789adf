"""Docker backend (production): one long-lived container per sandbox, commands through
its resident process (one `docker exec`, started on first use, see _resident.py).

The container has no network, a read-only root (the imported runtime image), no
capabilities, no-new-privileges, uid 1000, cgroup memory/CPU/pids limits. /workspace and
/tmp are binds of the same per-sandbox host tmpfs the bubblewrap backend uses, so the
disk quota, file access and the copies for a seal are host-side and identical on both backends. A
program agent's gateway folder, runtime extension and bundle are bound read-only as on bubblewrap
(see _mounts.py): the resident forwards the container's own loopback to the gateway socket.
The resident is the rootfs's static program: an image imported from the rootfs has it, and
where the host has the current rootfs its copy is bound over any image's (see _resident_bind).
"""

from __future__ import annotations

import contextlib
import logging
import socket
from collections.abc import Mapping
from pathlib import Path

import docker
import docker.errors
from docker.types import Ulimit

from ..extension import EXTENSION_ENV, EXTENSION_MOUNT
from ..runtime import default_rootfs
from ._bubblewrap import SANDBOX_ENV
from ._errors import SandboxBackendUnavailable, SandboxError, SandboxNotFound
from ._hostdirs import HostDirs, SandboxMeta, WorkspaceFiles, check_sandbox_id
from ._models import SandboxInfo, SandboxSpec
from ._mounts import GATEWAY_MOUNT, gateway_folder, opt_binds
from ._resident import (
    RESIDENT_ARGV,
    RESIDENT_BINARY,
    RESIDENT_DIR,
    Channel,
    DockerChannel,
    ResidentExec,
    install_scripts,
)

__all__ = ["DockerBackend"]

LABEL, ID_LABEL = "assay.sandbox", "assay.sandbox_id"
# Which service (state dir) owns a container: two services sharing one dockerd must not
# reconcile away each other's sandboxes.
STATE_LABEL = "assay.sandbox_state"
_INTERNAL = (LABEL, ID_LABEL, STATE_LABEL)
# PID 1 is the resident in its init mode: it reaps orphans and never forks (a shell loop
# forking `sleep` exited when a full process cap refused its fork, and the container with
# it). PID 1 is immune to `kill -9 -1`, which a timeout's sweep uses to kill every other
# process in the container; a lost resident's container is restarted instead (_on_lost).
_KEEPALIVE = [RESIDENT_BINARY, "--init"]
_CONFLICT = 409
"""dockerd's answer to removing a container whose removal is under way."""
_REMOVAL_WAIT_S = 30
"""How long a destroy waits for another's removal of the same container (dockerd's own
client timeout here)."""
log = logging.getLogger(__name__)


def _resident_bind(sandbox_id: str, image: str) -> dict[str, dict[str, str]]:
    """The host rootfs's resident, bound read-only at its place in any image: it speaks this
    service's protocol whatever the image holds. Without a host rootfs, only an image
    imported from one (assay-sandbox) has a resident."""
    host = default_rootfs() / RESIDENT_BINARY.lstrip("/")
    if host.is_file():
        return {str(host): {"bind": RESIDENT_BINARY, "mode": "ro"}}
    if image.split(":", 1)[0].endswith("assay-sandbox"):
        return {}
    raise SandboxBackendUnavailable(
        f"sandbox {sandbox_id}: image {image} has no resident and this host no rootfs "
        f"({host} missing) to bind one from: run deploy/sandbox/build-rootfs.sh"
    )


class DockerBackend(WorkspaceFiles, ResidentExec):
    """Sandboxes as locked-down containers of the assay-sandbox image."""

    name = "docker"

    def __init__(
        self, state_dir: Path, seal_dir: Path, client: docker.DockerClient | None = None
    ) -> None:
        try:
            self.client = client or docker.from_env(timeout=30)
            self.client.ping()
        except docker.errors.DockerException as e:
            raise SandboxBackendUnavailable(
                f"sandbox backend docker: dockerd unreachable: {e}"
            ) from e
        self.dirs = HostDirs(state_dir, seal_dir)
        self._init_residents()

    def create(self, spec: SandboxSpec, sandbox_id: str, labels: Mapping[str, str]) -> SandboxInfo:
        """Start the container; returns once it is running."""
        check_sandbox_id(sandbox_id)
        # The container runs as uid 1000 whoever the service is: both must be reachable.
        gateway = gateway_folder(sandbox_id, spec, foreign_uid=True)
        opt = opt_binds(sandbox_id, spec, foreign_uid=True)
        binds = {str(host): {"bind": inside, "mode": "ro"} for inside, host in opt.items()}
        if gateway is not None:
            binds[str(gateway)] = {"bind": GATEWAY_MOUNT, "mode": "ro"}
        binds.update(_resident_bind(sandbox_id, spec.image))
        meta = self.dirs.prepare(sandbox_id, "docker", spec, labels, 1000, 1000)
        scripts = install_scripts(self.dirs.mount(sandbox_id))
        mb = 1024 * 1024
        try:
            self.client.containers.run(
                spec.image,
                _KEEPALIVE,
                name=f"assay-sbx-{sandbox_id}",
                detach=True,
                labels={
                    **labels,
                    LABEL: "1",
                    ID_LABEL: sandbox_id,
                    STATE_LABEL: str(self.dirs.state_dir),
                },
                network_mode="none",
                hostname="sandbox",
                user="1000:1000",
                read_only=True,
                cap_drop=["ALL"],
                security_opt=["no-new-privileges"],
                mem_limit=spec.memory_mb * mb,
                memswap_limit=spec.memory_mb * mb,
                nano_cpus=int(spec.cpus * 1e9),
                # The resident, its gateway forwarder thread and the Python kernel are three
                # more tasks.
                pids_limit=spec.max_processes + 3,
                ulimits=[
                    Ulimit(name="cpu", soft=spec.cpu_seconds, hard=spec.cpu_seconds),
                    Ulimit(name="fsize", soft=spec.file_size_mb * mb, hard=spec.file_size_mb * mb),
                    Ulimit(name="core", soft=0, hard=0),
                ],
                volumes={
                    str(self.dirs.workspace(sandbox_id)): {"bind": "/workspace", "mode": "rw"},
                    str(self.dirs.tmp(sandbox_id)): {"bind": "/tmp", "mode": "rw"},
                    str(scripts): {"bind": RESIDENT_DIR, "mode": "ro"},
                    **binds,
                },
                tmpfs={"/dev/shm": "size=64m,mode=1777"},
                environment={**SANDBOX_ENV, **(EXTENSION_ENV if EXTENSION_MOUNT in opt else {})},
                working_dir="/workspace",
            )
        except docker.errors.DockerException as e:
            self.dirs.remove(sandbox_id)
            raise SandboxBackendUnavailable(
                f"sandbox {sandbox_id}: container start failed: {e}"
            ) from e
        return self.dirs.info(meta)

    def _start_resident(self, sandbox_id: str, meta: SandboxMeta) -> Channel:
        """Start the resident by one `docker exec` whose socket this backend keeps."""
        api = self.client.api
        cid = f"assay-sbx-{sandbox_id}"
        try:
            ex = api.exec_create(
                cid,
                RESIDENT_ARGV,
                stdin=True,
                stdout=True,
                stderr=False,
                workdir="/workspace",
                user="1000:1000",
            )
            sock = api.exec_start(ex["Id"], socket=True)
        except docker.errors.NotFound as e:
            raise SandboxNotFound(f"sandbox {sandbox_id}: no container {cid}") from e
        except docker.errors.DockerException as e:
            raise SandboxError(f"sandbox {sandbox_id}: resident start failed: {e}") from e
        # exec_start(socket=True) over the unix socket wraps the raw socket in a SocketIO.
        raw: socket.socket = sock._sock if hasattr(sock, "_sock") else sock  # type: ignore[assignment]
        return DockerChannel(raw)

    def _on_lost(self, sandbox_id: str) -> None:
        """A resident past its deadline: restart the container, killing every process in it.

        Its files stay (workspace and /tmp are the host's folders). A `docker exec` of
        `kill -9 -1` was the way once, but an exec needs a process slot in the container: with
        the cap full it may not start (a CI run saw the command's processes outlive the
        sweep), and they held the cap, so no resident could start again. Killing PID 1 ends
        its whole PID namespace without anything starting inside."""
        cid = f"assay-sbx-{sandbox_id}"
        try:
            self.client.api.restart(cid, timeout=0)
        except docker.errors.NotFound:
            return  # gone already: nothing of it runs
        except docker.errors.DockerException as e:
            # Destroy removes the container whatever it runs; the next command reports
            # the sandbox as unavailable if it does not come back.
            log.warning("sandbox %s: restart after a lost resident failed: %s", sandbox_id, e)

    def destroy(self, sandbox_id: str) -> None:
        """Remove the container (killing everything in it) and the host state."""
        check_sandbox_id(sandbox_id)
        self._drop_resident(sandbox_id)
        found = self.dirs.root(sandbox_id).exists()
        found = self._remove_container(sandbox_id) or found
        if not found:
            raise SandboxNotFound(f"sandbox {sandbox_id}: no container and no state")
        self.dirs.remove(sandbox_id)

    def _remove_container(self, sandbox_id: str) -> bool:
        """Remove the sandbox's container; False when there was none.

        Two teardowns of one sandbox can overlap (a destroy left running in its thread by a
        cancelled handler, and whoever tears down after it): dockerd answers the second
        409, "removal of container already in progress". That one waits for the first to
        end instead of failing; a container gone meanwhile (404) is a removal done."""
        cid = f"assay-sbx-{sandbox_id}"
        api = self.client.api
        try:
            api.remove_container(cid, force=True)
        except docker.errors.NotFound:
            return False
        except docker.errors.APIError as e:
            if e.status_code != _CONFLICT:
                raise
            with contextlib.suppress(docker.errors.NotFound):  # removed by now
                api.wait(cid, timeout=_REMOVAL_WAIT_S, condition="removed")
        return True

    def list_live(self) -> list[SandboxInfo]:
        """Containers labelled assay.sandbox=1 of this state dir, plus state folders without one."""
        seen: dict[str, SandboxInfo] = {}
        mine = [f"{LABEL}=1", f"{STATE_LABEL}={self.dirs.state_dir}"]
        for c in self.client.containers.list(all=True, filters={"label": mine}):
            sid = c.labels.get(ID_LABEL, "")
            labels = {k: v for k, v in c.labels.items() if k not in _INTERNAL}
            seen[sid] = SandboxInfo(sid, "docker", labels, self.dirs.workspace(sid))
        for sid in self.dirs.ids():
            seen.setdefault(sid, SandboxInfo(sid, "docker", {}, self.dirs.workspace(sid)))
        return [seen[k] for k in sorted(seen)]
