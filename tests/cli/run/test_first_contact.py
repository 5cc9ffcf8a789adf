"""First contact with a finished run: the commands `assay run` prints run as printed,
`replay` reopens the run directory by itself, and `assay view` cleans up on SIGTERM."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from assay.embedded import find_free_port
from assay_cli.command import assay_command
from tests.e2e.test_run_outcome import ROOT, one_task

pytestmark = pytest.mark.timeout(300)

BIN = Path(sys.executable).parent
BARE_PATH = "/usr/local/bin:/usr/bin:/bin"
"""A PATH without the venv's bin folder, as after `make run`."""


def env(**extra: str) -> dict[str, str]:
    return {**os.environ, "COLUMNS": "250", **extra}


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A finished run directory (its sandboxes failed: no runtime) and `assay run`'s output,
    run the way `make run` does: the venv's script, its bin folder not on the PATH."""
    tmp = tmp_path_factory.mktemp("first-contact")
    tasks, campaign = one_task(tmp)
    out = subprocess.run(
        [str(BIN / "assay"), "run", str(tasks), "--campaign", str(campaign), "--skip-checks"],
        cwd=ROOT,
        env=env(
            ASSAY_HOME=str(tmp / "home"),
            ASSAY_STATE_DIR=str(tmp / "state"),
            ASSAY_SANDBOX_CACHE=str(tmp / "no-runtime"),
            PATH=BARE_PATH,
        ),
        capture_output=True,
        text=True,
        timeout=240,
    )
    [run_dir] = list((tmp / "home" / "runs").glob("small-*"))
    return run_dir, out.stdout


def test_assay_command_is_the_bare_name_only_when_the_path_finds_it() -> None:
    assert assay_command(path=f"{BIN}:{BARE_PATH}") == "assay"
    assert assay_command(path=BARE_PATH) == str((BIN / "assay").absolute())


def test_printed_next_steps_run_as_printed(finished: tuple[Path, str]) -> None:
    run_dir, text = finished
    steps = [line.strip() for line in text.splitlines() if f"--home {run_dir}" in line]
    assert steps, text[-2000:]
    script = str((BIN / "assay").absolute())
    assert all(step.startswith(f"{script} ") for step in steps), steps
    assert f"export PATH={BIN.absolute()}:$PATH" in text
    [events] = [s for s in steps if " events " in s]
    # Exactly as printed, by a shell whose PATH lacks the venv.
    out = subprocess.run(
        ["/bin/sh", "-c", events + " --json"],
        env=env(PATH=BARE_PATH),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert '"RunFailed"' in out.stdout
    assert shlex.split(events)[0] == script


def test_replay_and_verify_reopen_a_run_directory(finished: tuple[Path, str]) -> None:
    run_dir, _ = finished
    for args in (["replay"], ["replay", "--verify"]):
        out = subprocess.run(
            [sys.executable, "-m", "assay_cli", *args, "--home", str(run_dir)],
            # Nothing listens here: only the run directory can answer.
            env=env(ASSAY_NATS_URL=f"nats://127.0.0.1:{find_free_port()}"),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 0, out.stdout + out.stderr
    assert "identical" in out.stdout


def _children(pid: int) -> list[int]:
    found = []
    for status in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = status.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(status.parent.name))
    return found


def _cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
    except OSError:
        return []


@pytest.fixture
def view(finished: tuple[Path, str]) -> Iterator[subprocess.Popen[str]]:
    run_dir, _ = finished
    proc = subprocess.Popen(
        [sys.executable, "-m", "assay_cli", "view", str(run_dir), "--port", str(find_free_port())],
        env=env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    yield proc
    if proc.poll() is None:
        proc.kill()
        proc.wait(10)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_view_stopped_by_a_signal_stops_its_server_and_removes_its_folder(
    view: subprocess.Popen[str], sig: signal.Signals
) -> None:
    assert view.stdout is not None
    line = ""
    deadline = time.monotonic() + 60
    while "assay view on" not in line and time.monotonic() < deadline:
        line = view.stdout.readline()
        assert line or view.poll() is None, "view exited before serving"
    [server] = [p for p in _children(view.pid) if "nats-server" in " ".join(_cmdline(p))]
    args = _cmdline(server)
    scratch = Path(args[args.index("-sd") + 1]).parent
    assert scratch.is_dir()
    view.send_signal(sig)
    view.wait(30)
    deadline = time.monotonic() + 10
    while Path(f"/proc/{server}").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    alive = (
        Path(f"/proc/{server}/stat").exists()
        and " Z " not in (Path(f"/proc/{server}/stat").read_text().rsplit(")", 1)[1][:3])
    )
    assert not alive, "the private nats-server outlived assay view"
    assert not scratch.exists(), "the temporary home folder was left behind"


def test_run_stopped_by_sigterm_stops_its_server(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "assay_cli", "run", "examples/tasks", "--skip-checks"],
        cwd=ROOT,
        env=env(
            ASSAY_HOME=str(tmp_path / "home"),
            ASSAY_STATE_DIR=str(tmp_path / "state"),
            ASSAY_SANDBOX_CACHE=str(tmp_path / "no-runtime"),
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 60
        line = ""
        while "log and files under" not in line and time.monotonic() < deadline:
            line = proc.stdout.readline()
            assert line or proc.poll() is None, "run exited before its stack was up"
        [server] = [p for p in _children(proc.pid) if "nats-server" in " ".join(_cmdline(p))]
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)
        deadline = time.monotonic() + 10
        while Path(f"/proc/{server}").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not Path(f"/proc/{server}").exists(), "the run's nats-server outlived it"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
