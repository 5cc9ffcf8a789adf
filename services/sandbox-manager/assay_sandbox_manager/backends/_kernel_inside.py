"""The Python kernel inside a sandbox: one interpreter whose globals persist across cells.

Started by the resident (deploy/sandbox/resident.c) with a unix socket as fd 3. Each cell
arrives as a message with three pipes passed as file descriptors (code in, stdout,
stderr); the reply is the cell's exit code and the figures it saved, as JSON, which the
resident passes to the host unread. Standard library only.
"""

from __future__ import annotations

import ast
import builtins
import json
import os
import socket
import sys
import traceback
from typing import Any


def main() -> None:
    """Run cells in one namespace; reply with the exit code and the figures saved."""
    sock = socket.socket(fileno=3)
    sys.path[0] = ""  # like the REPL: modules in the working directory import
    ns: dict[str, Any] = {"__name__": "__main__", "__builtins__": builtins}
    while True:
        msg, fds, _, _ = socket.recv_fds(sock, 4096, 3)
        if not msg:
            return
        code_fd, out_fd, err_fd = fds
        with os.fdopen(code_fd, "rb") as f:
            code = f.read().decode("utf-8", "replace")
        saved = os.dup(1), os.dup(2)
        os.dup2(out_fd, 1)
        os.dup2(err_fd, 2)
        os.close(out_fd)
        os.close(err_fd)
        exit_code = _run_cell(code, ns)
        figures = _save_figures(int(json.loads(msg)["cell"]))
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        os.close(saved[0])
        os.close(saved[1])
        sock.send(json.dumps({"exit_code": exit_code, "figures": figures}).encode())


def _run_cell(code: str, ns: dict[str, Any]) -> int:
    """Like the REPL: a last bare expression is printed; an exception is a traceback."""
    try:
        tree = ast.parse(code, "<cell>")
        last = tree.body[-1] if tree.body and isinstance(tree.body[-1], ast.Expr) else None
        if last is not None:
            tree.body.pop()
        exec(compile(tree, "<cell>", "exec"), ns)
        if last is not None:
            value = eval(compile(ast.Expression(last.value), "<cell>", "eval"), ns)
            if value is not None:
                print(repr(value))
        return 0
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else 1
    except BaseException as e:
        # The kernel's own frame is noise to the agent; a SyntaxError needs no frame at all.
        tb = (
            None
            if isinstance(e, SyntaxError) or e.__traceback__ is None
            else e.__traceback__.tb_next
        )
        traceback.print_exception(type(e), e, tb)
        return 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()


def _save_figures(cell: int) -> list[str]:
    """Save and close every open matplotlib figure under /workspace/figures."""
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return []
    saved = []
    try:
        for n, num in enumerate(plt.get_fignums(), 1):
            os.makedirs("/workspace/figures", exist_ok=True)
            path = f"figures/cell{cell}-{n}.png"
            plt.figure(num).savefig("/workspace/" + path)
            saved.append(path)
        plt.close("all")
    except Exception:
        traceback.print_exc()
    return saved


if __name__ == "__main__":
    main()
