"""Sampling profiles of benchmarked service processes (py-spy), summed by function.

``py-spy record -f raw`` writes one collapsed stack per line (``frame;frame;... count``);
the summary counts, per function, the samples where it is the innermost frame (self) and
those where it is anywhere on the stack (inclusive), as shares of the process's samples.
py-spy is a tool, not a dependency: without it on the PATH (or beside this interpreter)
profiling is refused with a message.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

__all__ = ["Hot", "profiled", "summarize"]

_LINE = re.compile(r" \([^()]*:\d+\)$")


class Hot(NamedTuple):
    """One function's share of a process's samples."""

    function: str
    self_share: float
    inclusive_share: float


def _py_spy() -> str:
    found = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not os.access(found, os.X_OK):
        raise RuntimeError("profiling needs py-spy: `python -m pip install py-spy`")
    return found


@contextlib.contextmanager
def profiled(pids: dict[str, int], folder: Path, rate: int = 50) -> Iterator[dict[str, Path]]:
    """py-spy on each process while the block runs; the raw profile of each label."""
    folder.mkdir(parents=True, exist_ok=True)
    tool = _py_spy()
    outs = {label: folder / f"{label}.txt" for label in pids}
    spies = []
    for label, pid in pids.items():
        args = [tool, "record", "--pid", str(pid), "-f", "raw", "-r", str(rate)]
        args += ["--nonblocking", "--gil", "-o", str(outs[label])]
        spies.append(subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    try:
        yield outs
    finally:
        for spy in spies:
            with contextlib.suppress(ProcessLookupError):
                spy.send_signal(signal.SIGINT)
        for spy in spies:
            try:
                spy.wait(30)
            except subprocess.TimeoutExpired:
                spy.kill()


def summarize(raw: Path, top: int = 15) -> list[Hot]:
    """The functions with the most samples (self first), from one raw profile."""
    selfs: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = 0
    with contextlib.suppress(OSError), raw.open() as f:
        for line in f:
            stack, _, count = line.rstrip("\n").rpartition(" ")
            if not stack or not count.isdigit():
                continue
            n = int(count)
            total += n
            frames = [_LINE.sub("", fr) for fr in stack.split(";")]
            selfs[frames[-1]] += n
            for fr in set(frames):
                inclusive[fr] += n
    if not total:
        return []
    return [Hot(fn, n / total, inclusive[fn] / total) for fn, n in selfs.most_common(top)]


def inclusive_of(raw: Path, needles: tuple[str, ...]) -> dict[str, float]:
    """Inclusive shares of the functions whose names contain each needle."""
    shares: Counter[str] = Counter()
    total = 0
    with contextlib.suppress(OSError), raw.open() as f:
        for line in f:
            stack, _, count = line.rstrip("\n").rpartition(" ")
            if not stack or not count.isdigit():
                continue
            total += int(count)
            for needle in needles:
                if needle in stack:
                    shares[needle] += int(count)
    return {k: v / total for k, v in shares.items()} if total else {}


def top_inclusive(raw: Path, top: int = 30) -> list[tuple[str, float]]:
    """The functions most often anywhere on the stack, with their shares."""
    inclusive: Counter[str] = Counter()
    total = 0
    with contextlib.suppress(OSError), raw.open() as f:
        for line in f:
            stack, _, count = line.rstrip("\n").rpartition(" ")
            if not stack or not count.isdigit():
                continue
            total += int(count)
            for fr in {_LINE.sub("", fr) for fr in stack.split(";")}:
                inclusive[fr] += int(count)
    return [(fn, n / total) for fn, n in inclusive.most_common(top)] if total else []


def main() -> None:
    """Print the summary of each raw profile named on the command line."""
    for name in sys.argv[1:]:
        print(f"== {name}: self")
        for hot in summarize(Path(name)):
            print(f"  {hot.self_share:6.1%} {hot.inclusive_share:6.1%}  {hot.function}")
        print(f"== {name}: inclusive")
        for fn, share in top_inclusive(Path(name), 40):
            print(f"  {share:6.1%}  {fn}")


if __name__ == "__main__":
    main()
