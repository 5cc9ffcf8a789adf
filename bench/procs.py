"""What a benchmarked process costs: memory and CPU time, read from /proc."""

from __future__ import annotations

import os
import resource
import threading
from pathlib import Path
from typing import NamedTuple

__all__ = [
    "Memory",
    "Sampler",
    "Stat",
    "all_stats",
    "cpu_s",
    "machine_busy_s",
    "memory",
    "on_cpu_s",
    "pss_mb",
    "rusage_ms",
    "self_cpu",
    "stat",
]


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


def machine_busy_s(text: str | None = None) -> float:
    """CPU seconds every core of this machine has spent busy since boot, whoever used them
    (/proc/stat's first line: user, nice, system, irq and softirq; idle, I/O wait and time
    the hypervisor gave to other guests left out)."""
    if text is None:
        text = Path("/proc/stat").read_text()
    first = text.split("\n", 1)[0].split()
    if not first or first[0] != "cpu":
        raise ValueError("/proc/stat does not start with the cpu line")
    user, nice, system, _idle, _iowait, irq, softirq = (int(v) for v in first[1:8])
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def rusage_ms(who: int) -> float:
    """User + system CPU milliseconds from getrusage (RUSAGE_SELF, or RUSAGE_CHILDREN: the
    children waited for), to the microsecond."""
    r = resource.getrusage(who)
    return (r.ru_utime + r.ru_stime) * 1000


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


def on_cpu_s(pid: int) -> float | None:
    """Seconds on a CPU so far, to the nanosecond (/proc/<pid>/schedstat); None when gone.

    For the short-lived sandbox processes: /proc/<pid>/stat counts whole clock ticks,
    rounding each of user and system time down, so a process that ran 7 ms shows 0 and
    a thousand sandboxes' CPU would vanish from the sum."""
    try:
        return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0]) / 1e9
    except (OSError, ValueError, IndexError):
        return None


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


class Sampler:
    """Samples /proc every interval on a thread: services' CPU and memory, and the live
    sandboxes under one parent (bwrap and the resident; an agent's commands are left out)."""

    def __init__(self, services: dict[str, int], sandbox_parent: int, interval: float = 1.0):
        self.services = services
        self.parent = sandbox_parent
        self.interval = interval
        self.start_cpu = {k: self._own(p) for k, p in services.items()}
        self.start_sys = {k: self._sys(p) for k, p in services.items()}
        self.sys_s: dict[str, float] = {}
        """Of each service's CPU seconds, those in the kernel."""
        self.last_own: dict[int, tuple[str, float]] = {}
        """Each sandbox process seen: its kind and its own CPU seconds when last seen
        (nanosecond-exact, see on_cpu_s)."""
        self.peak_live = 0
        self.sandbox_rss: list[float] = []
        self.sandbox_pss: list[float] = []
        """Per live sandbox (bwrap + resident), in the sample with the most live sandboxes."""
        self.service_rss: dict[str, float] = dict.fromkeys(services, 0.0)
        self.machine_s = 0.0
        """The whole machine's busy CPU seconds between start and stop."""
        self._machine0 = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    @staticmethod
    def _own(pid: int) -> float:
        s = stat(pid)
        return s.own_s if s else 0.0

    @staticmethod
    def _sys(pid: int) -> float:
        s = stat(pid)
        return s.sys_s if s else 0.0

    def start(self) -> None:
        self._machine0 = machine_busy_s()
        self._thread.start()

    def stop(self) -> dict[str, float]:
        """Stop sampling; CPU seconds since start by part."""
        self._stop.set()
        self._thread.join()
        self.machine_s = machine_busy_s() - self._machine0
        self._sample()
        cpu = {k: self._own(p) - self.start_cpu[k] for k, p in self.services.items()}
        self.sys_s = {k: self._sys(p) - self.start_sys[k] for k, p in self.services.items()}
        for kind in ("bwrap", "resident"):
            cpu[f"sandboxes: {kind}"] = sum(s for k, s in self.last_own.values() if k == kind)
        return cpu

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    def _sample(self) -> None:
        procs = all_stats()
        for label, pid in self.services.items():
            s = procs.get(pid)
            if s is not None:
                self.service_rss[label] = max(self.service_rss[label], s.rss_mb)
        children: dict[int, list[int]] = {}
        for s in procs.values():
            children.setdefault(s.ppid, []).append(s.pid)
        trees = []
        for top in children.get(self.parent, []):
            tree, todo = [], [top]
            while todo:
                pid = todo.pop()
                tree.append(pid)
                todo += children.get(pid, [])
            trees.append(tree)
        rss, pss = [], []
        for tree in trees:
            kept = []
            for pid in tree:
                kind = _kind(procs[pid].comm)
                if kind:
                    ran = on_cpu_s(pid)
                    self.last_own[pid] = (kind, procs[pid].own_s if ran is None else ran)
                    kept.append(pid)
            if any(self.last_own[p][0] == "resident" for p in kept):
                rss.append(sum(procs[p].rss_mb for p in kept))
                pss.append(sum(pss_mb(p) for p in kept))
        if len(rss) >= self.peak_live:
            self.peak_live, self.sandbox_rss, self.sandbox_pss = len(rss), rss, pss


def _kind(comm: str) -> str:
    """bwrap, resident, or "" (an agent's command, or a start not yet exec'd)."""
    if comm in ("bwrap", "resident"):
        return comm
    return ""
