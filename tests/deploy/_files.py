"""Readers for the deployment files under deploy/ (shared by the deploy tests)."""

from __future__ import annotations

import re
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import yaml

__all__ = [
    "COMPOSE",
    "DEPLOY",
    "K8S",
    "NATS_CONF",
    "image_repository",
    "judge_spec_path",
    "k8s_objects",
    "load_compose",
    "nats_conf_routes",
    "served_service",
    "service_image",
]

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
COMPOSE = DEPLOY / "compose.yaml"
K8S = DEPLOY / "k8s"
NATS_CONF = DEPLOY / "compose" / "nats" / "nats.conf"


def load_compose() -> dict[str, Any]:
    """The compose file as written (variables not interpolated)."""
    data = yaml.safe_load(COMPOSE.read_text())
    assert isinstance(data, dict)
    return data


def k8s_objects() -> list[dict[str, Any]]:
    """Every object of the kustomization's resources, in order."""
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    objects: list[dict[str, Any]] = []
    for resource in kustomization["resources"]:
        objects.extend(d for d in yaml.safe_load_all((K8S / resource).read_text()) if d)
    return objects


def nats_conf_routes(text: str) -> list[str]:
    """The route URLs of a nats-server config's `cluster { routes: [...] }` block."""
    block = re.search(r"routes\s*[:=]?\s*\[(.*?)\]", text, re.S)
    assert block, "no routes block"
    return re.findall(r"nats://[^\s,\]]+", block.group(1))


def service_image(service: str) -> str:
    """The image that runs `service`: named after the distribution that provides it."""
    (entry,) = entry_points(group="assay.services", name=service)
    assert entry.dist is not None
    return entry.dist.name


def served_service(command: list[str]) -> str:
    """The service a command runs: `assay serve NAME ...` or a service's own console script
    `assay-NAME`, which must belong to the distribution that provides NAME."""
    if command[:2] == ["assay", "serve"]:
        return command[2]
    script = command[0]
    assert script.startswith("assay-"), f"not a service command: {command}"
    name = script.removeprefix("assay-")
    (entry,) = entry_points(group="console_scripts", name=script)
    assert entry.dist is not None and entry.dist.name == service_image(name), command
    return name


def judge_spec_path(command: list[str], env: dict[str, str]) -> Path:
    """The judge spec a judge command reads: `--judge FILE`, else ASSAY_JUDGE_SPEC."""
    if "--judge" in command:
        return Path(command[command.index("--judge") + 1])
    return Path(env["ASSAY_JUDGE_SPEC"])


def image_repository(image: str) -> str:
    """An image reference without registry and tag: `${ASSAY_REGISTRY:-}assay-runner:${ASSAY_TAG:-latest}`
    and `registry.example.com/assay-runner` are both `assay-runner`."""
    image = re.sub(r"\$\{[^}]*\}", "", image)
    return image.rsplit("/", 1)[-1].split(":")[0]
