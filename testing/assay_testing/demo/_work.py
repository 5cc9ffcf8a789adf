"""What a scripted agent's run leaves: the kind of work it does on a task, drawn per run.

Real agents do not do one thing every time: some finish the analysis, some misreport a
number, some lose a file they cite, some never run their code, some answer in prose
alone. Each scripted agent of the demo draws its kind of work for a task from its own
deck (:data:`DECKS`): its first run on a task takes the card dealt that task (over the
bundle's tasks in a fixed shuffled order), each later run on it (an epoch, a retry) a
card drawn for that attempt, as a sampled model does not repeat itself run for run. So
the cast's runs span the kinds of work the campaign's controls plant, on every task as
over the campaign, as a real cast's do, and a control cannot be told from an agent's run
by the kind of work it leaves on its task (`bench.blindness` measures it). The work itself comes from the bundle's reference
(``references/<task_id>/``: ``solve.py``, its outputs and ``message.md``) and, for a
misreport, the same derivation as the ``altered_numbers`` control's.
"""

from __future__ import annotations

import functools
import hashlib
import random
from enum import StrEnum
from pathlib import Path
from typing import NamedTuple

from assay.tasks import (
    MESSAGE_FILE,
    ControlFolder,
    build_task,
    control_answers,
    load_task_dir,
    read_control_folder,
    utf8_text,
)

__all__ = ["DECKS", "Bundle", "Kind", "Work"]


class Kind(StrEnum):
    """The kind of work one run leaves."""

    COMPLETE = "complete"
    """Runs the analysis and reports what it produced."""
    MISREPORTS = "misreports"
    """Runs the analysis, then writes its results and answer with the numbers moved."""
    LOSES_FILES = "loses_files"
    """Runs the analysis but removes the files its answer cites."""
    NEVER_RUNS = "never_runs"
    """Writes the analysis script, never runs it, answers as if it had."""
    PROSE_ONLY = "prose_only"
    """Leaves nothing on disk and answers with results it never produced."""
    CLASSIC = "classic"
    """The agent's own fallback where the bundle has no reference for the task."""


DECKS: dict[str, tuple[Kind, ...]] = {
    "scripted-careful": (Kind.COMPLETE,) * 5 + (Kind.MISREPORTS,) * 3,
    "scripted-overclaimer": (Kind.NEVER_RUNS,) * 4 + (Kind.LOSES_FILES,) * 4,
    "scripted-empty": (Kind.PROSE_ONLY,) * 8,
}
"""Each agent's kinds of work, one card a task: careful mostly complete (and now and then
misreports its numbers), the overclaimer cites what it never produced (never running its
script, or losing the files it names), empty leaves nothing on disk."""


class Work(NamedTuple):
    """What one run of a kind leaves, from the task's reference."""

    kind: Kind
    code: str
    """The analysis script (``solve.py``)."""
    removes: tuple[str, ...]
    """Outputs removed after the run (the files its answer cites, for `LOSES_FILES`)."""
    rewrites: tuple[tuple[str, str], ...]
    """Output files written after the run, path and text (moved numbers, `MISREPORTS`)."""
    message: str
    """The answer, in the reference's house style (its ``Summary:`` opening)."""


_MAX_BYTES = 4_000_000


def _seeded(*parts: object) -> random.Random:
    return random.Random(hashlib.sha256("\x1f".join(map(str, parts)).encode()).digest())


class Bundle:
    """The bundle's references and tasks, read once each, and each agent's deal."""

    def __init__(self, examples: Path) -> None:
        self.examples = examples
        refs = examples / "references"
        self.tasks = sorted(p.name for p in refs.iterdir() if p.is_dir()) if refs.is_dir() else []

    def kind(self, model: str, task_id: str, attempt: int = 0) -> Kind:
        """The kind of work `model` does on `task_id` in its `attempt`-th run there: its
        deck's card at the task's place in a fixed shuffle of the bundle's tasks for the
        first, a card drawn for the attempt after (CLASSIC without a reference)."""
        deck = DECKS.get(model)
        if not deck or task_id not in self.tasks or self._reference(task_id) is None:
            return Kind.CLASSIC
        if attempt > 0:
            return _seeded("draw", model, task_id, attempt).choice(deck)
        order = list(self.tasks)
        _seeded("deal", model).shuffle(order)
        return deck[order.index(task_id) % len(deck)]

    @functools.cache  # noqa: B019 - one bundle per scripted server, read once per task
    def _reference(self, task_id: str) -> ControlFolder | None:
        folder = self.examples / "references" / task_id
        if not (folder / MESSAGE_FILE).is_file():
            return None
        return read_control_folder(task_id, folder, max_bytes=_MAX_BYTES)

    def work(self, model: str, task_id: str, attempt: int = 0) -> Work | None:
        """What `model`'s `attempt`-th run on `task_id` leaves (None: the agent's classic
        behaviour)."""
        return self._work(task_id, self.kind(model, task_id, attempt))

    @functools.cache  # noqa: B019
    def _work(self, task_id: str, kind: Kind) -> Work | None:
        ref = self._reference(task_id)
        if kind is Kind.CLASSIC or ref is None:
            return None
        code = ref.files.get("solve.py", b"").decode("utf-8")
        if kind in (Kind.MISREPORTS, Kind.LOSES_FILES):
            variant = "altered_numbers" if kind is Kind.MISREPORTS else "files_removed"
            derived = self._derived(task_id, ref, variant)
            if derived is None:  # nothing to move or to lose: the work is complete
                return Work(Kind.COMPLETE, code, (), (), ref.message)
            removes = tuple(sorted(set(ref.files) - set(derived.files)))
            rewrites = tuple(
                (p, d.decode("utf-8"))
                for p, d in sorted(derived.files.items())
                if d != ref.files.get(p) and utf8_text(d)
            )
            return Work(kind, code, removes, rewrites, derived.message)
        return Work(kind, code, (), (), ref.message)

    def _derived(self, task_id: str, ref: ControlFolder, variant: str) -> ControlFolder | None:
        draft = load_task_dir(self.examples / "tasks" / task_id, max_bytes=_MAX_BYTES)
        task = build_task(draft.fields, [])
        answers = control_answers(
            task,
            [variant],
            reference=self.examples / "references" / task_id,
            authors=None,
            max_bytes=_MAX_BYTES,
        )
        return answers[0].answer if answers else None
