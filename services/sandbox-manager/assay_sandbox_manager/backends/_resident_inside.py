"""The resident: one process inside each sandbox that runs commands and Python cells.

Runs with the sandbox's own python3 and the standard library only; the sandbox-manager
bind-mounts this file read-only (as resident_serve.py, started by resident.py) and holds
its stdin/stdout (messages as in resident_wire.py). It first says ``{"ready": true}``,
then serves requests one at a time. A command runs in a session of its own; it ends when
it exits, or at its timeout, when every process in the sandbox but this one is killed
(SIGKILL to -1). Processes left in the background by a command that exited keep running.
Python cells go to kernel.py (_kernel_inside.py on the host), one long-lived interpreter
started on first use.

Lean on purpose: one starts per sandbox and serves few commands, so its start is most of
its cost. It imports only modules built in or loading no others (the C halves of os,
signal, threading and json: the modules themselves, with typing and socket, cost more CPU
at each start than the commands it then runs), and it sleeps until a request or a child's
exit (SIGCHLD through a wakeup pipe), never on a timer.
"""

from __future__ import annotations

import posix
import select
import sys
import time
from binascii import a2b_base64

TYPE_CHECKING = False
if TYPE_CHECKING:
    import signal
    import socket
    from typing import Any

    from ._resident_wire_inside import Capped, drain_forever, dumps, loads, recv, send, text
else:
    import _signal as signal  # loaded at start already; signal.py would import enum

    from resident_wire import Capped, drain_forever, dumps, loads, recv, send, text

_GRACE_S = 0.05
"""How long a cell's output is still read after the kernel answers while a process the
cell started keeps the pipes open; the rest is drained and dropped so that the writer
never blocks. A command, as before, ends only when its output closes: a background
process must redirect its output to outlive the command."""
_CTL_IN, _CTL_OUT = 3, 4
_DEFAULT_SIGNALS = (signal.SIGPIPE, signal.SIGXFSZ)
_DEVNULL = "/dev/null"
_HERE = __file__.rpartition("/")[0]
_ENVIRON = {
    k.decode(errors="surrogateescape"): v.decode(errors="surrogateescape")
    for k, v in posix.environ.items()
}
"""os.environ, as os would decode it (the sandbox's locale is C.UTF-8)."""


class _Children:
    """Reaps every child (orphans too, when this is PID 1), remembering exit statuses.

    ``wake`` becomes readable when a child exits (SIGCHLD, through the signal module's
    wakeup fd): a poll on it replaces polling waitpid on a timer.
    """

    def __init__(self) -> None:
        self.exited: dict[int, int] = {}
        self.wake, w = posix.pipe()
        posix.set_blocking(self.wake, False)
        posix.set_blocking(w, False)
        signal.set_wakeup_fd(w, warn_on_full_buffer=False)
        # A Python handler (one that does nothing) is what makes the wakeup fd hear SIGCHLD.
        signal.signal(signal.SIGCHLD, lambda _sig, _frame: None)

    def woken(self) -> None:
        """Empty the wakeup pipe, then reap."""
        try:
            while posix.read(self.wake, 4096):
                pass
        except BlockingIOError:
            pass
        self.reap()

    def wait_for(self, pid: int) -> None:
        """Block until pid (a child sent SIGKILL) has exited, reaping any other child too."""
        while pid not in self.exited and self._collect(0):
            pass

    def wait_all(self) -> None:
        """Block until no child is left (after SIGKILL to all): the killed processes no
        longer count against the process limit when the next command starts."""
        while self._collect(0):
            pass

    def reap(self) -> None:
        while self._collect(posix.WNOHANG):
            pass

    def _collect(self, options: int) -> bool:
        """One waitpid(-1); False when no child is left or (WNOHANG) none has exited."""
        try:
            pid, status = posix.waitpid(-1, options)
        except ChildProcessError:
            return False
        if pid:
            self.exited[pid] = posix.waitstatus_to_exitcode(status)
        return pid != 0


def _pump(
    children: _Children,
    pid: int,
    outputs: dict[int, Capped],
    feed: tuple[int, bytes] | None,
    deadline: float,
    done_fd: int | None = None,
) -> tuple[bool, bytes]:
    """Move bytes until pid exits (or done_fd is readable) and the pipes close.

    Returns (finished, what done_fd sent); finished is False when the deadline passed.
    """
    poll = select.poll()
    open_fds = dict(outputs)
    for fd in open_fds:
        poll.register(fd, select.POLLIN)
    poll.register(children.wake, select.POLLIN)
    if done_fd is not None:
        poll.register(done_fd, select.POLLIN)
    if feed is not None:
        posix.set_blocking(feed[0], False)
        poll.register(feed[0], select.POLLOUT)
    pending = memoryview(feed[1]) if feed else memoryview(b"")
    finished_at: float | None = None
    reply = b""
    try:
        while open_fds or finished_at is None:
            now = time.monotonic()
            if (finished_at is None or done_fd is None) and now >= deadline:
                return False, b""
            if finished_at is not None and done_fd is not None and now >= finished_at + _GRACE_S:
                break
            limit = deadline if finished_at is None or done_fd is None else finished_at + _GRACE_S
            # Until output, a child's exit (pid's, or an orphan's to reap) or the limit.
            for fd, _ev in poll.poll(int(max(0.0, limit - now) * 1000) + 1):
                if fd == children.wake:
                    children.woken()
                elif fd in open_fds:
                    chunk = posix.read(fd, 65536)
                    if chunk:
                        open_fds[fd].feed(chunk)
                    else:
                        poll.unregister(fd)
                        del open_fds[fd]
                elif feed is not None and fd == feed[0]:
                    try:
                        pending = pending[posix.write(fd, pending) :]
                    except BrokenPipeError:
                        pending = memoryview(b"")
                    except BlockingIOError:
                        pass
                    if not pending:
                        poll.unregister(fd)
                        posix.close(fd)
                        feed = None
                elif fd == done_fd and finished_at is None:
                    reply = posix.read(fd, 1 << 20)
                    finished_at = time.monotonic()
            if finished_at is None and pid in children.exited:
                if done_fd is not None:
                    return True, b""  # the kernel died mid-cell
                finished_at = time.monotonic()
        return True, reply
    finally:
        if feed is not None:
            posix.close(feed[0])
        for fd in open_fds:
            drain_forever(fd)


def _which(name: str, env: dict[str, str]) -> str:
    if "/" in name:
        return name
    for d in env.get("PATH", "/usr/bin:/bin").split(":"):
        path = f"{d.rstrip('/') if d else '.'}/{name}"
        if posix.access(path, posix.X_OK) and not _isdir(path):
            return path
    raise FileNotFoundError(f"{name}: command not found")


def _isdir(path: str) -> bool:
    """os.path.isdir."""
    try:
        return posix.stat(path).st_mode & 0o170000 == 0o040000
    except (OSError, ValueError):
        return False


def _spawn(
    argv: list[str], env: dict[str, str], cwd: str, fds: tuple[int, int, int], extra: int = -1
) -> int:
    """posix_spawn in a new session with fds as 0, 1, 2 (and extra as 3)."""
    actions = [(posix.POSIX_SPAWN_DUP2, fd, n) for n, fd in enumerate(fds)]
    if extra >= 0:
        actions.append((posix.POSIX_SPAWN_DUP2, extra, 3))
    path = _which(argv[0], env)
    posix.chdir(cwd)
    try:
        # Python ignores SIGPIPE and SIGXFSZ; a command gets the defaults back (the file
        # size limit must kill it, as it would outside).
        return posix.posix_spawn(
            path, argv, env, file_actions=actions, setsid=True, setsigdef=_DEFAULT_SIGNALS
        )
    finally:
        posix.chdir("/")


def _kill_all() -> None:
    """SIGKILL every process this one may signal: all of the sandbox but PID 1 and itself."""
    try:  # noqa: SIM105 (contextlib would be one more import at every start)
        posix.kill(-1, signal.SIGKILL)
    except ProcessLookupError:
        pass


class Resident:
    """Serves requests from the sandbox-manager until its pipe closes."""

    def __init__(self) -> None:
        self.children = _Children()
        self.kernel: tuple[int, socket.socket, str] | None = None
        self.kernel_lost = ""
        self.cells = 0

    def exec(self, req: dict[str, Any]) -> dict[str, Any]:
        env = {**_ENVIRON, **req.get("env", {})}
        out, err = Capped(req["cap"]), Capped(req["cap"])
        out_r, out_w = posix.pipe()
        err_r, err_w = posix.pipe()
        stdin = req.get("stdin")
        in_r, in_w = (
            posix.pipe() if stdin is not None else (posix.open(_DEVNULL, posix.O_RDONLY), -1)
        )
        try:
            pid = _spawn(req["argv"], env, req.get("cwd") or "/workspace", (in_r, out_w, err_w))
        except OSError as e:
            for fd in (out_r, out_w, err_r, err_w, in_r, in_w):
                if fd >= 0:
                    posix.close(fd)
            return {"exit_code": 127, "stdout": out.result(), "stderr": text(f"{e}\n", req["cap"])}
        for fd in (out_w, err_w, in_r):
            posix.close(fd)
        feed = (in_w, a2b_base64(stdin)) if stdin is not None else None
        finished, _ = _pump(
            self.children, pid, {out_r: out, err_r: err}, feed, time.monotonic() + req["timeout"]
        )
        if not finished:
            _kill_all()
            self.children.wait_all()
        code = self.children.exited.pop(pid)
        code = -signal.SIGKILL if not finished else code
        return {
            "exit_code": 128 - code if code < 0 else code,
            "timed_out": not finished,
            "stdout": out.result(),
            "stderr": err.result(),
        }

    def python(self, req: dict[str, Any]) -> dict[str, Any]:
        restarted = ""
        if self.kernel is not None and self.kernel[0] in self.children.exited:
            # Killed between cells (a command's timeout sweep, the memory limit, ...).
            self.children.exited.pop(self.kernel[0])
            self.kernel[1].close()
            self.kernel, self.kernel_lost = None, "killed"
        if req.get("reset") or self.kernel is None or self.kernel[2] != req.get("kernel_id"):
            restarted = self.kernel_lost or ("reset" if req.get("reset") else "new")
            self._stop_kernel()
            self._start_kernel()
        assert self.kernel is not None
        pid, sock, kernel_id = self.kernel
        out, err = Capped(req["cap"]), Capped(req["cap"])
        code_r, code_w = posix.pipe()
        out_r, out_w = posix.pipe()
        err_r, err_w = posix.pipe()
        self.cells += 1
        import socket  # Python cells only: a kernel's start costs far more

        socket.send_fds(sock, [dumps({"cell": self.cells}).encode()], [code_r, out_w, err_w])
        for fd in (code_r, out_w, err_w):
            posix.close(fd)
        feed = (code_w, req["code"].encode())
        finished, reply = _pump(
            self.children,
            pid,
            {out_r: out, err_r: err},
            feed,
            time.monotonic() + req["timeout"],
            done_fd=sock.fileno(),
        )
        result: dict[str, Any] = {"stdout": out.result(), "stderr": err.result()}
        if finished and reply:
            done = loads(reply)
            result.update(exit_code=done["exit_code"], figures=done["figures"])
        else:
            self._stop_kernel()
            self.kernel_lost = "timeout" if not finished else "crashed"
            result.update(exit_code=137, timed_out=not finished, figures=[])
        return {**result, "kernel_id": kernel_id if self.kernel else "", "restarted": restarted}

    def _start_kernel(self) -> None:
        import socket

        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        null = posix.open(_DEVNULL, posix.O_RDWR)
        try:
            pid = _spawn(
                [sys.executable, f"{_HERE}/kernel.py"],
                dict(_ENVIRON),
                "/workspace",
                (null, null, null),
                extra=theirs.fileno(),
            )
        finally:
            posix.close(null)
            theirs.close()
        self.kernel = (pid, mine, f"k{pid}-{time.monotonic_ns()}")
        self.kernel_lost = ""

    def _stop_kernel(self) -> None:
        if self.kernel is None:
            return
        pid, sock, _ = self.kernel
        self.kernel = None
        sock.close()
        try:  # noqa: SIM105 (as in _kill_all)
            posix.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.children.wait_for(pid)
        self.children.exited.pop(pid, None)

    def serve(self) -> None:
        poll = select.poll()
        poll.register(_CTL_IN, select.POLLIN)
        poll.register(self.children.wake, select.POLLIN)
        while True:
            # No timeout: a request, or a child's exit (an orphan to reap as PID 1).
            ready = dict(poll.poll())
            if self.children.wake in ready:
                self.children.woken()
            if _CTL_IN not in ready:
                continue
            req = recv(_CTL_IN)
            if req is None:
                return
            try:
                reply = self.exec(req) if req["op"] == "exec" else self.python(req)
            except Exception as e:  # a bad request must not end the sandbox
                reply = {"exit_code": 126, "stderr": text(f"resident: {e!r}\n", 4096)}
            send(_CTL_OUT, reply)


def main() -> None:
    """Entry point: serve the sandbox-manager on fds 0/1. Arguments: the model gateway's
    loopback port and its socket's path (forwarded when the socket's folder is bound)."""
    port, gateway_socket = int(sys.argv[1]), sys.argv[2]
    # The channel moves to fds 3/4; 0-2 become /dev/null so that nothing stray corrupts it.
    posix.dup2(0, _CTL_IN)
    posix.dup2(1, _CTL_OUT)
    null = posix.open(_DEVNULL, posix.O_RDWR)
    for fd in (0, 1, 2):
        posix.dup2(null, fd)
    posix.close(null)
    posix.set_inheritable(_CTL_IN, False)
    posix.set_inheritable(_CTL_OUT, False)
    if _isdir(gateway_socket.rpartition("/")[0]):
        _start_gateway_forwarder(port, gateway_socket)
    resident = Resident()
    # Before reading anything: a host that never sees this knows no request ran here.
    send(_CTL_OUT, {"ready": True})
    resident.serve()


def _start_gateway_forwarder(port: int, path: str) -> None:
    """Run gateway.py's loopback forwarder on a thread of this process (PID 1 survives
    every command's timeout sweep). resident.py put this folder on sys.path."""
    import gateway  # type: ignore[import-not-found]

    gateway.start(port, path)


if __name__ == "__main__":
    main()
