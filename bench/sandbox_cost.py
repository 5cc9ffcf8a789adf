"""What one bubblewrap sandbox costs of its own CPU, and which part of its start costs what
(issue #29: the "sandboxes: bwrap" and "sandboxes: resident" rows of bench/scale_rows.py).

``python -m bench.sandbox_cost [SANDBOXES] [STARTS]``, root only:

- per sandbox, after 1, 11 and 51 commands (``true``), the on-CPU time of the process that
  becomes bwrap (the start helper, then bwrap's outer half) and of the resident's (bwrap's
  setup inside the namespaces, then the resident), from /proc/<pid>/schedstat before
  teardown, mean of SANDBOXES sandboxes;
- a bare start (``true`` as PID 1 instead of the resident) with the backend's own argv,
  whole and with one part left out at a time, CPU of the waited children over STARTS
  starts (getrusage): what each part of the isolation costs.
"""

from __future__ import annotations

import contextlib
import resource
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from assay_sandbox_manager.backends import BubblewrapBackend, SandboxSpec, _bubblewrap
from assay_sandbox_manager.backends._resident import PipeChannel
from assay_sandbox_manager.runtime import ensure_rootfs

from .procs import on_cpu_s, rusage_ms, stat


def _tree(pid: int) -> list[int]:
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return [pid]
    return [pid, *(p for c in children for p in _tree(int(c)))]


def per_sandbox(be: BubblewrapBackend, commands: int, sandboxes: int) -> dict[str, float]:
    """Mean on-CPU ms per sandbox of its bwrap and resident processes after `commands`."""
    sums: dict[str, float] = {}
    for _ in range(sandboxes):
        sid = f"sc-{uuid.uuid4().hex[:10]}"
        be.create(SandboxSpec(), sid, {})
        try:
            for _ in range(commands):
                be.exec(sid, ["/bin/true"])
            channel = be._residents[sid]
            assert isinstance(channel, PipeChannel)
            for pid in _tree(channel.proc.pid):
                proc, ran = stat(pid), on_cpu_s(pid)
                if proc is not None and ran is not None:
                    sums[proc.comm] = sums.get(proc.comm, 0.0) + ran * 1000
        finally:
            be.destroy(sid)
    return {comm: ms / sandboxes for comm, ms in sums.items()}


@contextlib.contextmanager
def _starts_as(transform: Callable[[list[str]], list[str]]) -> Iterator[None]:
    """The backend's starts with `true` as PID 1 and their argv passed through `transform`
    (run as the backend runs them: from its spawner thread, in its mount view)."""

    class _Transforming:
        PIPE, DEVNULL = subprocess.PIPE, subprocess.DEVNULL

        @staticmethod
        def Popen(argv: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
            return subprocess.Popen(transform(list(argv)), **kwargs)

    module = vars(_bubblewrap)
    saved = module["RESIDENT_ARGV"], module["subprocess"]
    module["RESIDENT_ARGV"], module["subprocess"] = ["/bin/true"], _Transforming
    try:
        yield
    finally:
        module["RESIDENT_ARGV"], module["subprocess"] = saved


def _without(argv: list[str], option: str, value: str | None = None, n: int = 1) -> list[str]:
    """argv without each `option` (and its n arguments) whose last argument is `value`."""
    out, i = [], 0
    while i < len(argv):
        if argv[i] == option and (value is None or argv[i + n] == value):
            i += 1 + n
            continue
        out.append(argv[i])
        i += 1
    return out


def _unshare(argv: list[str], *kinds: str) -> list[str]:
    """argv with --unshare-all spelled out, leaving out `kinds`."""
    flags = [
        f"--unshare-{k}" for k in ("user", "ipc", "pid", "net", "uts", "cgroup") if k not in kinds
    ]
    i = argv.index("--unshare-all")
    return [*argv[:i], *flags, *argv[i + 1 :]]


VARIANTS: dict[str, Callable[[list[str]], list[str]]] = {
    "whole start": lambda a: a,
    "without the network namespace": lambda a: _unshare(a, "net"),
    "without the IPC and cgroup namespaces": lambda a: _unshare(a, "ipc", "cgroup"),
    "without /dev and /dev/shm": lambda a: _without(
        _without(_without(a, "--dev"), "--bind", "/dev/shm", 2), "--remount-ro", "/dev"
    ),
    "without /proc": lambda a: _without(a, "--proc"),
    "the helper alone (true instead of bwrap)": lambda a: [*a[: a.index("--") + 1], "/bin/true"],
}


def bare_starts(be: BubblewrapBackend, starts: int) -> dict[str, float]:
    """CPU ms of the waited children per bare start, whole and with one part left out."""
    sid = f"sc-{uuid.uuid4().hex[:10]}"
    be.create(SandboxSpec(), sid, {})
    try:
        be._drop_resident(sid)
        meta = be.dirs.meta(sid)
        out = dict.fromkeys(VARIANTS, 0.0)
        # Interleaved, one start of each variant per round: this VM's speed drifts within
        # a minute, and a variant measured in a block of its own would carry that drift.
        for _ in range(starts):
            for name, variant in VARIANTS.items():
                with _starts_as(variant):
                    before = rusage_ms(resource.RUSAGE_CHILDREN)
                    channel = be._start_resident(sid, meta)
                    assert isinstance(channel, PipeChannel)
                    channel.proc.communicate()
                    assert channel.proc.returncode == 0, (name, channel.proc.returncode)
                    out[name] += (rusage_ms(resource.RUSAGE_CHILDREN) - before) / starts
        return out
    finally:
        be.destroy(sid)


def main(sandboxes: int, starts: int) -> None:
    """Print both tables."""
    d = Path(tempfile.mkdtemp(dir="/var/tmp"))
    be = BubblewrapBackend(d / "state", d / "seals", ensure_rootfs())
    for commands in (1, 11, 51):
        cost = per_sandbox(be, commands, sandboxes)
        parts = ", ".join(f"{comm} {ms:.2f}" for comm, ms in sorted(cost.items()))
        print(f"per sandbox after {commands} commands, ms on CPU: {parts}", flush=True)
    for name, ms in bare_starts(be, starts).items():
        print(f"bare start, {name}: {ms:.2f} ms", flush=True)


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:]]
    main(*(args + [8, 300][len(args) :]))
