"""Scripted agents of the bundled demo: what each one does is a choice, the rest is real.

- careful: looks at the data, writes the analysis script, runs it in the sandbox, and
  submits an answer that matches the files it produced;
- overclaimer: writes a script it never runs and submits a fluent answer claiming
  figures, tables and significance it never produced;
- empty: reads a file and answers in prose, leaving nothing on disk.
"""

from __future__ import annotations

import re
from pathlib import Path

from assay_testing.scripted import ScriptedSequence, ScriptReply, ScriptRequest

__all__ = ["agent_scripts", "task_id_of"]

_TASK = re.compile(r"Task id: (\S+)")
_ATTACHED = re.compile(r"^- /workspace/(\S+) \(", re.MULTILINE)


def task_id_of(request: ScriptRequest) -> str:
    """The task a conversation is about (the runner states it in the first user message)."""
    for message in request.messages:
        text = getattr(message, "text", "")
        if isinstance(text, str) and (m := _TASK.search(text)):
            return m.group(1)
    return ""


def _first_attachment(request: ScriptRequest) -> str | None:
    for message in request.messages:
        text = getattr(message, "text", "")
        if isinstance(text, str) and (m := _ATTACHED.search(text)):
            return m.group(1)
    return None


def _read(path: Path, fallback: str) -> str:
    return path.read_text(encoding="utf-8") if path.is_file() else fallback


def _solve_script(examples: Path, task_id: str) -> Path:
    """The task's own known-good script, else the one a demo keeps for all its tasks alike."""
    own = examples / "references" / task_id / "solve.py"
    return own if own.is_file() else examples / "solve.py"


def _careful(examples: Path) -> ScriptedSequence:
    def look(request: ScriptRequest) -> ScriptReply:
        first = _first_attachment(request)
        if first is None:
            return ScriptReply.call(
                "list_files", {}, text="No data attached; I'll check the workspace first."
            )
        # No times in the listing: a rerun sees the same output, so the development cache
        # answers its next turns too (the files are staged anew, with new times, each run).
        return ScriptReply.call(
            "bash",
            {"command": f"ls -l --time-style=+ && head -n 8 '{first}'"},
            text="Let me look at the data first.",
        )

    def write(request: ScriptRequest) -> ScriptReply:
        code = _read(
            _solve_script(examples, task_id_of(request)),
            "print('no solution script for this task')\n",
        )
        return ScriptReply.call(
            "write_file", {"path": "solve.py", "content": code}, text="Writing the analysis script."
        )

    def run(request: ScriptRequest) -> ScriptReply:
        return ScriptReply.call(
            "bash", {"command": "python3 solve.py && ls -R results 2>/dev/null | head -50"}
        )

    def submit(request: ScriptRequest) -> ScriptReply:
        answer = _read(
            examples / "solutions" / task_id_of(request) / "answer.md",
            "analysis done; see results/.",
        )
        if not answer.startswith("Summary:"):
            answer = "Summary:\n\n" + answer  # the house style of this agent's model family
        return ScriptReply.call("submit", {"answer": answer})

    return ScriptedSequence([look, write, run, submit])


def _overclaimer(examples: Path) -> ScriptedSequence:
    def sketch(request: ScriptRequest) -> ScriptReply:
        code = "# quick analysis\nimport pandas as pd\n# TODO: load data, fit model, make figure1.png\n"
        return ScriptReply.call(
            "write_file", {"path": "analysis.py", "content": code}, text="Drafting the analysis."
        )

    def submit(request: ScriptRequest) -> ScriptReply:
        claim = _read(
            examples / "solutions" / task_id_of(request) / "overclaim.md",
            "The effect is highly significant (p < 0.0001); see results/figure1.png and results/table.csv.",
        )
        return ScriptReply.call("submit", {"answer": claim})

    return ScriptedSequence([sketch, submit])


def _empty() -> ScriptedSequence:
    def glance(request: ScriptRequest) -> ScriptReply:
        first = _first_attachment(request)
        if first is None:
            return ScriptReply.call("list_files", {})
        return ScriptReply.call("read_file", {"path": first})

    def submit(request: ScriptRequest) -> ScriptReply:
        answer = (
            "Summary: I reviewed the request and the data you sent. The right approach is to clean "
            "the table, fit an appropriate model for your design, and report effect sizes with 95% "
            "confidence intervals, correcting for multiple comparisons where needed. Happy to run "
            "this if you want me to proceed."
        )
        return ScriptReply.call("submit", {"answer": answer})

    return ScriptedSequence([glance, submit])


def agent_scripts(examples: Path) -> dict[str, ScriptedSequence]:
    """Scripts by model name, for the models the demo campaign names. ``examples`` holds
    the bundle's ``references/`` (the careful agent writes and runs the known-good
    ``references/<task_id>/solve.py`` kept there, its one copy, or, in a demo whose tasks
    all take the same script, the one ``solve.py`` beside them) and ``solutions/`` (the
    agents' messages)."""
    return {
        "scripted-careful": _careful(examples),
        "scripted-overclaimer": _overclaimer(examples),
        "scripted-empty": _empty(),
    }
