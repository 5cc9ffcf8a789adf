"""CPU of one bubblewrap start with N other sandboxes live (issue #29: bwrap reads the mount
table once per mount it makes, and each live sandbox has a quota mount on the host).

``python -m bench.mount_scaling 0,480 30``: for each N, N live sandboxes, then one more
started again and again with ``true`` as PID 1 instead of the resident; the CPU of the
service (its share of the start) and of its waited children (helpers and bwrap). Root only.
"""

from __future__ import annotations

import resource
import sys
import tempfile
import uuid
from pathlib import Path

from assay_sandbox_manager.backends import BubblewrapBackend, SandboxSpec, _bubblewrap
from assay_sandbox_manager.backends._resident import PipeChannel
from assay_sandbox_manager.runtime import ensure_rootfs

from .procs import rusage_ms


def _one_start(be: BubblewrapBackend, sid: str) -> tuple[float, float]:
    meta = be.dirs.meta(sid)
    c0, s0 = rusage_ms(resource.RUSAGE_CHILDREN), rusage_ms(resource.RUSAGE_SELF)
    channel = be._start_resident(sid, meta)
    assert isinstance(channel, PipeChannel)
    assert channel.proc.stdin is not None and channel.proc.stdout is not None
    channel.proc.stdin.close()
    assert channel.proc.wait() == 0
    channel.proc.stdout.close()
    return rusage_ms(resource.RUSAGE_CHILDREN) - c0, rusage_ms(resource.RUSAGE_SELF) - s0


def main(counts: list[int], reps: int) -> None:
    """Print children, service and total CPU per start (p50) for each live count."""
    d = Path(tempfile.mkdtemp())
    be = BubblewrapBackend(d / "state", d / "seals", ensure_rootfs())
    live: list[str] = []
    try:
        for target in counts:
            while len(live) < target:
                live.append(f"mb-{uuid.uuid4().hex[:10]}")
                be.create(SandboxSpec(), live[-1], {})
            with open("/proc/self/mountinfo") as f:
                mounts = sum(1 for _ in f)
            sid = f"mb-{uuid.uuid4().hex[:10]}"
            be.create(SandboxSpec(), sid, {})
            # The start's own cost: `true` as PID 1, not the resident's interpreter.
            module = vars(_bubblewrap)
            saved = module["RESIDENT_ARGV"]
            module["RESIDENT_ARGV"] = ["true"]
            try:
                runs = [_one_start(be, sid) for _ in range(reps)]
            finally:
                module["RESIDENT_ARGV"] = saved
                be.destroy(sid)
            kids = sorted(c for c, _ in runs)[reps // 2]
            own = sorted(s for _, s in runs)[reps // 2]
            total = sorted(c + s for c, s in runs)[reps // 2]
            print(
                f"live={target} host_mounts={mounts}: CPU per start p50 {total:.1f} ms "
                f"(children {kids:.1f}, service {own:.1f})",
                flush=True,
            )
    finally:
        for sid in live:
            be.destroy(sid)


if __name__ == "__main__":
    main([int(x) for x in sys.argv[1].split(",")], int(sys.argv[2]) if len(sys.argv) > 2 else 20)
