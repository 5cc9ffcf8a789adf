#!/usr/bin/env python3
"""Build the bundled tasks' reference answers (the known-good controls of `controls:`).

    python examples/references.py     # (re)writes examples/references/<task_id>/

Each reference is what the careful agent of the demo leaves and says: solve.py (kept
here, the one copy of the task's careful analysis: the careful agent writes it, the
controls run it) and every file it writes, plus message.md, its final message
(solutions/<task_id>/answer.md under the "Summary:" opening that agent's model family
writes), so a known-good control is a known-good run. Only solve.py is kept on a rebuild.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def build(task_id: str, out: Path) -> None:
    """Run the reference's solve.py in a fresh workspace and keep what it adds."""
    task = HERE / "tasks" / task_id
    solution = HERE / "solutions" / task_id
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp)
        inputs = {p.relative_to(task) for p in task.rglob("*") if p.is_file()}
        for rel in inputs:
            (ws / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(task / rel, ws / rel)
        shutil.copyfile(out / "solve.py", ws / "solve.py")
        subprocess.run(
            [sys.executable, "solve.py"],
            cwd=ws,
            check=True,
            capture_output=True,
            timeout=300,
            env={**os.environ, "MPLBACKEND": "Agg"},
        )
        for old in sorted(out.iterdir()):
            if old.name != "solve.py":
                shutil.rmtree(old) if old.is_dir() else old.unlink()
        for p in sorted(ws.rglob("*")):
            rel = p.relative_to(ws)
            if p.is_file() and rel not in inputs and "__pycache__" not in rel.parts:
                (out / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(p, out / rel)
    answer = (solution / "answer.md").read_text(encoding="utf-8")
    if not answer.startswith("Summary:"):
        answer = "Summary:\n\n" + answer
    (out / "message.md").write_text(answer, encoding="utf-8")


def main() -> None:
    tasks = sorted(p.name for p in (HERE / "tasks").iterdir() if p.is_dir())
    for task_id in tasks:
        build(task_id, HERE / "references" / task_id)
    print(f"wrote {len(tasks)} references to {HERE / 'references'}")


if __name__ == "__main__":
    main()
