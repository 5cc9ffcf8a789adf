"""The images: they build (each cached by its input hash), each service image holds only
its own packages, and the services really run from the images the compose file names.

Marked ``docker``: they need dockerd and FAIL without it (deselect with -m 'not docker').
Containers use host networking on loopback ports only; the first build takes several
minutes plus the dependency download, a cached one a few seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import urllib.request
import uuid
from collections.abc import Iterator

import nats
import pytest
from testcontainers.core.config import testcontainers_config
from testcontainers.core.container import DockerContainer

from assay.bus import Bus
from assay.config import Settings
from assay.embedded import find_free_ports

from ._files import COMPOSE, NATS_CONF, image_repository, load_compose, served_service
from .conftest import FOREIGN, build_images, container_logs, docker

pytestmark = [pytest.mark.docker, pytest.mark.timeout(900)]

# No image can be pulled here, so testcontainers' Ryuk reaper (itself an image) stays off;
# every container is removed by its own context manager instead.
testcontainers_config.ryuk_disabled = True


WORKSPACE = {"assay-schemas", "assay", "assay-cli", *FOREIGN}


@pytest.fixture(scope="session")
def assay_image(images: dict[str, str]) -> str:
    """The full image: every service, the CLI, nats-server."""
    return images["assay"]


@contextlib.contextmanager
def _container(
    image: str,
    *args: str,
    env: dict[str, str] | None = None,
    volumes: tuple[tuple[str, str], ...] = (),
) -> Iterator[str]:
    """A container of a locally built image, driven by testcontainers, on the host network
    (tests reach it on loopback ports only); removed afterwards."""
    name = f"assay-deploy-test-{uuid.uuid4().hex[:10]}"
    container = DockerContainer(image).with_name(name).with_kwargs(network_mode="host")
    if args:  # otherwise the image's own CMD
        container = container.with_command(list(args))
    for key, value in (env or {}).items():
        container = container.with_env(key, value)
    for host, inside in volumes:
        container = container.with_volume_mapping(host, inside, "ro")
    container.start()
    try:
        yield name
    finally:
        container.stop()


def test_image_runs_the_cli_without_network(assay_image: str) -> None:
    out = docker("run", "--rm", "--network", "none", assay_image, "assay", "--help")
    assert out.returncode == 0, out.stderr
    assert "serve" in out.stdout
    # Without a command on PATH, arguments go to `assay serve` (the entry point).
    out = docker("run", "--rm", "--network", "none", assay_image, "runner", "--help")
    assert out.returncode == 0, out.stderr
    assert "assay serve" in out.stdout
    out = docker("run", "--rm", "--network", "none", assay_image, "nats-server", "--version")
    assert out.returncode == 0 and "v2." in out.stdout


_LIST_DISTRIBUTIONS = "import importlib.metadata as m, json; print(json.dumps([d.metadata['Name'] for d in m.distributions()]))"


@pytest.mark.parametrize("image", sorted(FOREIGN))
def test_service_image_holds_only_its_packages(images: dict[str, str], image: str) -> None:
    config = json.loads(
        docker("image", "inspect", "--format", "{{json .Config}}", images[image]).stdout
    )
    assert config["Cmd"] == [image], "the service's own console script is the default"
    out = docker(
        "run", "--rm", "--network", "none", images[image], "python", "-c", _LIST_DISTRIBUTIONS
    )
    assert out.returncode == 0, out.stderr
    installed = {name.lower().replace("_", "-") for name in json.loads(out.stdout)}
    assert installed & WORKSPACE == {"assay-schemas", "assay", image}
    assert not installed & FOREIGN[image]


def test_images_are_cached_by_input_hash(images: dict[str, str]) -> None:
    started = time.monotonic()
    out = build_images()
    assert out.returncode == 0, out.stderr
    if set(out.stdout.split()) == set(images.values()):  # inputs unchanged since the fixture
        assert out.stderr.count("cached") == len(images)
        assert time.monotonic() - started < 30


async def _wait_for_consumer(url: str, stream: str, durable: str, timeout: float) -> None:
    nc = await nats.connect(url)
    try:
        js = nc.jetstream()
        deadline = time.monotonic() + timeout
        while True:
            try:
                await js.consumer_info(stream, durable)
                return
            except nats.js.errors.NotFoundError:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.5)
    finally:
        await nc.close()


def _bus_env(settings: Settings) -> dict[str, str]:
    return {
        "ASSAY_NATS_URL": settings.nats_url,
        "ASSAY_STREAM": settings.stream,
        "ASSAY_SUBJECT_PREFIX": settings.subject_prefix,
        "ASSAY_INSTANCE": "deploy-test",
    }


async def test_sandbox_manager_container_joins_the_bus(
    images: dict[str, str], settings: Settings
) -> None:
    """Its own image, its own entry point (the image's CMD)."""
    env = _bus_env(settings)
    with _container(images["assay-sandbox-manager"], env=env) as name:
        try:
            await _wait_for_consumer(settings.nats_url, settings.stream, "sandbox-manager-runs", 60)
            await _wait_for_consumer(
                settings.nats_url, settings.stream, "sandbox-manager-deploy-test-finished", 10
            )
        except Exception:
            pytest.fail(f"sandbox-manager never consumed: {container_logs(name)}")
        stopped = docker("stop", "--time", "20", name, timeout=60)
        assert stopped.returncode == 0
        state = docker("inspect", "--format", "{{.State.ExitCode}}", name)
        assert state.stdout.strip() == "0", container_logs(name)


# A durable each compose service registers once it consumes.
DURABLES = {
    "runner": "runner-runs",
    "rules": "judge-rules",
    "judge-example": "judge-judge-example",
    "aggregator": "aggregator",
}


@pytest.mark.parametrize("service", sorted(DURABLES))
async def test_compose_service_runs_from_its_image(
    images: dict[str, str], settings: Settings, service: str
) -> None:
    """The compose file's command for `service`, in the image it names, joins the bus."""
    svc = load_compose()["services"][service]
    served_service(svc["command"])  # a real service command
    env = _bus_env(settings)
    volumes: tuple[tuple[str, str], ...] = ()
    if "ASSAY_JUDGE_SPEC" in svc["environment"]:
        env["ASSAY_JUDGE_SPEC"] = svc["environment"]["ASSAY_JUDGE_SPEC"]
        source, target = svc["volumes"][0].split(":")[:2]
        volumes = ((str((COMPOSE.parent / source).resolve()), target),)
    image = images[image_repository(svc["image"])]
    with _container(image, *svc["command"], env=env, volumes=volumes) as name:
        try:
            await _wait_for_consumer(settings.nats_url, settings.stream, DURABLES[service], 60)
        except Exception:
            pytest.fail(f"{service} never consumed: {container_logs(name)}")
        stopped = docker("stop", "--time", "20", name, timeout=60)
        assert stopped.returncode == 0
        state = docker("inspect", "--format", "{{.State.ExitCode}}", name)
        assert state.stdout.strip() == "0", container_logs(name)


@contextlib.contextmanager
def _nats_node(
    image: str, node: int, client: int, monitor: int, route: int, routes: str
) -> Iterator[str]:
    """One node running the compose config; ports and routes moved to loopback ports."""
    with _container(
        image,
        "nats-server",
        "-c",
        "/etc/nats/nats.conf",
        "-a",
        "127.0.0.1",
        "-p",
        str(client),
        "-m",
        str(monitor),
        "--cluster",
        f"nats://127.0.0.1:{route}",
        "--routes",
        routes,
        env={"NATS_SERVER_NAME": f"nats-{node}"},
        volumes=((str(NATS_CONF), "/etc/nats/nats.conf"),),
    ) as name:
        yield name


def _own_lines(name: str) -> str:
    """A node's log less the healthcheck's repeats (what says why it is not up)."""
    out = docker("logs", name)
    lines = (out.stdout + out.stderr).splitlines()
    return "\n".join(line for line in lines if "Healthcheck failed" not in line)[-2000:]


def _wait_healthy(names: list[str], monitor: int, timeout: float = 60) -> None:
    """Until the node's /healthz says JetStream is up (it needs its peers for that)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{monitor}/healthz", timeout=2):
                return
        except OSError:
            if time.monotonic() > deadline:
                logs = "\n".join(f"--- {name}:\n{_own_lines(name)}" for name in names)
                pytest.fail(f"a node on monitor port {monitor} never healthy:\n{logs}")
            time.sleep(0.5)


async def test_nats_cluster_of_three_from_the_image(assay_image: str) -> None:
    """The compose NATS config on loopback ports: three nodes hold one R3 stream. Its nine
    ports are picked below the ephemeral range: the full suite once met a node that never
    found a leader, with nothing but the healthcheck in its log (2026-12-05)."""
    ports = find_free_ports(9)
    client, monitor, route = ports[0:3], ports[3:6], ports[6:9]
    routes = ",".join(f"nats://127.0.0.1:{p}" for p in route)
    with contextlib.ExitStack() as stack:
        names = [
            stack.enter_context(
                _nats_node(assay_image, i + 1, client[i], monitor[i], route[i], routes)
            )
            for i in range(3)
        ]
        for port in monitor:
            _wait_healthy(names, port)
        settings = Settings(
            nats_url=f"nats://127.0.0.1:{client[0]}",
            stream="DEPLOYR3",
            subject_prefix="deployr3",
            stream_replicas=3,
        )
        bus = Bus(settings, service="deploy-test")
        await bus.start()
        try:
            info = await bus.js.stream_info("DEPLOYR3")
            assert info.config.num_replicas == 3
            assert info.cluster is not None and info.cluster.name == "assay"
            assert info.cluster.leader
            assert len(info.cluster.replicas or []) == 2
        finally:
            await bus.stop()
