"""Capped capture of a command's output streams."""

from __future__ import annotations

import threading
from typing import IO

__all__ = ["CappedBuffer", "pump", "truncation_marker"]


def truncation_marker(cap: int, dropped: int) -> bytes:
    """The line appended to capped output, so a reader never mistakes it for the whole."""
    return f"\n[assay: output truncated at {cap} bytes; {dropped} more bytes dropped]\n".encode()


class CappedBuffer:
    """Keeps the first ``cap`` bytes fed to it and counts the rest."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self._buf = bytearray()
        self.dropped = 0

    def feed(self, data: bytes) -> None:
        """Append data, dropping whatever is past the cap."""
        room = self.cap - len(self._buf)
        if room > 0:
            self._buf += data[:room]
        self.dropped += max(0, len(data) - max(room, 0))

    @property
    def truncated(self) -> bool:
        """Whether anything was dropped."""
        return self.dropped > 0

    def value(self) -> bytes:
        """The kept bytes, with the truncation marker when capped."""
        if self.dropped:
            return bytes(self._buf) + truncation_marker(self.cap, self.dropped)
        return bytes(self._buf)


def pump(stream: IO[bytes], sink: CappedBuffer) -> threading.Thread:
    """Drain a pipe into sink on a daemon thread; draining past the cap keeps the writer
    from blocking on a full pipe."""

    def run() -> None:
        with stream:
            while chunk := stream.read1(65536) if hasattr(stream, "read1") else stream.read(65536):
                sink.feed(chunk)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t
