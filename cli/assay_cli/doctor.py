"""`assay doctor`: every prerequisite of this machine, each problem with its fix.

`assay run` runs the checks its campaign needs first and refuses a campaign that could only
end in infrastructure failures.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from assay.config import Settings
from assay.embedded import nats_server_binary
from assay_sandbox_manager.runtime import default_rootfs, recipe_hash, sandbox_cache
from assay_schemas import ConfigError

__all__ = ["Check", "DockerSeen", "checks_for", "docker_check", "print_checks", "run_checks"]

GIB = 1024**3
APT = "apt-get install -y --no-install-recommends"


@dataclass(frozen=True)
class Check:
    """One prerequisite: whether it holds, what was seen, and how to fix it when not."""

    name: str
    ok: bool
    detail: str
    fix: str = ""
    optional: bool = False
    """A warning only: the purpose can go on without it."""


def _sudo(command: str) -> str:
    return command if os.geteuid() == 0 else f"sudo {command}"


def _run(argv: list[str], timeout: float = 20.0) -> subprocess.CompletedProcess[str] | None:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return None


def check_bubblewrap() -> Check:
    """bwrap installed (the rlimits and the drop to the sandbox uid are the runtime's start
    helper, deploy/sandbox/spawn.c: nothing else from the host)."""
    if shutil.which("bwrap") is None:
        return Check("bubblewrap", False, "bwrap not on PATH", _sudo(f"{APT} bubblewrap"))
    return Check("bubblewrap", True, shutil.which("bwrap") or "")


def check_user_namespaces() -> Check:
    """bwrap can make the namespaces a sandbox needs, with its own /proc and /dev, as pid 1."""
    if shutil.which("bwrap") is None:
        return Check("user namespaces", False, "bwrap missing (see above)", "install bubblewrap")
    argv = [
        "bwrap",
        "--ro-bind",
        "/",
        "/",
        "--unshare-all",
        "--uid",
        "1000",
        "--as-pid-1",
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--",
        "true",
    ]
    done = _run(argv)
    if done is not None and done.returncode == 0:
        return Check("user namespaces", True, "bwrap --unshare-all with its own /proc works")
    why = (done.stderr.strip() if done is not None else "bwrap did not finish") or "failed"
    return Check(
        "user namespaces",
        False,
        why,
        _sudo("sysctl -w kernel.unprivileged_userns_clone=1 user.max_user_namespaces=15000")
        + " (in a container: run it with --privileged, or with --cap-add SYS_ADMIN"
        " --security-opt seccomp=unconfined --security-opt systempaths=unconfined so that"
        " unshare is allowed and /proc can be mounted)",
    )


def check_runtime() -> Check:
    """The sandbox rootfs of the current recipe is built."""
    try:
        root = default_rootfs()
    except OSError as e:
        return Check("sandbox runtime", False, f"recipe unreadable: {e}", "reinstall Assay")
    if (root / ".assay-rootfs-complete").is_file():
        return Check("sandbox runtime", True, f"{root} (recipe {recipe_hash()})")
    stale = sorted(
        p.name
        for p in sandbox_cache().glob("rootfs-*")
        if p.is_dir() and p.suffix != ".tmp" and ".tmp." not in p.name
    )
    seen = f"; cached: {', '.join(stale)} (other recipes)" if stale else ""
    fix = _sudo("make sandbox-rootfs") + " (a few minutes, once per recipe)"
    if shutil.which("cc") is None:
        # The build compiles the sandbox's resident (deploy/sandbox/resident.c) static.
        fix = _sudo("apt-get install -y gcc libc6-dev") + ", then " + fix
    return Check(
        "sandbox runtime", False, f"no rootfs for recipe {recipe_hash()} at {root}{seen}", fix
    )


@dataclass(frozen=True)
class DockerSeen:
    """What this machine shows of Docker: the client, the engine binary, the endpoint the
    client talks to, and whether an engine answered there."""

    client: str | None
    dockerd: str | None
    endpoint: str | None
    """`DOCKER_HOST`, else the current context's endpoint (unix:///var/run/docker.sock)."""
    version: str | None
    """The engine's version when it answered."""
    error: str = ""
    """What `docker info` said when no engine answered."""

    @property
    def remote(self) -> bool:
        """The client talks to an engine on another machine (tcp://, ssh://)."""
        return self.endpoint is not None and not self.endpoint.startswith(("unix://", "npipe://"))


def docker_seen() -> DockerSeen:
    """Look at the client, the engine binary and the endpoint; ask the engine once."""
    client, dockerd = shutil.which("docker"), shutil.which("dockerd")
    if client is None:
        return DockerSeen(None, dockerd, os.environ.get("DOCKER_HOST"), None)
    endpoint = os.environ.get("DOCKER_HOST")
    if not endpoint:
        done = _run(["docker", "context", "inspect", "--format", "{{.Endpoints.docker.Host}}"], 5)
        endpoint = done.stdout.strip() or None if done and done.returncode == 0 else None
    done = _run(["docker", "info", "--format", "{{.ServerVersion}}"])
    if done is not None and done.returncode == 0 and done.stdout.strip():
        return DockerSeen(client, dockerd, endpoint, done.stdout.strip())
    error = "docker info did not finish in 20s" if done is None else done.stderr.strip()
    return DockerSeen(client, dockerd, endpoint, None, error.splitlines()[-1] if error else "")


def docker_check(seen: DockerSeen, optional: bool) -> Check:
    """Which of the Docker cases this machine is in, and the fix of each."""
    install = _sudo(f"{APT} docker.io") + " (engine and client)"
    where = f" at {seen.endpoint}" if seen.endpoint else ""
    if seen.version is not None:
        kind = f"remote context{where}: sandboxes run on that machine" if seen.remote else "local"
        return Check("docker", True, f"engine {seen.version} answering ({kind})", optional=optional)
    if seen.remote:
        return Check(
            "docker",
            False,
            f"remote context{where}: its engine does not answer ({seen.error})",
            "start the engine on that machine, or `docker context use default` (or unset "
            "DOCKER_HOST) to use this one",
            optional,
        )
    if seen.client is None and seen.dockerd is None:
        return Check("docker", False, "no Docker: no client, no engine", install, optional)
    if seen.client is None:
        return Check(
            "docker",
            False,
            f"engine installed ({seen.dockerd}) but no docker client on PATH",
            _sudo(f"{APT} docker.io") + " (or put the docker client on PATH)",
            optional,
        )
    if seen.dockerd is None:
        return Check(
            "docker",
            False,
            f"client only ({seen.client}): no engine on this machine",
            f"{install}; or point the client at a remote engine (docker context / DOCKER_HOST)",
            optional,
        )
    return Check(
        "docker",
        False,
        f"engine installed but not answering{where} ({seen.error or 'no answer'})",
        _sudo("dockerd >/var/log/dockerd.log 2>&1 &") + " (or: systemctl start docker); "
        "permission denied: add yourself to the docker group",
        optional,
    )


def check_docker(optional: bool) -> Check:
    """A Docker engine answers; else which case this machine is in."""
    return docker_check(docker_seen(), optional)


def check_nats_server() -> Check:
    """The pinned nats-server binary is installed."""
    try:
        return Check("nats-server", True, str(nats_server_binary()))
    except ConfigError as e:
        return Check("nats-server", False, str(e), "make install")


def check_ports(port: int = 4222) -> Check:
    """Loopback ports can be bound; the default NATS port is free for `assay up`."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
    except OSError as e:
        return Check("free ports", False, f"cannot bind on 127.0.0.1: {e}", "enable loopback")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.2)
        taken = s.connect_ex(("127.0.0.1", port)) == 0
    if taken:
        return Check(
            "free ports",
            False,
            f"port {port} is taken (only `assay up` uses it)",
            f"stop what listens on {port}, or set ASSAY_NATS_URL=nats://127.0.0.1:<port>",
            True,
        )
    return Check("free ports", True, f"loopback binds; {port} free")


def check_disk(path: Path, need_gib: float, what: str) -> Check:
    """Enough free space where `what` is written."""
    path = path.resolve()
    existing = next((p for p in (path, *path.parents) if p.exists()), Path("/"))
    free = shutil.disk_usage(existing).free
    ok = free >= need_gib * GIB
    detail = f"{free / GIB:.1f} GiB free at {existing} ({what} needs {need_gib:g} GiB)"
    return Check(f"disk ({what})", ok, detail, "" if ok else f"free space under {existing}")


def check_cgroups() -> Check:
    """The cgroup v2 controllers Docker's limits use (memory, pids, cpu): a warning only,
    since Docker may still enforce limits through cgroup v1 or its own parent group."""
    optional = True
    controllers = Path("/sys/fs/cgroup/cgroup.controllers")
    have = set(controllers.read_text().split()) if controllers.is_file() else set()
    missing = sorted({"memory", "pids", "cpu"} - have)
    if not missing:
        return Check("cgroup controllers", True, " ".join(sorted(have)), optional=optional)
    return Check(
        "cgroup controllers",
        False,
        f"missing: {', '.join(missing)} (Docker sandboxes' limits)",
        "boot with cgroup v2 (systemd.unified_cgroup_hierarchy=1), or use the bubblewrap backend",
        optional,
    )


def checks_for(purpose: str, backend: str = "bubblewrap") -> list[Callable[[], Check]]:
    """The checks a purpose needs: `run` (a campaign on `backend`) or `all`."""
    home = Settings().home
    checks: list[Callable[[], Check]] = [check_nats_server, lambda: check_disk(home, 1, "runs")]
    if purpose == "all" or backend == "bubblewrap":
        checks += [check_bubblewrap, check_user_namespaces, check_runtime]
    if purpose == "all" or backend == "docker":
        checks += [lambda: check_docker(optional=purpose == "all")]
        checks += [check_cgroups]
    if purpose == "all":
        checks += [check_ports, lambda: check_disk(sandbox_cache(), 3, "sandbox runtime")]
    return checks


def run_checks(checks: Iterable[Callable[[], Check]]) -> list[Check]:
    """Run checks in order."""
    return [check() for check in checks]


def print_checks(results: list[Check], console: Console, *, only_problems: bool = False) -> None:
    """One line per check; a problem's fix under it."""
    for c in results:
        if c.ok and only_problems:
            continue
        mark = (
            "[green]ok[/green]  "
            if c.ok
            else ("[yellow]warn[/yellow]" if c.optional else "[red]FAIL[/red]")
        )
        console.print(f"{mark} {c.name}: {c.detail}", highlight=False)
        if not c.ok and c.fix:
            console.print(f"       fix: [bold]{c.fix}[/bold]", highlight=False)
