"""Process helpers: exit statuses, limit detection, host-side kill sweeps."""

from __future__ import annotations

import contextlib
import os
import signal
from typing import Literal

__all__ = ["exit_status", "kill_uid_processes", "limit_from_status"]


def exit_status(returncode: int) -> int:
    """Map Popen's -N (killed by signal N) to the shell's 128+N, as Docker reports it."""
    return 128 - returncode if returncode < 0 else returncode


def limit_from_status(status: int) -> Literal["cpu", "file_size", "memory"] | None:
    """Name the rlimit a signal exit points to (SIGXCPU, SIGXFSZ); None otherwise."""
    if status == 128 + signal.SIGXCPU:
        return "cpu"
    if status == 128 + signal.SIGXFSZ:
        return "file_size"
    return None


def kill_uid_processes(uid: int) -> int:
    """SIGKILL every host process whose real uid is uid; returns how many were signalled."""
    n = 0
    with os.scandir("/proc") as entries:
        for entry in entries:
            if not entry.name.isdigit():
                continue
            with contextlib.suppress(OSError):
                if entry.stat(follow_symlinks=False).st_uid == uid:
                    os.kill(int(entry.name), signal.SIGKILL)
                    n += 1
    return n
