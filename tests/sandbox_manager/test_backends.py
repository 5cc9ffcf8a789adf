"""One behavioural contract, run against every sandbox backend (see conftest.backend)."""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from assay.store import LocalBlobStore
from assay_sandbox_manager.backends import (
    BubblewrapBackend,
    DockerBackend,
    SandboxBackend,
    SandboxExists,
    SandboxNotFound,
    SandboxPathError,
    SandboxSpec,
    truncation_marker,
)
from assay_sandbox_manager.seal import SealCaps, plan_seal, store_plan
from tests.fork_bomb import BOMB, tagged_processes

MakeSandbox = Callable[..., str]


def test_read_write_list_roundtrip(backend: SandboxBackend, sandbox: str) -> None:
    backend.write_file(sandbox, "data/in.csv", b"a,b\n1,2\n")
    res = backend.exec(sandbox, "cat data/in.csv > /workspace/data/out.csv && echo done")
    assert (res.exit_code, res.stdout) == (0, b"done\n")
    assert backend.read_file(sandbox, "/workspace/data/out.csv") == b"a,b\n1,2\n"
    entries = {e.path: e for e in backend.list_files(sandbox)}
    assert entries["data"].kind == "dir"
    assert entries["data/in.csv"] == ("data/in.csv", "file", 8)
    # A file written by the host is the agent's to modify.
    assert backend.exec(sandbox, "echo x >> data/in.csv").exit_code == 0


def test_no_host_fd_leaks_in(backend: SandboxBackend, sandbox: str) -> None:
    # An inherited directory fd would let openat(fd, "..") walk the host filesystem.
    res = backend.exec(sandbox, ["python3", "-c", "import os; print(os.listdir('/proc/self/fd'))"])
    assert res.stdout == b"['0', '1', '2', '3']\n", res


def test_stdin_env_cwd(backend: SandboxBackend, sandbox: str) -> None:
    backend.write_file(sandbox, "sub/f", b"")
    res = backend.exec(
        sandbox,
        ["sh", "-c", 'cat; echo "$FOO"; pwd'],
        stdin=b"hello\n",
        env={"FOO": "bar"},
        cwd="/workspace/sub",
    )
    assert res.stdout == b"hello\nbar\n/workspace/sub\n"
    assert backend.exec(sandbox, "echo oops >&2; exit 3").stderr == b"oops\n"
    assert backend.exec(sandbox, "exit 3").exit_code == 3


def test_runtime_is_importable_and_read_only(backend: SandboxBackend, sandbox: str) -> None:
    res = backend.exec(
        sandbox,
        [
            "python3",
            "-c",
            "import numpy, pandas, scipy, sklearn, "
            "statsmodels, matplotlib, openpyxl, docx; print('ok')",
        ],
        timeout_s=120,
    )
    assert res.stdout == b"ok\n", res
    assert backend.exec(sandbox, "id -u").stdout == b"1000\n"
    res = backend.exec(sandbox, "touch /usr/lib/python3/dist-packages/numpy/evil.py")
    assert res.exit_code != 0
    assert backend.exec(sandbox, "touch /etc/evil").exit_code != 0


def test_path_escapes_rejected(backend: SandboxBackend, sandbox: str) -> None:
    for bad in ("../etc/passwd", "/etc/passwd", "a/../../x", "/workspace/../etc/passwd"):
        with pytest.raises(SandboxPathError, match=sandbox):
            backend.read_file(sandbox, bad)
        with pytest.raises(SandboxPathError, match=sandbox):
            backend.write_file(sandbox, bad, b"x")
    assert (
        backend.exec(sandbox, "ln -s /etc/shadow shadow; ln -s /etc etc; mkfifo fifo").exit_code
        == 0
    )
    for bad in ("shadow", "etc/passwd", "fifo"):
        with pytest.raises(SandboxPathError, match=sandbox):
            backend.read_file(sandbox, bad)
    with pytest.raises(SandboxPathError):
        backend.write_file(sandbox, "etc/cron.d/x", b"x")
    with pytest.raises(SandboxPathError):
        backend.write_file(sandbox, "shadow", b"x")
    assert not Path("/etc/cron.d/x").exists()


@pytest.fixture
def loopback_listener() -> Iterator[tuple[int, list[bool]]]:
    """A TCP listener on the host's 127.0.0.1; records whether anyone connected."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    srv.settimeout(0.2)
    hits: list[bool] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except TimeoutError:
                continue
            hits.append(True)
            conn.close()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    yield srv.getsockname()[1], hits
    stop.set()
    t.join()
    srv.close()


def test_no_network_to_host_loopback(
    backend: SandboxBackend, sandbox: str, loopback_listener: tuple[int, list[bool]]
) -> None:
    port, hits = loopback_listener
    with socket.create_connection(("127.0.0.1", port)):
        pass  # the listener is reachable from the host itself
    time.sleep(0.3)
    hits.clear()
    code = (
        f"import socket; s=socket.socket(); s.settimeout(3); "
        f"s.connect(('127.0.0.1', {port})); print('CONNECTED')"
    )
    res = backend.exec(sandbox, ["python3", "-c", code], timeout_s=30)
    assert res.exit_code != 0 and b"CONNECTED" not in res.stdout
    res = backend.exec(
        sandbox,
        [
            "python3",
            "-c",
            "import socket; socket.create_connection(('deb.debian.org', 80), timeout=3)",
        ],
        timeout_s=30,
    )
    assert res.exit_code != 0
    assert hits == []


def test_host_paths_not_readable(backend: SandboxBackend, make_sandbox: MakeSandbox) -> None:
    mine, other = make_sandbox(), make_sandbox()
    backend.write_file(other, "secret.txt", b"other-secret")
    other_ws = next(s.workspace for s in backend.list_live() if s.sandbox_id == other)
    for path in (
        "/work/main/pyproject.toml",
        "/root/.bashrc",
        f"{other_ws}/secret.txt",
        "/var/lib/docker/volumes",
        "/etc/shadow",
    ):
        res = backend.exec(mine, ["cat", path])
        assert res.exit_code != 0, path
        assert b"other-secret" not in res.stdout
    # Nowhere in the sandbox's view of the filesystem is the other workspace's file.
    res = backend.exec(
        mine, "find / -path /proc -prune -o -name secret.txt -print 2>/dev/null", timeout_s=60
    )
    assert res.stdout == b""


def test_host_env_not_visible(
    backend: SandboxBackend, sandbox: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-leak-canary")
    res = backend.exec(sandbox, "env; cat /proc/*/environ 2>/dev/null; true")
    assert b"sk-test-leak-canary" not in res.stdout
    assert b"OPENAI_API_KEY" not in res.stdout


def test_fork_bomb_contained(backend: SandboxBackend, sandbox: str) -> None:
    res = backend.exec(sandbox, "bomb() { bomb | bomb & }; bomb; wait", timeout_s=10)
    # Contained means: the exec came back, reporting the process cap (or the timeout).
    assert res.timed_out or b"fork" in res.stderr.lower(), res
    assert backend.exec(sandbox, "echo alive").stdout == b"alive\n"


def test_a_reforking_bomb_dies_whole_at_its_timeout(backend: SandboxBackend, sandbox: str) -> None:
    """Issue #54's bomb: `timeout` kills its group at 15 s while forks race it, so the
    command's own timeout must kill a tree that keeps re-forking, all of it, at once."""
    tag = uuid.uuid4().hex
    started = time.monotonic()
    res = backend.exec(sandbox, f"export ASSAY_BOMB_TAG={tag}; {BOMB}", timeout_s=8)
    took = time.monotonic() - started
    assert res.timed_out and res.limit == "timeout", res
    assert took < 8 + 2, f"answered after {took:.1f} s"
    assert tagged_processes(tag) == [], "the reply comes once nothing of the bomb is left"
    assert backend.exec(sandbox, "echo alive").stdout == b"alive\n"


def test_disk_fill_contained(backend: SandboxBackend, sandbox: str) -> None:
    # 8 files of 16 MB against a 64 MB disk: ENOSPC, well below the 32 MB file cap.
    res = backend.exec(
        sandbox,
        "for i in 1 2 3 4 5 6 7 8; do "
        "dd if=/dev/zero of=/workspace/f$i bs=1M count=16 2>&1 || exit 1; done",
        timeout_s=60,
    )
    assert res.exit_code != 0 and b"No space left" in res.stdout
    assert backend.exec(sandbox, "rm -f /workspace/f*; echo ok").stdout == b"ok\n"


def test_file_size_limit(backend: SandboxBackend, sandbox: str) -> None:
    res = backend.exec(sandbox, "dd if=/dev/zero of=/tmp/big bs=1M count=40", timeout_s=60)
    assert res.exit_code != 0
    assert res.limit == "file_size"


def test_memory_hog_contained(backend: SandboxBackend, sandbox: str) -> None:
    res = backend.exec(
        sandbox, ["python3", "-c", "x = bytearray(3 * 1024**3); print('got it')"], timeout_s=60
    )
    assert res.exit_code != 0 and b"got it" not in res.stdout
    assert backend.exec(sandbox, "echo alive").stdout == b"alive\n"


def test_timeout_kills_sigterm_ignoring_tree(backend: SandboxBackend, sandbox: str) -> None:
    # A background writer in its own session, and a foreground that ignores SIGTERM.
    script = (
        "trap '' TERM; (setsid sh -c 'trap \"\" TERM; while :; do echo x >> beat; "
        "sleep 0.1; done' &); sleep 300"
    )
    res = backend.exec(sandbox, script, timeout_s=2)
    assert res.timed_out and res.limit == "timeout" and res.exit_code == 137
    time.sleep(0.5)
    size = len(backend.read_file(sandbox, "beat"))
    time.sleep(1.0)
    assert len(backend.read_file(sandbox, "beat")) == size, "a process survived the timeout"


def test_output_cap_marks_truncation(
    backend: SandboxBackend, sandbox: str, spec: SandboxSpec
) -> None:
    res = backend.exec(sandbox, "head -c 100000 /dev/zero | tr '\\0' a; head -c 10 /dev/zero >&2")
    cap = spec.output_cap_bytes
    assert res.stdout_truncated and not res.stderr_truncated
    assert res.stdout == b"a" * cap + truncation_marker(cap, 100000 - cap)
    assert res.stderr == b"\0" * 10


def test_lifecycle_and_reconciliation(backend: SandboxBackend, spec: SandboxSpec) -> None:
    sid = f"t-life-{os.getpid()}"
    info = backend.create(spec, sid, {"assay.campaign_id": "camp", "assay.run_id": "run"})
    assert info.sandbox_id == sid
    with pytest.raises(SandboxExists, match=sid):
        backend.create(spec, sid, {})
    # A fresh backend object over the same state (a restarted service) sees the sandbox.
    assert isinstance(backend, BubblewrapBackend | DockerBackend)
    reborn: SandboxBackend = type(backend)(backend.dirs.state_dir, backend.dirs.seal_dir)
    live = {s.sandbox_id: s for s in reborn.list_live()}
    assert live[sid].labels["assay.run_id"] == "run"
    reborn.destroy(sid)
    assert sid not in {s.sandbox_id for s in backend.list_live()}
    for call in (
        lambda: backend.exec(sid, "true"),
        lambda: backend.read_file(sid, "x"),
        lambda: backend.destroy(sid),
    ):
        with pytest.raises(SandboxNotFound, match=sid):
            call()


def test_two_destroys_at_once_both_end_with_the_sandbox_gone(
    backend: SandboxBackend, spec: SandboxSpec
) -> None:
    """A handler's destroy left running by a stop, and the teardown after it: dockerd
    answered the second removal 409 ("already in progress"), which failed the teardown.
    Each ends now, done or told the sandbox is gone, and neither leaves it behind."""
    sid = f"t-twice-{os.getpid()}"
    backend.create(spec, sid, {})
    start = threading.Barrier(2)
    failures: list[BaseException] = []

    def destroy() -> None:
        start.wait()
        try:
            backend.destroy(sid)
        except SandboxNotFound:
            pass  # the other one finished first
        except BaseException as e:
            failures.append(e)

    both = [threading.Thread(target=destroy) for _ in range(2)]
    for t in both:
        t.start()
    for t in both:
        t.join(60)
    assert failures == []
    assert sid not in {s.sandbox_id for s in backend.list_live()}


def test_copy_for_seal_and_store(
    backend: SandboxBackend, make_sandbox: MakeSandbox, tmp_path: Path
) -> None:
    sid, other = make_sandbox(), make_sandbox()
    other_ws = next(s.workspace for s in backend.list_live() if s.sandbox_id == other)
    backend.write_file(other, "secret.txt", b"other-secret")
    script = (
        "import os\n"
        "os.makedirs('out', exist_ok=True)\n"
        "for name in [b'with space.txt', b'new\\nline.csv', b'caf\\xe9.bin', b'out/r.json']:\n"
        "    open(name, 'wb').write(name)\n"
        "os.symlink('/etc/shadow', 'shadow')\n"
        f"os.symlink({str(other_ws)!r}, 'other')\n"
        "os.mkfifo('pipe')\n"
    )
    assert backend.exec(sid, ["python3", "-c", script]).exit_code == 0
    copy = backend.copy_for_seal(sid, SealCaps())
    backend.destroy(sid)
    snap = copy.path
    assert snap.is_dir()
    plan = copy.plan
    # Only the planned files were copied: no link, no FIFO reaches the host.
    assert plan_seal(snap) == plan._replace(excluded=[])
    by_path = {f.path: f for f in plan.files}
    names = [b"with space.txt", b"new\nline.csv", b"caf\xe9.bin", b"out/r.json"]
    assert sorted(by_path) == sorted(os.fsdecode(n) for n in names)
    for n in names:
        f = by_path[os.fsdecode(n)]
        assert (snap / os.fsdecode(n)).read_bytes() == n and f.size == len(n)
    assert by_path["out/r.json"].media_type == "application/json"
    excluded = {e.path: e.reason for e in plan.excluded}
    assert excluded["shadow"] == "symlink" and excluded["other"] == "symlink"
    assert "pipe" not in by_path
    store = LocalBlobStore(tmp_path / "blobs")
    sealed = {f.path: f for f in store_plan(snap, plan, store).files}
    assert sorted(sealed) == sorted(n.decode("utf-8", "backslashreplace") for n in names)
    assert store.get_bytes(sealed["caf\\xe9.bin"].sha256) == b"caf\xe9.bin"
