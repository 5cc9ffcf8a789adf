"""Scripted agents of the bundled demo: what each one does is a choice, the rest is real.

Each agent draws the kind of work it does on a task from its deck (`_work.DECKS`: the
cast's runs span the kinds of work the controls plant, as a real cast's do):

- careful: looks at the data, writes the analysis script, runs it in the sandbox, and
  submits an answer that matches the files it produced (five tasks in eight); on the
  others it misreports: after the run it writes its results and answer with the numbers
  moved;
- overclaimer: submits a fluent answer claiming figures, tables and numbers it never
  produced: it writes its script and never runs it, or runs it and loses the files it
  cites;
- empty: reads a file and answers in prose, leaving nothing on disk.

Each run of an agent on a task is an attempt (its first, an epoch's, a retry's). With
``sampled``, each attempt draws its own kind of work from the agent's deck
(`_work.Bundle.kind`), as a sampled model does not repeat itself run for run; by default
every attempt does the kind dealt the task, so a campaign's report is the same however
its conversations interleave.

Where the bundle has no reference answer for a task (``references/<task_id>/message.md``)
each does its classic: careful completes, the overclaimer sketches a script and claims a
figure, empty answers with a generic plan.
"""

from __future__ import annotations

import re
import shlex
import threading
from collections import Counter, OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from assay.providers import AssistantMessage
from assay_testing.scripted import Script, ScriptReply, ScriptRequest, call_id

from ._work import Bundle, Kind, Work

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


Step = Callable[[ScriptRequest], ScriptReply]
_RUN = "python3 solve.py && ls -R results 2>/dev/null | head -50"
_SUMMARY = "Summary:\n\n"
"""The house style of the acme family's answers (careful's and empty's)."""


def _look(request: ScriptRequest) -> ScriptReply:
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


def _glance(request: ScriptRequest) -> ScriptReply:
    first = _first_attachment(request)
    if first is None:
        return ScriptReply.call("list_files", {})
    return ScriptReply.call("read_file", {"path": first})


def _write(path: str, content: str, text: str | None = None) -> Step:
    return lambda _: ScriptReply.call("write_file", {"path": path, "content": content}, text=text)


def _bash(command: str) -> Step:
    return lambda _: ScriptReply.call("bash", {"command": command})


def _submit(answer: str) -> Step:
    return lambda _: ScriptReply.call("submit", {"answer": answer})


def _steps(work: Work, message: str) -> list[Step]:
    """The turns of one run of `work`, answering `message`."""
    write = _write("solve.py", work.code, "Writing the analysis script.")
    if work.kind is Kind.PROSE_ONLY:
        return [_glance, _submit(message)]
    if work.kind is Kind.NEVER_RUNS:
        return [_write("solve.py", work.code, "Drafting the analysis."), _submit(message)]
    run = _RUN
    if work.removes:  # tidies the outputs away, the ones its answer cites with them
        run = "python3 solve.py && rm -f -- " + " ".join(shlex.quote(p) for p in work.removes)
        run += " && ls -R results 2>/dev/null | head -50"
    rewrites = [_write(p, text) for p, text in work.rewrites]
    return [_look, write, _bash(run), *rewrites, _submit(message)]


_CONVERSATIONS = 100_000
"""Conversations whose attempt a script remembers (the oldest forgotten first)."""


def _first_call_id(request: ScriptRequest) -> str | None:
    for message in request.messages:
        if isinstance(message, AssistantMessage) and message.tool_calls:
            return message.tool_calls[0].id
    return None


@dataclass
class _Attempts:
    """Which run of a model on a task each conversation is: the n-th to open on the task
    is attempt n, known in its later turns by its first call's id (an id this script
    gave it, drawn per attempt). A conversation it never opened (answered from a cache)
    counts as the first."""

    opened: Counter[str] = field(default_factory=Counter)
    by_first_call: OrderedDict[str, int] = field(default_factory=OrderedDict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def open(self, task_id: str) -> int:
        with self.lock:
            attempt = self.opened[task_id]
            self.opened[task_id] += 1
            return attempt

    def remember(self, first_call: str, attempt: int) -> None:
        with self.lock:
            self.by_first_call[first_call] = attempt
            while len(self.by_first_call) > _CONVERSATIONS:
                self.by_first_call.popitem(last=False)

    def of(self, first_call: str) -> int:
        with self.lock:
            return self.by_first_call.get(first_call, 0)


def _dealt(
    bundle: Bundle, model: str, classic: Sequence[Step], style: bool, sampled: bool
) -> Script:
    """`model`'s script: the turns of the kind of work it does in this run on the
    request's task (`Bundle.kind`: dealt for its first run there and, where `sampled`,
    drawn for each later one; its `classic` turns where the bundle has no reference);
    `style`: its answers open with the acme family's "Summary:", else the opening is
    left out."""
    attempts = _Attempts()

    def script(request: ScriptRequest) -> ScriptReply:
        task = task_id_of(request)
        first = _first_call_id(request)
        attempt = 0
        if sampled:
            attempt = attempts.open(task) if first is None else attempts.of(first)
        work = bundle.work(model, task, attempt)
        if work is None:
            steps = list(classic)
        else:
            message = work.message
            if not style and message.startswith(_SUMMARY):
                message = message[len(_SUMMARY) :]
            steps = _steps(work, message)
        reply = steps[min(request.turn, len(steps) - 1)](request)
        if not sampled or first is not None or not reply.tool_calls:
            return reply
        # Its first call's id names the attempt (the first's, as the API's own would be).
        opening = call_id(request, 0, salt=str(attempt) if attempt else "")
        attempts.remember(opening, attempt)
        calls = (reply.tool_calls[0].model_copy(update={"id": opening}), *reply.tool_calls[1:])
        return reply.model_copy(update={"tool_calls": calls})

    return script


def _careful(examples: Path) -> list[Step]:
    def write(request: ScriptRequest) -> ScriptReply:
        code = _read(
            _solve_script(examples, task_id_of(request)),
            "print('no solution script for this task')\n",
        )
        return ScriptReply.call(
            "write_file", {"path": "solve.py", "content": code}, text="Writing the analysis script."
        )

    def submit(request: ScriptRequest) -> ScriptReply:
        answer = _read(
            examples / "solutions" / task_id_of(request) / "answer.md",
            "analysis done; see results/.",
        )
        if not answer.startswith(_SUMMARY.strip()):
            answer = _SUMMARY + answer  # the house style of this agent's model family
        return ScriptReply.call("submit", {"answer": answer})

    return [_look, write, _bash(_RUN), submit]


def _overclaimer(examples: Path) -> list[Step]:
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

    return [sketch, submit]


_GENERIC = (
    "Summary: I reviewed the request and the data you sent. The right approach is to clean "
    "the table, fit an appropriate model for your design, and report effect sizes with 95% "
    "confidence intervals, correcting for multiple comparisons where needed. Happy to run "
    "this if you want me to proceed."
)


def agent_scripts(examples: Path, *, sampled: bool = False) -> dict[str, Script]:
    """Scripts by model name, for the models the demo campaign names. ``examples`` holds
    the bundle's ``references/`` (the known-good ``solve.py``, its outputs and answer,
    each kept there once; in a demo whose tasks all take the same script, the one
    ``solve.py`` beside them) and ``solutions/`` (the agents' classic messages).

    `sampled`: each later run of an agent on a task (an epoch, a retry, a second campaign
    on this server) draws its own kind of work, as a sampled model's runs differ (what
    the blindness bench's larger campaign needs). By default every run on a task does its
    dealt kind, so that two runs of a campaign give the same report whatever order their
    conversations arrive in (a cluster's and one process's are compared)."""
    bundle = Bundle(examples)
    careful, overclaimer = _careful(examples), _overclaimer(examples)
    return {
        "scripted-careful": _dealt(bundle, "scripted-careful", careful, True, sampled),
        "scripted-overclaimer": _dealt(bundle, "scripted-overclaimer", overclaimer, False, sampled),
        "scripted-empty": _dealt(
            bundle, "scripted-empty", [_glance, _submit(_GENERIC)], True, sampled
        ),
    }
