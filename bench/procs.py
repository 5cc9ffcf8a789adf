"""What a benchmarked process costs: memory and CPU time, read from /proc."""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple

__all__ = ["Memory", "Stat", "all_stats", "cpu_s", "memory", "pss_mb", "self_cpu", "stat"]


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


class Stat(NamedTuple):
    """One process as /proc/<pid>/stat shows it."""

    pid: int
    ppid: int
    comm: str
    own_s: float
    """utime + stime: this process only."""
    reaped_s: float
    """cutime + cstime: its children it has waited for."""
    rss_mb: float
    sys_s: float
    """stime: the part of own_s spent in the kernel."""


def stat(pid: int) -> Stat | None:
    """/proc/<pid>/stat of one process; None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    head, tail = text.rsplit(")", 1)
    fields = tail.split()
    tck = os.sysconf("SC_CLK_TCK")
    page_mb = os.sysconf("SC_PAGE_SIZE") / (1024 * 1024)
    return Stat(
        pid,
        int(fields[1]),
        head.split("(", 1)[1],
        (int(fields[11]) + int(fields[12])) / tck,
        (int(fields[13]) + int(fields[14])) / tck,
        int(fields[21]) * page_mb,
        int(fields[12]) / tck,
    )


def all_stats() -> dict[int, Stat]:
    """Every process on the host, by pid."""
    out = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            s = stat(int(entry.name))
            if s is not None:
                out[s.pid] = s
    return out


def pss_mb(pid: int) -> float:
    """Proportional set size (shared pages split among their users), in MiB; 0 when gone."""
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return 0.0
    for line in text.splitlines():
        if line.startswith("Pss:"):
            return float(line.split()[1]) / 1024
    return 0.0
