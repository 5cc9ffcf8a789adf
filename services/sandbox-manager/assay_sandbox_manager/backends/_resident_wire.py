"""The host's half of the resident's wire (deploy/sandbox/resident.c is the other half).

Every message is a frame: a u32 big-endian length, then that many bytes. Requests and
replies are fixed sequences of big-endian integers and length-prefixed byte strings; the
layout is drawn at the top of resident.c, and PROTO_VERSION, said in the resident's hello,
must match it. The resident runs inside the sandbox, so every byte it sends is hostile:
each length is checked against what is left of its frame and against the caps below, and
anything malformed is a ResidentLost (the backend drops that resident).

Errors::

    SandboxError
     ├── ResidentLost          the resident stopped answering, or sent a malformed frame
     │    └── ResidentGone     ... before it read a request: nothing was delivered
     └── ResidentUnavailable   a new resident cannot serve: the sandbox cannot run here
          └── ResidentMismatch the resident speaks another protocol version
"""

from __future__ import annotations

import json
import math
import struct
from typing import NamedTuple

from ._errors import SandboxError

__all__ = [
    "MAX_CAP",
    "MAX_REPLY",
    "PROTO_VERSION",
    "KernelAnswer",
    "Reply",
    "ResidentGone",
    "ResidentLost",
    "ResidentMismatch",
    "ResidentUnavailable",
    "check_hello",
    "exec_request",
    "kernel_answer",
    "lost_reply",
    "parse_reply",
    "python_request",
]

PROTO_VERSION = 1
_MAGIC = b"ASRS"
MAX_CAP = 24 * 1024 * 1024
"""Per output stream (resident.c's MAX_CAP): two of them fit in MAX_REPLY."""
MAX_REPLY = 64 * 1024 * 1024
_MAX_REQUEST = 256 * 1024 * 1024
"""resident.c's MAX_REQUEST: larger stdin or code is refused here, never sent."""
_MAX_KERNEL_REPLY = 1024 * 1024
_MAX_FIGURES = 1000
_RESTARTED = frozenset({"", "new", "reset", "killed", "timeout", "crashed"})
_OP_EXEC, _OP_PYTHON = 1, 2


class ResidentLost(SandboxError):
    """The resident stopped answering (killed, past its deadline, or talking nonsense)."""


class ResidentGone(ResidentLost):
    """The resident was already gone when a request was written: nothing was delivered."""


class ResidentUnavailable(SandboxError):
    """A new resident died before its first answer: the sandbox cannot run commands here
    (a platform fault, e.g. a container that forbids mounting /proc), not the agent's."""


class ResidentMismatch(ResidentUnavailable):
    """The resident in the rootfs speaks another protocol version than this service."""


class Reply(NamedTuple):
    """One answer of the resident, checked against its caps."""

    exit_code: int
    timed_out: bool
    stdout: bytes
    stdout_dropped: int
    stderr: bytes
    stderr_dropped: int
    restarted: str
    kernel_id: str
    kernel_reply: bytes
    """kernel.py's JSON answer to a cell, as the kernel sent it (empty: none)."""


class KernelAnswer(NamedTuple):
    """What kernel.py said about a cell."""

    exit_code: int
    figures: list[str]


def lost_reply(timed_out: bool, note: str) -> Reply:
    """The reply of a resident that was lost mid-request: killed, with a note on stderr."""
    return Reply(137, timed_out, b"", 0, note.encode(), 0, "", "", b"")


def _bytes(data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + data


def _text(s: str) -> bytes:
    # As Python's os functions encode arguments for the sandbox's C.UTF-8 locale.
    return _bytes(s.encode("utf-8", "surrogateescape"))


def _frame(sandbox_id: str, op: int, cap: int, timeout: float, body: list[bytes]) -> bytes:
    timeout_ms = min(max(math.ceil(timeout * 1000), 1), 2**32 - 1)
    payload = b"".join([struct.pack(">BII", op, min(cap, MAX_CAP), timeout_ms), *body])
    if len(payload) > _MAX_REQUEST:
        raise SandboxError(
            f"sandbox {sandbox_id}: a request of {len(payload)} bytes is over the "
            f"resident's {_MAX_REQUEST} (stdin or code too large)"
        )
    return struct.pack(">I", len(payload)) + payload


def exec_request(
    sandbox_id: str,
    argv: list[str],
    env: dict[str, str],
    cwd: str | None,
    stdin: bytes | None,
    timeout: float,
    cap: int,
) -> bytes:
    """The frame asking the resident to run argv."""
    body = [
        struct.pack(">B", 1 if stdin is not None else 0),
        _text(cwd or ""),
        struct.pack(">I", len(argv)),
        *(_text(a) for a in argv),
        struct.pack(">I", len(env)),
        *(_text(k) + _text(v) for k, v in env.items()),
        _bytes(stdin or b""),
    ]
    return _frame(sandbox_id, _OP_EXEC, cap, timeout, body)


def python_request(
    sandbox_id: str, code: str, kernel_id: str | None, reset: bool, timeout: float, cap: int
) -> bytes:
    """The frame asking the resident to run a cell in its kernel."""
    body = [
        struct.pack(">B", 1 if reset else 0),
        _text(kernel_id or ""),
        _bytes(code.encode("utf-8", "surrogateescape")),
    ]
    return _frame(sandbox_id, _OP_PYTHON, cap, timeout, body)


def check_hello(sandbox_id: str, body: bytes) -> None:
    """The resident's first frame: its magic and protocol version."""
    if len(body) != 8 or body[:4] != _MAGIC:
        raise ResidentLost(f"resident sent no hello (got {body[:16]!r})")
    (version,) = struct.unpack(">I", body[4:])
    if version != PROTO_VERSION:
        raise ResidentMismatch(
            f"sandbox {sandbox_id}: its resident speaks protocol version {version}, this "
            f"sandbox-manager version {PROTO_VERSION} (a rootfs of another release?)"
        )


class _Reader:
    """A cursor over one frame that never reads past it."""

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, n: int, what: str) -> bytes:
        if n > len(self.data) - self.pos:
            raise ResidentLost(f"malformed reply from the resident: {what} runs past the frame")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def num(self, fmt: str, what: str) -> int:
        value: int = struct.unpack(fmt, self.take(struct.calcsize(fmt), what))[0]
        return value

    def blob(self, limit: int, what: str) -> bytes:
        n = self.num(">I", what)
        if n > limit:
            raise ResidentLost(
                f"malformed reply from the resident: {what} of {n} bytes (max {limit})"
            )
        return self.take(n, what)

    def text(self, limit: int, what: str) -> str:
        try:
            return self.blob(limit, what).decode("ascii")
        except UnicodeDecodeError as e:
            raise ResidentLost(f"malformed reply from the resident: {what} is not ASCII") from e


def parse_reply(body: bytes, cap: int) -> Reply:
    """Decode one reply frame's body; ResidentLost if it is not one."""
    cap = min(cap, MAX_CAP)
    r = _Reader(body)
    exit_code = r.num(">i", "exit code")
    flags = r.num(">B", "flags")
    out_dropped, out = r.num(">Q", "stdout dropped"), r.blob(cap, "stdout")
    err_dropped, err = r.num(">Q", "stderr dropped"), r.blob(cap, "stderr")
    restarted = r.text(16, "restarted")
    kernel_id = r.text(64, "kernel id")
    kernel_reply = r.blob(_MAX_KERNEL_REPLY, "kernel reply")
    if r.pos != len(body):
        raise ResidentLost(
            f"malformed reply from the resident: {len(body) - r.pos} bytes past its end"
        )
    if flags & ~1 or restarted not in _RESTARTED:
        raise ResidentLost(
            f"malformed reply from the resident: flags {flags}, restarted {restarted!r}"
        )
    return Reply(
        exit_code,
        bool(flags & 1),
        out,
        out_dropped,
        err,
        err_dropped,
        restarted,
        kernel_id,
        kernel_reply,
    )


def kernel_answer(raw: bytes) -> KernelAnswer | None:
    """kernel.py's JSON answer, or None when it is not one (the cell's own code can write
    to the kernel's socket: a bad answer is the cell's failure, not the resident's)."""
    try:
        answer = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    if not isinstance(answer, dict):
        return None
    code, figures = answer.get("exit_code"), answer.get("figures")
    if type(code) is not int or not isinstance(figures, list) or len(figures) > _MAX_FIGURES:
        return None
    if not all(isinstance(f, str) and len(f) <= 4096 for f in figures):
        return None
    return KernelAnswer(code, figures)
