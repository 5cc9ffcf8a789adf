"""The resident process: state that outlives one command, on every backend."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from assay.service import raise_open_files_limit
from assay_sandbox_manager.backends import SandboxBackend


def test_background_process_survives_between_commands(
    backend: SandboxBackend, sandbox: str
) -> None:
    res = backend.exec(sandbox, "(while :; do echo x >> beat; sleep 0.1; done) >/dev/null 2>&1 &")
    assert res.exit_code == 0 and not res.timed_out, res
    time.sleep(0.5)
    size = len(backend.read_file(sandbox, "beat"))
    time.sleep(0.5)
    assert len(backend.read_file(sandbox, "beat")) > size, "the background writer died"
    # Commands keep running fast and in the same sandbox while it writes.
    assert backend.exec(sandbox, "test -s beat && echo yes").stdout == b"yes\n"


def test_python_state_persists_and_resets(backend: SandboxBackend, sandbox: str) -> None:
    first = backend.python(sandbox, "import math\nx = 40\nx + 2")
    assert (first.exit_code, first.stdout, first.restarted) == (0, b"42\n", "new")
    again = backend.python(sandbox, "print(math.floor(x / 3))", kernel_id=first.kernel_id)
    assert (again.stdout, again.restarted, again.kernel_id) == (b"13\n", "", first.kernel_id)
    err = backend.python(sandbox, "1/0", kernel_id=first.kernel_id)
    assert err.exit_code == 1 and b"ZeroDivisionError" in err.stderr
    assert b"resident" not in err.stderr  # no frame of the kernel's own
    reset = backend.python(sandbox, "print('x' in dir())", kernel_id=first.kernel_id, reset=True)
    assert (reset.stdout, reset.restarted) == (b"False\n", "reset")
    assert reset.kernel_id != first.kernel_id
    # A caller that knows no kernel (a resumed runner) gets a fresh one, and is told.
    fresh = backend.python(sandbox, "print('x' in dir())")
    assert (fresh.stdout, fresh.restarted) == (b"False\n", "new")


def test_python_timeout_kills_the_kernel_and_says_so(backend: SandboxBackend, sandbox: str) -> None:
    k = backend.python(sandbox, "import subprocess\ny = 1").kernel_id
    res = backend.python(
        sandbox,
        "subprocess.Popen(['sh', '-c', 'while :; do echo x >> pybeat; sleep 0.1; done'])\n"
        "import time\ntime.sleep(300)",
        timeout_s=2,
        kernel_id=k,
    )
    assert res.timed_out and res.limit == "timeout" and res.exit_code == 137
    time.sleep(0.5)
    size = len(backend.read_file(sandbox, "pybeat"))
    time.sleep(1.0)
    assert len(backend.read_file(sandbox, "pybeat")) == size, "a child of the cell survived"
    after = backend.python(sandbox, "print('y' in dir())", kernel_id=k)
    assert (after.stdout, after.restarted) == (b"False\n", "timeout")


def test_python_output_cap_and_figures(backend: SandboxBackend, sandbox: str) -> None:
    res = backend.python(sandbox, "print('a' * 100000)", timeout_s=60)
    assert res.stdout_truncated and res.stdout.startswith(b"a" * 100)
    code = "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.title('t')"
    fig = backend.python(sandbox, code, kernel_id=res.kernel_id, timeout_s=120)
    assert fig.exit_code == 0, fig
    assert len(fig.figures) == 1 and fig.figures[0].startswith("figures/")
    assert backend.read_file(sandbox, fig.figures[0]).startswith(b"\x89PNG")


def test_a_resident_that_cannot_start_is_the_platforms_failure(tmp_path: Path) -> None:
    """bwrap that cannot mount /proc (a container without systempaths=unconfined) kills the
    resident on start: that is no agent's exit 137, it is a sandbox that cannot run."""
    from assay_sandbox_manager.backends import BubblewrapBackend, ResidentUnavailable, SandboxSpec

    dead = tmp_path / "bwrap-that-fails"
    dead.write_text("#!/bin/sh\necho 'bwrap: Can't mount proc on /newroot/proc' >&2\nexit 1\n")
    dead.chmod(0o755)
    backend = BubblewrapBackend(tmp_path / "state", tmp_path / "seals")
    backend.create(SandboxSpec(), "broken", {})
    backend._bwrap = str(dead)  # the next resident start goes through the failing bwrap
    backend._drop_resident("broken")
    try:
        with pytest.raises(ResidentUnavailable, match="died on start"):
            backend.exec("broken", "true")
    finally:
        backend.destroy("broken")


def test_a_resident_gone_once_on_start_is_started_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A new resident that was gone before it read its first request ran nothing: the
    backend starts it once more instead of failing the run (seen once in CI). A second
    failure still fails, and says how bwrap exited."""
    import shutil
    import tempfile

    from assay_sandbox_manager.backends import BubblewrapBackend, ResidentUnavailable, SandboxSpec

    real = shutil.which("bwrap")
    assert real is not None
    # bwrap is started as the sandbox's own uid: the stand-ins live where it may run them.
    shared = Path(tempfile.mkdtemp(prefix="assay-bwrap-"))
    shared.chmod(0o777)
    once = shared / "bwrap-that-fails-once"
    marker = shared / "failed-once"
    once.write_text(
        f'#!/bin/sh\nif [ ! -e {marker} ]; then touch {marker}; exit 1; fi\nexec {real} "$@"\n'
    )
    once.chmod(0o755)
    backend = BubblewrapBackend(tmp_path / "state", tmp_path / "seals")
    backend.create(SandboxSpec(), "flaky", {})
    backend._bwrap = str(once)
    backend._drop_resident("flaky")
    marker.unlink(missing_ok=True)
    try:
        with caplog.at_level("WARNING", logger="assay_sandbox_manager.resident"):
            res = backend.exec("flaky", "echo ran")
        assert (res.exit_code, res.stdout) == (0, b"ran\n"), res
        assert marker.exists() and "starting it again" in caplog.text
        # Twice gone is a sandbox that cannot run, with bwrap's exit status in the message.
        always = shared / "bwrap-that-always-fails"
        always.write_text("#!/bin/sh\nexit 3\n")
        always.chmod(0o755)
        backend._bwrap = str(always)
        backend._drop_resident("flaky")
        with pytest.raises(ResidentUnavailable, match="bwrap exited with status 3"):
            backend.exec("flaky", "true")
    finally:
        backend.destroy("flaky")
        shutil.rmtree(shared)


def test_commands_run_with_descriptors_past_fd_setsize(
    backend: SandboxBackend, make_sandbox: object
) -> None:
    """Hundreds of live sandboxes hold thousands of descriptors: a sandbox whose pipes are
    numbered past 1024 (select()'s FD_SETSIZE) starts and runs commands."""
    if raise_open_files_limit() < 1400:
        pytest.skip("the hard limit on open files is under 1400 on this host")
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    try:
        assert max(held) > 1024
        assert callable(make_sandbox)
        sid = make_sandbox()
        result = backend.exec(sid, "echo past-fd-setsize")
        assert (result.exit_code, result.stdout) == (0, b"past-fd-setsize\n")
        again = backend.exec(sid, ["true"])
        assert again.exit_code == 0
    finally:
        for fd in held:
            os.close(fd)


def test_text_and_bytes_cross_the_channel_unchanged(backend: SandboxBackend, sandbox: str) -> None:
    # Requests carry text as UTF-8 and bytes as they are, length-prefixed: every byte and
    # every character comes back as it was.
    every_byte = bytes(range(256)) * 4
    res = backend.exec(
        sandbox,
        ["sh", "-c", 'printf "%s|%s|" "$1" "$MOT"; cat', "sh", 'héllo ✓ "q" \\ \U0001f600'],
        env={"MOT": "ünï\tcödé"},
        stdin=every_byte,
    )
    assert res.exit_code == 0, res
    head = 'héllo ✓ "q" \\ \U0001f600|ünï\tcödé|'.encode()
    assert res.stdout == head + every_byte


def _ticks(stat: bytes) -> int:
    fields = stat.rsplit(b")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def test_idle_resident_sleeps_and_still_reaps_orphans(
    backend: SandboxBackend, sandbox: str
) -> None:
    # Orphans that exit while no command runs: their parent, PID 1, reaps them (on
    # bubblewrap the resident, woken by SIGCHLD; on Docker the container's init).
    res = backend.exec(sandbox, "for i in 1 2 3 4 5; do (sleep 0.2 &) ; done >/dev/null 2>&1")
    assert res.exit_code == 0, res
    found = backend.exec(sandbox, "grep -l [a]ssay/resident /proc/[0-9]*/cmdline").stdout.split()
    # In a container PID 1 is the resident too, in its init mode: not the one serving.
    [pid] = {path.split(b"/")[2] for path in found} - {b"self", *_container_init(backend)}
    if backend.name == "bubblewrap":
        assert pid == b"1", "the resident is the sandbox's PID 1"
    stat = f"cat /proc/{pid.decode()}/stat"
    before = backend.exec(sandbox, stat).stdout
    time.sleep(1.5)
    after = backend.exec(sandbox, stat).stdout
    states = backend.exec(sandbox, "cat /proc/[0-9]*/stat").stdout
    zombies = [line for line in states.splitlines() if line.rsplit(b")", 1)[1].split()[0] == b"Z"]
    assert not zombies, zombies
    # Asleep in between (no timer, no busy loop): at most a few clock ticks in 1.5 s.
    assert _ticks(after) - _ticks(before) <= 5, (before, after)


def test_a_kernel_dying_mid_cell_is_said_at_once(backend: SandboxBackend, sandbox: str) -> None:
    # The resident hears the kernel's exit (SIGCHLD), not the cell's timeout.
    t0 = time.monotonic()
    res = backend.python(sandbox, "import os\nos.kill(os.getpid(), 9)", timeout_s=60)
    assert (res.exit_code, res.timed_out) == (137, False), res
    assert time.monotonic() - t0 < 30, "waited for the timeout"
    again = backend.python(sandbox, "1 + 1", kernel_id=res.kernel_id or None)
    assert (again.exit_code, again.stdout, again.restarted) == (0, b"2\n", "crashed"), again


def _container_init(backend: SandboxBackend) -> set[bytes]:
    return {b"1"} if backend.name == "docker" else set()


def test_an_idle_resident_holds_under_2_mib(backend: SandboxBackend, sandbox: str) -> None:
    """The resident is a static C program: a live sandbox costs far less than an
    interpreter's floor (~8 MiB RSS). Measured from /proc after a few commands."""
    for command in ("true", "echo hi", ["ls", "/"]):
        assert backend.exec(sandbox, command).exit_code == 0
    found = backend.exec(sandbox, "grep -l [a]ssay/resident /proc/[0-9]*/cmdline").stdout.split()
    # In a container PID 1 is the resident too, in its init mode: not the one serving.
    [pid] = {path.split(b"/")[2] for path in found} - {b"self", *_container_init(backend)}
    status = backend.exec(sandbox, ["cat", f"/proc/{pid.decode()}/status"]).stdout.decode()
    rss_kib = int(next(ln.split()[1] for ln in status.splitlines() if ln.startswith("VmRSS:")))
    assert rss_kib < 2048, f"the resident holds {rss_kib} KiB"
