"""Host end of the resident process each sandbox runs (deploy/sandbox/resident.c, a static
program in the rootfs; _resident_wire.py holds the wire both ends speak).

A backend starts the resident once per sandbox (lazily, so a restarted service starts a
fresh one) and keeps a channel to it; every command and Python cell is one request on
that channel. Requests to one sandbox are served one at a time.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import select
import socket
import struct
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from assay_schemas import GATEWAY_MOUNT, GATEWAY_PORT, GATEWAY_SOCKET

from ._capture import truncation_marker
from ._errors import SandboxError
from ._hostdirs import HostDirs, SandboxMeta
from ._models import ExecResult, PythonResult
from ._procs import limit_from_status
from ._resident_scripts import install_scripts
from ._resident_wire import (
    MAX_CAP,
    MAX_REPLY,
    Reply,
    ResidentGone,
    ResidentLost,
    ResidentMismatch,
    ResidentUnavailable,
    check_hello,
    exec_request,
    kernel_answer,
    lost_reply,
    parse_reply,
    python_request,
)

__all__ = [
    "RESIDENT_ARGV",
    "RESIDENT_BINARY",
    "RESIDENT_DIR",
    "DockerChannel",
    "PipeChannel",
    "ResidentExec",
    "ResidentGone",
    "ResidentLost",
    "ResidentMismatch",
    "ResidentUnavailable",
    "install_scripts",
]

log = logging.getLogger("assay_sandbox_manager.resident")

RESIDENT_DIR = "/run/assay"
"""Where kernel.py is mounted (read-only) inside every sandbox."""
RESIDENT_BINARY = "/usr/libexec/assay/resident"
"""The resident in the rootfs (build-rootfs.sh compiles it there)."""
RESIDENT_ARGV = [
    RESIDENT_BINARY,
    str(GATEWAY_PORT),
    f"{GATEWAY_MOUNT}/{GATEWAY_SOCKET}",
    f"{RESIDENT_DIR}/kernel.py",
]
"""The resident, where it forwards the model gateway and the Python kernel it starts."""
_GRACE_S = 5.0
"""How long past a command's timeout the resident may take to answer before the host
kills it (and with it, on bubblewrap, the whole sandbox)."""
_RESTART_PAUSE_S = 0.25
"""Before the one new start of a resident gone on start: a passing host fault may clear."""


class Channel(Protocol):
    """A byte stream to one resident."""

    def write(self, data: bytes) -> None: ...
    def read_exact(self, n: int, deadline: float) -> bytes: ...
    def close(self) -> None: ...


class PipeChannel:
    """The resident's stdin/stdout pipes (bubblewrap: the bwrap process's own)."""

    def __init__(
        self, proc: subprocess.Popen[bytes], explain: Callable[[int], str] | None = None
    ) -> None:
        assert proc.stdin is not None and proc.stdout is not None
        self.proc = proc
        self._explain = explain
        """Why the process exited with a status, where the backend can tell (else "")."""
        self._in, self._out = proc.stdin.fileno(), proc.stdout.fileno()
        # poll, not select: with hundreds of live sandboxes the pipes' descriptors pass
        # FD_SETSIZE (1024), which select() cannot take.
        self._readable = select.poll()
        self._readable.register(self._out, select.POLLIN)

    def write(self, data: bytes) -> None:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(self._in, view) :]
        except OSError as e:
            raise ResidentGone(f"resident pipe closed: {e}{self._exit_note()}") from e

    def _exit_note(self) -> str:
        try:
            status = self.proc.wait(timeout=1)
        except subprocess.TimeoutExpired:
            return ""
        why = self._explain(status) if self._explain else ""
        return f"; bwrap exited with status {status}{f': {why}' if why else ''}"

    def read_exact(self, n: int, deadline: float) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            left = deadline - time.monotonic()
            if left <= 0 or not self._readable.poll(math.ceil(left * 1000)):
                raise ResidentLost("resident did not answer in time")
            try:
                chunk = os.read(self._out, n - len(buf))
            except OSError as e:  # closed under the read: the sandbox's commands stopped
                raise ResidentLost(f"resident pipe closed: {e}") from e
            if not chunk:
                raise ResidentLost(f"resident exited{self._exit_note()}")
            buf += chunk
        return bytes(buf)

    def close(self) -> None:
        """Kill the bwrap tree (the resident is its PID 1: the namespace goes with it)."""
        import signal

        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.close()
        self.proc.stdout.close()


class DockerChannel:
    """A hijacked `docker exec` socket: raw bytes in, stdout in Docker's 8-byte frames out."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._buf = bytearray()
        self._frame_left = 0

    def write(self, data: bytes) -> None:
        try:
            self.sock.sendall(data)
        except OSError as e:
            raise ResidentLost(f"resident socket closed: {e}") from e

    def read_exact(self, n: int, deadline: float) -> bytes:
        while len(self._buf) < n:
            self._demux(self._recv(deadline))
        out = bytes(self._buf[:n])
        del self._buf[:n]
        return out

    def _recv(self, deadline: float) -> bytes:
        left = deadline - time.monotonic()
        if left <= 0:
            raise ResidentLost("resident did not answer in time")
        self.sock.settimeout(left)
        try:
            chunk = self.sock.recv(65536)
        except TimeoutError as e:
            raise ResidentLost("resident did not answer in time") from e
        except OSError as e:
            raise ResidentLost(f"resident socket failed: {e}") from e
        if not chunk:
            raise ResidentLost("resident exited")
        return chunk

    def _demux(self, chunk: bytes) -> None:
        self._pending = getattr(self, "_pending", b"") + chunk
        while self._pending:
            if self._frame_left == 0:
                if len(self._pending) < 8:
                    return
                self._frame_left = struct.unpack(">I", self._pending[4:8])[0]
                self._pending = self._pending[8:]
                continue
            take = self._pending[: self._frame_left]
            self._buf += take
            self._frame_left -= len(take)
            self._pending = self._pending[len(take) :]

    def close(self) -> None:
        self.sock.close()


def _receive(chan: Channel, deadline: float) -> bytes:
    """One frame's body from the resident."""
    size = struct.unpack(">I", chan.read_exact(4, deadline))[0]
    if size > MAX_REPLY:
        raise ResidentLost(f"resident sent an oversized reply ({size} bytes)")
    return chan.read_exact(size, deadline)


class ResidentExec:
    """exec and python through a per-sandbox resident; mixed into both backends."""

    dirs: HostDirs
    _residents: dict[str, Channel]
    _ready: set[str]
    """Sandboxes whose resident said hello: it reads requests (it may have run some)."""
    _locks: dict[str, threading.Lock]
    _guard: threading.Lock

    def _start_resident(self, sandbox_id: str, meta: SandboxMeta) -> Channel:
        raise NotImplementedError

    def _on_lost(self, sandbox_id: str) -> None:
        """Called when a resident was lost mid-request (after it is closed)."""

    def _init_residents(self) -> None:
        self._residents, self._locks, self._guard = {}, {}, threading.Lock()
        self._ready = set()

    def _request(
        self, sandbox_id: str, meta: SandboxMeta, frame: bytes, timeout: float, cap: int
    ) -> Reply:
        with self._guard:
            lock = self._locks.setdefault(sandbox_id, threading.Lock())
        with lock:
            fresh = sandbox_id not in self._ready
            deadline = time.monotonic() + timeout + _GRACE_S
            try:
                try:
                    return self._exchange(sandbox_id, meta, frame, deadline, cap)
                except ResidentGone as e:
                    if not fresh:
                        raise
                    # A new resident that was gone before its hello read nothing and ran
                    # nothing, so starting it once more is safe (seen twice in CI runs, the
                    # second time as a failed cgroup join; a start remakes the groups).
                    log.warning(
                        "sandbox %s: resident gone on start (%s); starting it again", sandbox_id, e
                    )
                    self._drop_resident(sandbox_id)
                    time.sleep(_RESTART_PAUSE_S)
                    return self._exchange(sandbox_id, meta, frame, deadline, cap)
            except ResidentMismatch:
                self._drop_resident(sandbox_id)
                raise
            except ResidentLost as e:
                self._drop_resident(sandbox_id)
                self._on_lost(sandbox_id)
                timed_out = time.monotonic() >= deadline
                if fresh and not timed_out:
                    raise ResidentUnavailable(
                        f"sandbox {sandbox_id}: its command server died on start ({e})"
                    ) from e
                note = f"[assay: the sandbox's command server was lost ({e}); background processes and Python state are gone]\n"
                return lost_reply(timed_out, note)

    def _exchange(
        self, sandbox_id: str, meta: SandboxMeta, frame: bytes, deadline: float, cap: int
    ) -> Reply:
        """One request and its reply, starting the sandbox's resident when it has none."""
        chan = self._residents.get(sandbox_id)
        if chan is None:
            chan = self._residents[sandbox_id] = self._start_resident(sandbox_id, meta)
        if sandbox_id not in self._ready:
            try:
                hello = _receive(chan, deadline)
            except ResidentLost as e:
                raise ResidentGone(f"resident was never ready: {e}") from e
            check_hello(sandbox_id, hello)  # from now on it reads requests
            self._ready.add(sandbox_id)
        chan.write(frame)
        return parse_reply(_receive(chan, deadline), cap)

    def stop_commands(self, sandbox_id: str) -> None:
        """Kill the sandbox's resident and whatever it runs; the next command starts a new
        one. Its files stay."""
        self._drop_resident(sandbox_id)

    def _drop_resident(self, sandbox_id: str) -> None:
        self._ready.discard(sandbox_id)
        chan = self._residents.pop(sandbox_id, None)
        if chan is not None:
            chan.close()

    def exec(
        self,
        sandbox_id: str,
        command: list[str] | str,
        *,
        timeout_s: float | None = None,
        stdin: bytes | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
    ) -> ExecResult:
        """Run one command through the sandbox's resident."""
        # Read once per command (a file and a validation): a sandbox's meta never changes.
        meta = self.dirs.meta(sandbox_id)
        spec = meta.spec
        timeout = timeout_s if timeout_s is not None else spec.exec_timeout_s
        argv = ["/bin/sh", "-c", command] if isinstance(command, str) else list(command)
        if not argv:
            raise SandboxError(f"sandbox {sandbox_id}: empty command")
        cap = min(spec.output_cap_bytes, MAX_CAP)
        t0 = time.monotonic()
        frame = exec_request(sandbox_id, argv, dict(env or {}), cwd, stdin, timeout, cap)
        reply = self._request(sandbox_id, meta, frame, timeout, cap)
        return ExecResult(**_fields(reply, reply.exit_code, cap, t0))

    def python(
        self,
        sandbox_id: str,
        code: str,
        *,
        timeout_s: float | None = None,
        reset: bool = False,
        kernel_id: str | None = None,
    ) -> PythonResult:
        """Run a cell in the sandbox's Python kernel (a new one if reset or kernel_id differs)."""
        meta = self.dirs.meta(sandbox_id)
        spec = meta.spec
        timeout = timeout_s if timeout_s is not None else spec.exec_timeout_s
        cap = min(spec.output_cap_bytes, MAX_CAP)
        t0 = time.monotonic()
        frame = python_request(sandbox_id, code, kernel_id, reset, timeout, cap)
        reply = self._request(sandbox_id, meta, frame, timeout, cap)
        exit_code, figures, note = reply.exit_code, list[str](), b""
        if reply.kernel_reply:
            answer = kernel_answer(reply.kernel_reply)
            if answer is None:
                exit_code, note = 1, b"[assay: the Python kernel's answer was malformed]\n"
            else:
                exit_code, figures = answer
        fields = _fields(reply, exit_code, cap, t0)
        fields["stderr"] += note
        return PythonResult(
            **fields, kernel_id=reply.kernel_id, restarted=reply.restarted, figures=figures
        )


def _stream(kept: bytes, dropped: int, cap: int) -> tuple[bytes, bool]:
    return (kept + truncation_marker(cap, dropped), True) if dropped else (kept, False)


def _fields(reply: Reply, status: int, cap: int, t0: float) -> dict[str, Any]:
    stdout, out_cut = _stream(reply.stdout, reply.stdout_dropped, cap)
    stderr, err_cut = _stream(reply.stderr, reply.stderr_dropped, cap)
    return {
        "exit_code": status,
        "stdout": stdout,
        "stderr": stderr,
        "timed_out": reply.timed_out,
        "stdout_truncated": out_cut,
        "stderr_truncated": err_cut,
        "duration_ms": (time.monotonic() - t0) * 1000,
        "limit": "timeout" if reply.timed_out else limit_from_status(status),
    }
