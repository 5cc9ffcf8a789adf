"""bench.sandbox_cost's variants leave out exactly the part they name from a start's argv."""

from __future__ import annotations

from bench.sandbox_cost import VARIANTS

ARGV = [
    "/rootfs/usr/libexec/assay/spawn",
    "--ids",
    "200001:200001",
    "--limit",
    "core=0",
    "--",
    "/usr/bin/bwrap",
    "--unshare-all",
    "--ro-bind",
    "/rootfs",
    "/",
    "--proc",
    "/proc",
    "--dev",
    "/dev",
    "--bind",
    "/s/ws",
    "/workspace",
    "--bind",
    "/s/shm",
    "/dev/shm",
    "--remount-ro",
    "/dev",
    "--cap-drop",
    "ALL",
    "--",
    "/bin/true",
]


def test_the_whole_start_is_the_argv_itself() -> None:
    assert VARIANTS["whole start"](ARGV) == ARGV


def test_namespaces_are_spelled_out_without_the_ones_left_out() -> None:
    no_net = VARIANTS["without the network namespace"](ARGV)
    assert "--unshare-all" not in no_net and "--unshare-net" not in no_net
    assert {"--unshare-user", "--unshare-pid", "--unshare-ipc"} <= set(no_net)
    no_ipc = VARIANTS["without the IPC and cgroup namespaces"](ARGV)
    assert "--unshare-net" in no_ipc
    assert "--unshare-ipc" not in no_ipc and "--unshare-cgroup" not in no_ipc


def test_dev_goes_with_its_shm_and_remount_and_nothing_else() -> None:
    out = VARIANTS["without /dev and /dev/shm"](ARGV)
    assert "--dev" not in out and "/dev/shm" not in out and "--remount-ro" not in out
    assert out[out.index("--bind") : out.index("--bind") + 3] == ["--bind", "/s/ws", "/workspace"]
    assert len(ARGV) - len(out) == 2 + 3 + 2


def test_proc_and_the_helper_alone() -> None:
    assert VARIANTS["without /proc"](ARGV) == [a for a in ARGV if a not in ("--proc", "/proc")]
    helper = VARIANTS["the helper alone (true instead of bwrap)"](ARGV)
    assert helper == [*ARGV[:6], "/bin/true"]
