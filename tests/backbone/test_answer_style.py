"""An answer's house style (its opening label) apart from its substance; hostile text too."""

from __future__ import annotations

import re
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from assay.tasks import answer_opening, answer_substance, restyled


@pytest.mark.parametrize(
    ("answer", "opening"),
    [
        ("Summary:\n\nThe effect is 2.1.", "Summary:\n\n"),
        ("Summary:\nThe effect is 2.1.", "Summary:\n"),
        ("Key findings: \t\n \n\nText", "Key findings: \t\n \n\n"),
        ("The effect is 2.1: see results/.", ""),  # a colon inside the first sentence
        ("Summary: the effect is 2.1.\nMore.", ""),  # the label is not alone on its line
        ("Summary:", ""),  # no line after it: the whole answer, not a label
        ("x" * 40 + ":\n\nText", ""),  # longer than a label
        ("", ""),
    ],
)
def test_the_opening_label_is_told_from_the_substance(answer: str, opening: str) -> None:
    assert answer_opening(answer) == opening
    assert answer_substance(answer) == answer[len(opening) :]


def test_restyling_swaps_the_label_and_keeps_the_substance() -> None:
    planned = "Summary:\n\nThe effect is 2.1 (95% CI 1.2-3.0)."
    assert restyled(planned, "") == "The effect is 2.1 (95% CI 1.2-3.0)."
    assert restyled(planned, "Findings:\n\n") == "Findings:\n\nThe effect is 2.1 (95% CI 1.2-3.0)."
    assert restyled("Plain answer.", "Summary:\n\n") == "Summary:\n\nPlain answer."


_REFERENCE = re.compile(r"\A[^\n]{1,39}:[ \t]*\n(?:[ \t]*\n)*")


@given(st.text(alphabet=st.sampled_from("ab:: \t\n\n\u00e9"), max_size=80))
def test_the_label_matches_an_independent_reading(answer: str) -> None:
    """The RE2 pattern against Python's `re` reading of the same rule."""
    found = _REFERENCE.match(answer)
    assert answer_opening(answer) == (found.group(0) if found else "")
    assert restyled(answer, answer_opening(answer)) == answer


def test_a_hostile_answer_is_read_in_bounded_time() -> None:
    """An agent's answer is hostile text: megabytes of blank lines or colons after a
    label are read in linear time and the label's search is bounded to the answer's
    start."""
    for hostile in (
        "Summary:" + " \t" * 2_000_000 + "\n" * 3_000_000,
        ":" * 5_000_000,
        "a" * 39 + ":" + "\n" * 5_000_000,
    ):
        t0 = time.process_time()
        opening = answer_opening(hostile)
        assert time.process_time() - t0 < 1.0
        assert len(opening) <= 4096
