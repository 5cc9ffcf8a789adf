"""The fork bomb of issue #54, and how to find what is left of it on the host."""

from __future__ import annotations

from pathlib import Path

BOMB = "timeout 15 bash -c ':(){ :|:& };:'"
"""The issue's bomb: `timeout` kills its process group at 15 s, and the forks it races
keep re-forking until the command's own timeout."""


def tagged_processes(tag: str) -> list[int]:
    """Host pids whose environment carries the tag (root reads every environ)."""
    needle = f"ASSAY_BOMB_TAG={tag}".encode()
    found = []
    for env in Path("/proc").glob("[0-9]*/environ"):
        try:
            if needle in env.read_bytes():
                found.append(int(env.parent.name))
        except OSError:
            continue
    return found
