"""The resident's side of its channel to the host, and its commands' output streams
(resident_wire.py inside the sandbox).

Each message is a 4-byte big-endian length and a JSON object; bytes travel base64. JSON
goes through json's C half (_json, what json.loads and json.dumps use): importing json
itself would import re and enum at every resident start. Standard library only.
"""

from __future__ import annotations

import _thread
import posix
from _json import encode_basestring_ascii, make_encoder, make_scanner
from binascii import b2a_base64

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


class _Syntax:
    """What json's C scanner reads from its context: json.loads's defaults."""

    strict = True
    object_hook = object_pairs_hook = None
    parse_float, parse_int = float, int
    parse_constant = float  # NaN, Infinity, -Infinity


_SCAN = make_scanner(_Syntax())  # type: ignore[arg-type]


def _unencodable(value: object) -> object:
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


_ENCODE = make_encoder(
    None, _unencodable, encode_basestring_ascii, None, ": ", ", ", False, False, True
)


def loads(text: bytes) -> Any:
    """json.loads of one document without importing json."""
    s = text.decode()
    try:
        value, end = _SCAN(s, 0)
    except StopIteration as e:
        raise ValueError(f"invalid JSON at {e.value}") from None
    if s[end:].strip():
        raise ValueError(f"extra data after JSON at {end}")
    return value


def dumps(value: Any) -> str:
    """json.dumps (ASCII, the default separators) without importing json."""
    return "".join(_ENCODE(value, 0))


def recv(fd: int) -> dict[str, Any] | None:
    head = _read_exact(fd, 4)
    if head is None:
        return None
    body = _read_exact(fd, int.from_bytes(head, "big"))
    return None if body is None else dict(loads(body))


def _read_exact(fd: int, n: int) -> bytes | None:
    buf = b""
    while len(buf) < n:
        chunk = posix.read(fd, n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return buf


def send(fd: int, msg: dict[str, Any]) -> None:
    body = dumps(msg).encode()
    view = memoryview(len(body).to_bytes(4, "big") + body)
    while view:
        view = view[posix.write(fd, view) :]


class Capped:
    """The first ``cap`` bytes of a stream, and how many more were dropped."""

    def __init__(self, cap: int) -> None:
        self.cap, self.kept, self.dropped = cap, bytearray(), 0

    def feed(self, data: bytes) -> None:
        room = self.cap - len(self.kept)
        if room > 0:
            self.kept += data[:room]
        self.dropped += max(0, len(data) - max(room, 0))

    def result(self) -> dict[str, Any]:
        return {"data": b2a_base64(self.kept, newline=False).decode(), "dropped": self.dropped}


def text(s: str, cap: int) -> dict[str, Any]:
    c = Capped(cap)
    c.feed(s.encode())
    return c.result()


def drain_forever(fd: int) -> None:
    """Read and drop whatever a background process still writes, on a daemon thread."""

    def run() -> None:
        try:
            while posix.read(fd, 65536):
                pass
        finally:
            posix.close(fd)

    try:
        _thread.start_new_thread(run, ())
    except RuntimeError:  # no thread to spare (the process limit): the writer gets EPIPE
        posix.close(fd)
