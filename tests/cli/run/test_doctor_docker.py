"""`assay doctor` says which Docker case this machine is in, each with its own fix."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from assay.embedded import find_free_port
from assay_cli.doctor import DockerSeen, check_docker, docker_check, docker_seen

SOCK = "unix:///var/run/docker.sock"


@pytest.mark.parametrize(
    ("seen", "detail", "fix"),
    [
        (DockerSeen(None, None, None, None), "no Docker: no client, no engine", "docker.io"),
        (
            DockerSeen("/usr/bin/docker", None, SOCK, None, "Cannot connect"),
            "client only (/usr/bin/docker): no engine",
            "docker.io",
        ),
        (
            DockerSeen("/usr/bin/docker", "/usr/sbin/dockerd", SOCK, None, "Cannot connect"),
            "engine installed but not answering at unix:///var/run/docker.sock (Cannot connect",
            "dockerd",
        ),
        (DockerSeen("/usr/bin/docker", "/usr/sbin/dockerd", SOCK, "27.1"), "(local)", ""),
        (
            DockerSeen("/usr/bin/docker", None, "ssh://me@gpu", "27.1"),
            "remote context at ssh://me@gpu",
            "",
        ),
        (
            DockerSeen("/usr/bin/docker", None, "tcp://10.0.0.2:2376", None, "refused"),
            "remote context at tcp://10.0.0.2:2376: its engine does not answer (refused)",
            "docker context use default",
        ),
    ],
)
def test_each_docker_case_is_named_with_its_fix(seen: DockerSeen, detail: str, fix: str) -> None:
    check = docker_check(seen, optional=False)
    assert check.ok == (seen.version is not None)
    assert detail in check.detail
    assert fix in check.fix


def test_no_client_on_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    check = check_docker(optional=True)
    assert not check.ok and check.detail == "no Docker: no client, no engine"


@pytest.mark.skipif(shutil.which("docker") is None, reason="needs the docker client")
def test_a_remote_context_that_does_not_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    host = f"tcp://127.0.0.1:{find_free_port()}"
    monkeypatch.setenv("DOCKER_HOST", host)
    seen = docker_seen()
    assert seen.remote and seen.version is None and seen.endpoint == host
    check = docker_check(seen, optional=True)
    assert f"remote context at {host}: its engine does not answer" in check.detail


@pytest.mark.skipif(shutil.which("docker") is None, reason="needs the docker client")
def test_this_machine_is_in_one_case() -> None:
    check = check_docker(optional=True)
    cases = ("answering (local)", "answering (remote", "client only", "not answering", "remote")
    assert any(case in check.detail for case in cases), check.detail
