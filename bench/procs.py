"""What a benchmarked process costs: memory and CPU time, read from /proc."""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple

__all__ = ["Memory", "cpu_s", "memory", "self_cpu"]


class Memory(NamedTuple):
    """Resident and peak resident memory, in MiB."""

    rss_mb: float
    hwm_mb: float


def memory(pid: int) -> Memory | None:
    """VmRSS and VmHWM (peak RSS) of one process, in MiB."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    rss, hwm = (float(fields.get(k, "0 kB").split()[0]) / 1024 for k in ("VmRSS", "VmHWM"))
    return Memory(rss, hwm)


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process and its waited-for children (bwrap execs)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = stat.rsplit(")", 1)[1].split()
    ticks = sum(int(fields[i]) for i in (11, 12, 13, 14))  # utime stime cutime cstime
    return ticks / os.sysconf("SC_CLK_TCK")


def self_cpu() -> float:
    """CPU seconds of this process (the scripted model server's thread included)."""
    t = os.times()
    return t.user + t.system
