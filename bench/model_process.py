"""The scripted model in a process of its own, as a deployment's model is.

In a thread of the measuring process its Python (parsing each request, building each
reply) held the same interpreter lock as the services measured there, so every step of
the runner bench paid for the model server's CPU on the platform's critical path.
``python -m bench.model_process --steps N [--latency S] [--command C]`` is the child.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from assay_testing.scripted import ScriptedModelServer, ScriptedSequence, ScriptReply

__all__ = ["MODEL", "scripted_process", "tool_script"]

MODEL = "bench-steps"


def tool_script(tool_steps: int, command: str) -> ScriptedSequence:
    """`tool_steps` calls of the bash tool running `command`, then a submit."""
    calls: list[ScriptReply | str] = [
        ScriptReply.call("bash", {"command": command}) for _ in range(tool_steps)
    ]
    calls.append(ScriptReply.call("submit", {"answer": "done"}))
    return ScriptedSequence(calls)


def _serve(steps: int, latency_s: float, command: str) -> None:
    """Child: serve the script until stdin closes; the first stdout line is the base URL."""
    script = {MODEL: tool_script(steps, command)}
    with ScriptedModelServer(script, latency_s=latency_s, record=False) as server:
        print(server.openai_base_url, flush=True)
        sys.stdin.read()


@contextmanager
def scripted_process(steps: int, latency_s: float = 0.0, command: str = "true") -> Iterator[str]:
    """The scripted model in a process of its own, answering after latency_s; its base URL."""
    args = [sys.executable, "-m", "bench.model_process", "--steps", str(steps)]
    args += ["--latency", str(latency_s), "--command", command]
    child = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        yield child.stdout.readline().strip()
    finally:
        assert child.stdin is not None
        child.stdin.close()
        try:
            child.wait(30)
        except subprocess.TimeoutExpired:  # hundreds of connections closing on a busy host
            child.kill()
            child.wait()


def main() -> None:
    """Serve the script until stdin closes (the child of `scripted_process`)."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--command", default="true")
    args = parser.parse_args()
    _serve(args.steps, args.latency, args.command)


if __name__ == "__main__":
    main()
