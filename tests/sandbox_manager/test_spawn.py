"""The bubblewrap backend's start helper (deploy/sandbox/spawn.c): it drops to the sandbox's
ids and sets its rlimits before anything of the sandbox runs, refuses what it cannot parse
without running anything, and is only run when no one else could have replaced it."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from assay_sandbox_manager.backends import SandboxBackendUnavailable
from assay_sandbox_manager.backends._bubblewrap import SPAWN, spawner

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="dropping to another uid needs root")


def _run(rootfs: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([spawner(rootfs), *args], capture_output=True, text=True, timeout=30)


@root_only
def test_the_program_runs_as_the_sandbox_ids_under_its_limits(rootfs: Path) -> None:
    script = "id -u; id -g; id -G; ulimit -n; ulimit -c; ulimit -t"
    proc = _run(
        rootfs,
        "--ids",
        "200999:200998",
        "--limit",
        "nofile=64",
        "--limit",
        "core=0",
        "--limit",
        "cpu=7",
        "--",
        "/bin/sh",
        "-c",
        script,
    )
    assert proc.returncode == 0, proc.stderr
    # No supplementary group of root's survives the drop.
    assert proc.stdout.split() == ["200999", "200998", "200998", "64", "0", "7"]


@root_only
def test_a_dropped_uid_cannot_take_root_back(rootfs: Path) -> None:
    # setpriv as the dropped uid: setting the ids back to root must fail.
    proc = _run(rootfs, "--ids", "200999:200999", "--", "/usr/bin/setpriv", "--reuid=0", "true")
    assert proc.returncode != 0
    assert "Operation not permitted" in proc.stderr


@pytest.mark.parametrize(
    "args, says",
    [
        (["--bogus", "x"], "unknown option"),
        (["--limit", "cpu=-1"], "not a number"),
        (["--limit", "cpu=12x"], "not a number"),
        (["--limit", "cpu="], "not a number"),
        (["--limit", "stack=1"], "unknown rlimit"),
        (["--limit", "cpu"], "RES=N"),
        (["--ids", "200999"], "UID:GID"),
        (["--ids", ":5"], "UID:GID"),
        (["--ids", "5:x"], "not a number"),
        (["--limit"], "missing value"),
    ],
)
def test_what_it_cannot_parse_is_refused_before_anything_runs(
    rootfs: Path, tmp_path: Path, args: list[str], says: str
) -> None:
    marker = tmp_path / "ran"
    proc = _run(rootfs, *args, "--", "/usr/bin/touch", str(marker))
    assert proc.returncode == 126, proc
    assert says in proc.stderr
    assert not marker.exists()


def test_the_program_needs_an_absolute_path_and_an_exec_failure_is_127(rootfs: Path) -> None:
    relative = _run(rootfs, "--", "touch", "x")
    assert relative.returncode == 126 and "absolute path" in relative.stderr
    assert _run(rootfs, "--limit", "core=0").returncode == 126  # no "--", no program
    missing = _run(rootfs, "--", "/no/such/program")
    assert missing.returncode == 127 and "No such file" in missing.stderr


def _fake_rootfs(tmp_path: Path, source: Path) -> tuple[Path, Path]:
    root = tmp_path / "rootfs"
    helper = root / SPAWN
    helper.parent.mkdir(parents=True)
    shutil.copyfile(source / SPAWN, helper)
    helper.chmod(0o755)
    return root, helper


@pytest.mark.parametrize("mode", [0o775, 0o757, 0o777])
def test_a_helper_others_could_replace_is_not_run(rootfs: Path, tmp_path: Path, mode: int) -> None:
    """Whoever can write the helper would run code as the service (root): refused."""
    root, helper = _fake_rootfs(tmp_path, rootfs)
    assert spawner(root) == str(helper)
    helper.chmod(mode)
    with pytest.raises(SandboxBackendUnavailable, match="not run"):
        spawner(root)


@root_only
def test_a_helper_owned_by_another_user_is_not_run(rootfs: Path, tmp_path: Path) -> None:
    root, helper = _fake_rootfs(tmp_path, rootfs)
    os.chown(helper, 200999, 0)
    with pytest.raises(SandboxBackendUnavailable, match="not run"):
        spawner(root)


def test_a_runtime_without_the_helper_says_to_rebuild_it(tmp_path: Path) -> None:
    (tmp_path / "old-rootfs" / "usr").mkdir(parents=True)
    with pytest.raises(SandboxBackendUnavailable, match="rebuild it"):
        spawner(tmp_path / "old-rootfs")
