"""Readers for the deployment files under deploy/ (shared by the deploy tests)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

__all__ = [
    "COMPOSE",
    "DEPLOY",
    "K8S",
    "NATS_CONF",
    "k8s_objects",
    "load_compose",
    "nats_conf_routes",
    "serve_command_name",
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


def serve_command_name(command: list[str]) -> str:
    """The service an `assay serve NAME ...` command runs (asserts the command's shape)."""
    assert command[:2] == ["assay", "serve"], f"not an `assay serve` command: {command}"
    return command[2]
