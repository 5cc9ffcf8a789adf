"""An answer's house style: the label a model opens its answers with (``Summary:``).

A model's answers may open with a label alone on their first line; which label (or none)
is that model's habit, not the answer's substance. A control wearing a model's look
answers in that model's house style (`assay_runner.control`), and the demo's scripted
judges key their noise on the substance alone (`assay_testing.demo`). Linear (RE2) and
bounded: the label is at most 39 characters of the first line.
"""

from __future__ import annotations

import re2

__all__ = ["answer_opening", "answer_substance", "restyled"]

_LABEL = re2.compile(r"\A[^\n]{1,39}:[ \t]*\n(?:[ \t]*\n)*")
"""A label alone on an answer's first line, with the blank lines after it."""


def answer_opening(answer: str) -> str:
    """The label `answer` opens with, blank lines after it included ("": none)."""
    found = _LABEL.match(answer[:4096])
    return found.group(0) if found else ""


def answer_substance(answer: str) -> str:
    """`answer` without its opening label: what it says, in no house style."""
    return answer[len(answer_opening(answer)) :]


def restyled(answer: str, style: str) -> str:
    """`answer` opening with the label `style` in place of its own: the same answer in
    another model's house style."""
    return style + answer_substance(answer)
