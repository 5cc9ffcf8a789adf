"""deploy/compose.yaml's services as containers on the host network, for the deploy tests.

This host's Docker has no compose v2 plugin, and the compose file's bridge network (the
`nats` alias, service names as hosts) is what the tests must not send traffic to. So the
tests read each service from the compose file as written (image, command, environment,
volumes, user, privileges, restart policy, replicas) and run it with `docker run
--network host`, changing only what the network needs: the NATS URL (every node's
loopback port), the S3 endpoint (the test's), no trace exporter (no Jaeger image can be
pulled here), and ASSAY_INSTANCE per replica (on the host network every container has
the host's hostname, which compose would have made distinct). Where the host's Docker
cannot grant `privileged: true` (an engine inside a container), the sandbox-manager gets
what its bubblewrap sandboxes need instead (see `Deployment._privileges`).
"""

from __future__ import annotations

import contextlib
import re
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ._files import COMPOSE, load_compose

__all__ = ["Container", "Deployment", "NatsNode", "compose_service"]

_VAR = re.compile(r"\$\{(\w+)(?::-([^}]*))?\}")


def _interpolate(value: Any, env: Mapping[str, str]) -> str:
    """`${NAME:-default}` as compose reads it (from `env`, else the default)."""
    return _VAR.sub(lambda m: env.get(m[1], m[2] or ""), str(value))


@dataclass(frozen=True)
class ServiceSpec:
    """What compose.yaml says about one service, variables interpolated."""

    name: str
    image: str
    command: list[str]
    environment: dict[str, str]
    volumes: list[str]
    user: str | None
    privileged: bool
    restart: str
    replicas: int


def compose_service(name: str, env: Mapping[str, str]) -> ServiceSpec:
    """One service of deploy/compose.yaml (its `<<` merges resolved by the YAML loader)."""
    svc = load_compose()["services"][name]
    replicas = svc.get("deploy", {}).get("replicas", 1)
    volumes = []
    for volume in svc.get("volumes", []):
        source, rest = volume.split(":", 1)
        if source.startswith("."):
            source = str((COMPOSE.parent / source).resolve())
        elif not source.startswith("/"):
            continue  # a named volume: the container's own filesystem does here
        volumes.append(f"{source}:{rest}")
    return ServiceSpec(
        name=name,
        image=_interpolate(svc["image"], env),
        command=[_interpolate(c, env) for c in svc.get("command", [])],
        environment={k: _interpolate(v, env) for k, v in (svc.get("environment") or {}).items()},
        volumes=volumes,
        user=svc.get("user"),
        privileged=bool(svc.get("privileged", False)),
        restart=svc.get("restart", "no"),
        replicas=int(_interpolate(replicas, env)),
    )


def docker(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """The docker CLI, output captured."""
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)


@dataclass
class Container:
    """One running container of a compose service."""

    name: str
    service: str

    def logs(self, chars: int = 3000) -> str:
        """The container's last output."""
        out = docker("logs", self.name)
        return (out.stdout + out.stderr)[-chars:]

    def kill(self) -> None:
        """SIGKILL, as a machine losing power would (Docker counts it as a manual stop:
        the restart policy does not bring it back; `start` does)."""
        out = docker("kill", self.name)
        assert out.returncode == 0, out.stderr

    def start(self) -> None:
        """Start it again with the same settings (its instance name, its sandboxes)."""
        out = docker("start", self.name)
        assert out.returncode == 0, out.stderr


@dataclass(frozen=True)
class NatsNode:
    """A NATS node's loopback ports (its compose config, ports moved off the bridge)."""

    index: int
    client: int
    monitor: int
    route: int

    @property
    def url(self) -> str:
        """Client URL on loopback."""
        return f"nats://127.0.0.1:{self.client}"


@dataclass
class Deployment:
    """The compose services started so far; `close` removes them all."""

    images: Mapping[str, str]
    """Image repository → the tag built for the current inputs (never `latest`)."""
    overrides: dict[str, str]
    """Environment every Assay service gets on top of the compose file's."""
    prefix: str = field(default_factory=lambda: f"assay-compose-{uuid.uuid4().hex[:8]}")
    containers: list[Container] = field(default_factory=list)
    privileged: bool | None = None
    """Whether this host grants `--privileged` (probed on first need)."""

    def _privileges(self, spec: ServiceSpec) -> list[str]:
        """`--privileged`, or where this host cannot grant it (a Docker engine that itself
        runs in a container without every capability cannot give them all to a root
        process), what the sandboxes need: mounts (SYS_ADMIN), no seccomp filter on
        bubblewrap's user-namespace calls and an unmasked /proc."""
        if self.privileged is None:
            user = ["--user", spec.user] if spec.user else []
            probe = docker(
                "run",
                "--rm",
                "--network",
                "none",
                "--privileged",
                *user,
                self._image(spec.image),
                "true",
            )
            self.privileged = probe.returncode == 0
        if self.privileged:
            return ["--privileged"]
        return [
            "--cap-add",
            "SYS_ADMIN",  # the per-sandbox tmpfs disk quota is a mount
            "--security-opt",
            "seccomp=unconfined",
            "--security-opt",
            "apparmor=unconfined",
            # bwrap mounts a /proc for the sandbox: refused while Docker masks /proc paths.
            "--security-opt",
            "systempaths=unconfined",
        ]

    def _image(self, image: str) -> str:
        repository = image.rsplit("/", 1)[-1].split(":")[0]
        return self.images[repository]

    def run(
        self,
        spec: ServiceSpec,
        replica: int,
        *,
        extra: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
    ) -> Container:
        """Start one replica of a compose service on the host network."""
        name = f"{self.prefix}-{spec.name}-{replica}"
        args = ["run", "-d", "--name", name, "--network", "host", "--restart", spec.restart]
        if spec.privileged:
            args += self._privileges(spec)
        if spec.user:
            args += ["--user", spec.user]
        for volume in spec.volumes:
            args += ["-v", volume]
        for key, value in {**spec.environment, **(env or {})}.items():
            args += ["-e", f"{key}={value}"]
        args += [self._image(spec.image), *spec.command, *extra]
        out = docker(*args)
        assert out.returncode == 0, out.stderr
        container = Container(name, spec.name)
        self.containers.append(container)
        return container

    def service(self, name: str, env: Mapping[str, str]) -> list[Container]:
        """Every replica of an Assay service, with the network overrides."""
        spec = compose_service(name, env)
        environment = {
            k: v for k, v in spec.environment.items() if not k.startswith("OTEL_EXPORTER_OTLP")
        }
        spec = ServiceSpec(**{**spec.__dict__, "environment": environment})
        return [
            self.run(spec, i, env={**self.overrides, "ASSAY_INSTANCE": f"{name}-{i}"})
            for i in range(1, spec.replicas + 1)
        ]

    def nats(self, nodes: list[NatsNode], env: Mapping[str, str]) -> list[Container]:
        """The three NATS nodes from the compose file's config, on loopback ports."""
        routes = ",".join(f"nats://127.0.0.1:{n.route}" for n in nodes)
        out = []
        for node in nodes:
            spec = compose_service(f"nats-{node.index}", env)
            out.append(
                self.run(
                    spec,
                    1,
                    extra=[
                        "-a",
                        "127.0.0.1",
                        "-p",
                        str(node.client),
                        "-m",
                        str(node.monitor),
                        "--cluster",
                        f"nats://127.0.0.1:{node.route}",
                        "--routes",
                        routes,
                    ],
                )
            )
        return out

    def logs(self, chars: int = 2000) -> str:
        """Every container's last output, for a failure message."""
        return "\n".join(f"--- {c.name}\n{c.logs(chars)}" for c in self.containers)

    def close(self) -> None:
        """Remove every container (stopped or not)."""
        for c in self.containers:
            docker("rm", "-f", c.name, timeout=60)
        self.containers.clear()


def wait_healthy(node: NatsNode, timeout: float = 90) -> None:
    """Until the node's /healthz says JetStream is up (it needs its peers for that)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{node.monitor}/healthz", timeout=2):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


@contextlib.contextmanager
def deployment(images: Mapping[str, str], overrides: dict[str, str]) -> Iterator[Deployment]:
    """A deployment whose containers are all removed at exit."""
    d = Deployment(images, overrides)
    try:
        yield d
    finally:
        d.close()
