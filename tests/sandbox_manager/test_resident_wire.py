"""Attacks on the resident's wire: a hostile resident (it runs inside the sandbox) sending
crafted frames to the host, and malformed requests sent to the real resident program."""

from __future__ import annotations

import os
import re
import struct
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from assay_sandbox_manager.backends import ResidentUnavailable, SandboxError, SandboxSpec
from assay_sandbox_manager.backends import _resident_wire as wire
from assay_sandbox_manager.backends._resident import (
    RESIDENT_BINARY,
    Channel,
    PipeChannel,
    ResidentExec,
    ResidentLost,
)

HELLO = struct.pack(">I", 8) + b"ASRS" + struct.pack(">I", wire.PROTO_VERSION)


def _blob(data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + data


def _reply_body(
    code: int = 0, out: bytes = b"", err: bytes = b"", restarted: bytes = b"", kid: bytes = b""
) -> bytes:
    """A reply body laid out as resident.c's header comment draws it (written here anew)."""
    return (
        struct.pack(">iBQ", code, 0, 0)
        + _blob(out)
        + struct.pack(">Q", 0)
        + _blob(err)
        + _blob(restarted)
        + _blob(kid)
        + _blob(b"")
    )


def _frame(body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + body


# -- the host's decoder, fed crafted bodies ---------------------------------------------


def test_a_well_formed_reply_decodes() -> None:
    r = wire.parse_reply(_reply_body(3, b"out", b"err", b"new", b"k1-2"), 4096)
    assert (r.exit_code, r.stdout, r.stderr, r.restarted, r.kernel_id) == (
        3,
        b"out",
        b"err",
        "new",
        "k1-2",
    )


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b"", "exit code runs past"),
        (_reply_body()[:-3], "kernel reply runs past"),
        (_reply_body() + b"x", "1 bytes past its end"),
        # stdout's length says 4 GiB: refused on the number, nothing is allocated for it
        (struct.pack(">iBQI", 0, 0, 0, 0xFFFFFFFF), "stdout of 4294967295 bytes"),
        (_reply_body(out=b"a" * 5000), "stdout of 5000 bytes \\(max 4096\\)"),
        (_reply_body(restarted=b"because"), "restarted 'because'"),
        (_reply_body(kid=b"\xff\xfe"), "kernel id is not ASCII"),
        (struct.pack(">iBQ", 0, 7, 0) + _reply_body()[13:], "flags 7"),
    ],
)
def test_malformed_replies_are_a_lost_resident(body: bytes, says: str) -> None:
    with pytest.raises(ResidentLost, match=says):
        wire.parse_reply(body, 4096)


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"[]",
        b"{",
        b'{"exit_code": "0", "figures": []}',
        b'{"exit_code": true, "figures": []}',
        b'{"exit_code": 0, "figures": [1]}',
        b"[" * 100000,
    ],
)
def test_a_malformed_kernel_answer_is_refused(raw: bytes) -> None:
    assert wire.kernel_answer(raw) is None


def test_a_request_over_the_residents_bound_is_never_sent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(wire, "_MAX_REQUEST", 1000)
    with pytest.raises(SandboxError, match="over the resident's 1000"):
        wire.exec_request("sb", ["cat"], {}, None, b"x" * 2000, 1.0, 4096)


# -- a hostile resident on a real channel -----------------------------------------------

_FAKE = """
import struct, sys, time
frames = [bytes.fromhex(x) for x in open(sys.argv[1]).read().split()]
out, inp = sys.stdout.buffer, sys.stdin.buffer
out.write(frames[0]); out.flush()
for f in frames[1:]:
    head = inp.read(4)
    if len(head) < 4:
        sys.exit(0)
    inp.read(struct.unpack(">I", head)[0])
    out.write(f); out.flush()
if sys.argv[2] == "hang":
    time.sleep(3600)
"""


class _Dirs:
    def meta(self, sandbox_id: str) -> Any:
        return SimpleNamespace(spec=SandboxSpec(output_cap_bytes=4096))


class _Hostile(ResidentExec):
    """A backend whose 'resident' is a script writing the given frames, one per request."""

    name = "hostile"

    def __init__(self, tmp: Path, frames: list[bytes], then: str = "exit") -> None:
        self.dirs = _Dirs()  # type: ignore[assignment]
        self._init_residents()
        self.script = tmp / "frames"
        self.script.write_text(" ".join(f.hex() for f in frames))
        self.then = then
        self.starts = 0

    def _start_resident(self, sandbox_id: str, meta: Any) -> Channel:
        self.starts += 1
        proc = subprocess.Popen(
            [sys.executable, "-c", _FAKE, str(self.script), self.then],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            start_new_session=True,
        )
        return PipeChannel(proc)


def test_a_resident_of_another_version_is_named(tmp_path: Path) -> None:
    other = struct.pack(">I", 8) + b"ASRS" + struct.pack(">I", 99)
    be = _Hostile(tmp_path, [other])
    with pytest.raises(
        ResidentUnavailable,
        match=f"protocol version 99, this sandbox-manager version {wire.PROTO_VERSION}",
    ):
        be.exec("sb", "true")
    assert "sb" not in be._residents


def test_a_resident_without_a_hello_is_unavailable(tmp_path: Path) -> None:
    be = _Hostile(tmp_path, [_frame(b'{"ready": true}')])
    with pytest.raises(ResidentUnavailable, match="no hello"):
        be.exec("sb", "true")


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        (struct.pack(">I", 0xFFFFFFFF), "oversized reply \\(4294967295 bytes\\)"),
        (_frame(_reply_body())[:-5], "resident exited"),
        (_frame(b"\x00garbage"), "malformed reply"),
    ],
)
def test_a_hostile_reply_loses_the_resident_and_says_why(
    tmp_path: Path, bad: bytes, says: str
) -> None:
    be = _Hostile(tmp_path, [HELLO, _frame(_reply_body(0, b"fine\n")), bad])
    first = be.exec("sb", "true")
    assert (first.exit_code, first.stdout) == (0, b"fine\n")
    t0 = time.monotonic()
    lost = be.exec("sb", "true", timeout_s=5)
    assert lost.exit_code == 137 and not lost.timed_out, lost
    assert b"command server was lost" in lost.stderr
    assert time.monotonic() - t0 < 3, "a hostile reply was waited on"
    assert re.search(says, lost.stderr.decode()), lost.stderr
    assert "sb" not in be._residents


def test_a_truncated_reply_from_a_resident_that_hangs_ends_at_the_deadline(tmp_path: Path) -> None:
    be = _Hostile(tmp_path, [HELLO, _frame(_reply_body()), _frame(_reply_body())[:-5]], then="hang")
    assert be.exec("sb", "true").exit_code == 0
    t0 = time.monotonic()
    lost = be.exec("sb", "true", timeout_s=0.2)
    assert lost.exit_code == 137 and lost.timed_out, lost
    assert time.monotonic() - t0 < 10, "the host waited past timeout + grace"


# -- the real resident program, sent malformed requests ----------------------------------


def test_the_resident_survives_malformed_requests(rootfs: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("a PID namespace of its own needs root")
    binary = rootfs / RESIDENT_BINARY.lstrip("/")
    # In a PID namespace of its own, as in a sandbox: a timeout's kill(-1) must not reach
    # the host's processes.
    proc = subprocess.Popen(
        [
            "unshare",
            "--pid",
            "--fork",
            "--kill-child",
            str(binary),
            "18080",
            "/nonexistent/gateway.sock",
            "/nonexistent/kernel.py",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        cwd="/",
        start_new_session=True,
    )
    chan = PipeChannel(proc)
    deadline = time.monotonic() + 30

    def ask(frame: bytes) -> wire.Reply:
        chan.write(frame)
        size = struct.unpack(">I", chan.read_exact(4, deadline))[0]
        return wire.parse_reply(chan.read_exact(size, deadline), 4096)

    try:
        size = struct.unpack(">I", chan.read_exact(4, deadline))[0]
        wire.check_hello("sb", chan.read_exact(size, deadline))
        head = struct.pack(">BII", 1, 4096, 1000)
        # an exec's head (op, cap, timeout), no stdin, an empty cwd; then argv ["true"]
        exec_head = head + b"\x00" + _blob(b"")
        run_true = exec_head + struct.pack(">I", 1) + _blob(b"true")
        attacks = [
            _frame(b""),  # no op at all
            _frame(struct.pack(">BII", 9, 4096, 1000)),  # unknown op
            _frame(exec_head + struct.pack(">I", 0xFFFFFFFF)),  # argc 4G
            _frame(exec_head + struct.pack(">I", 1) + struct.pack(">I", 0x7FFFFFFF)),
            _frame(exec_head + struct.pack(">I", 1) + _blob(b"ec\x00ho")),  # NUL
            # "=" in an environment key; bytes after the body
            _frame(run_true + struct.pack(">I", 1) + _blob(b"A=B") + _blob(b"v") + _blob(b"")),
            _frame(run_true + struct.pack(">I", 0) + _blob(b"") + b"trailing"),
            _frame(struct.pack(">BII", 2, 4096, 1000) + b"\x00" + struct.pack(">I", 0xFFFFFFF0)),
        ]
        for attack in attacks:
            r = ask(attack)
            assert r.exit_code == 126 and r.stderr.startswith(b"resident: "), r
        ok = ask(wire.exec_request("sb", ["echo", "still here"], {}, "/", None, 5, 4096))
        assert (ok.exit_code, ok.stdout) == (0, b"still here\n")
    finally:
        chan.close()
