"""Loopback forwarder inside a sandbox: 127.0.0.1:port to the run's model gateway socket.

The sandbox has no network, only its own loopback; the runner's gateway listens on a unix
socket in a host folder bind-mounted read-only in the sandbox. The resident (PID 1, never
killed by a command's timeout sweep) runs this on one thread, standard library only, so
that OPENAI_BASE_URL=http://127.0.0.1:port/v1 works for any program in the sandbox. The
port and the socket's path are `assay_schemas`' GATEWAY_* (this file cannot import them:
the host passes them on the resident's command line).
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading


def start(port: int, path: str) -> None:
    """Listen now (so the first program finds the port open), forward on a daemon thread."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(64)
    threading.Thread(target=_serve, args=(listener, path), daemon=True).start()


def _serve(listener: socket.socket, path: str) -> None:
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ, None)
    while True:
        for key, _ in sel.select():
            if key.data is None:
                _accept(sel, listener, path)
            else:
                _move(sel, key.fileobj, key.data)  # type: ignore[arg-type]


def _accept(sel: selectors.BaseSelector, listener: socket.socket, path: str) -> None:
    client, _ = listener.accept()
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(path)
    except OSError:
        # No gateway (yet): the program sees a reset connection, not a hang.
        client.close()
        upstream.close()
        return
    sel.register(client, selectors.EVENT_READ, upstream)
    sel.register(upstream, selectors.EVENT_READ, client)


def _move(sel: selectors.BaseSelector, src: socket.socket, dst: socket.socket) -> None:
    try:
        data = src.recv(65536)
        if data:
            dst.sendall(data)  # loopback and a local socket: short blocking writes
            return
    except OSError:
        pass
    for s in (src, dst):
        with contextlib.suppress(KeyError, ValueError):
            sel.unregister(s)
        s.close()
