"""Hostile task input is refused at submit, naming the task and the check."""

from __future__ import annotations

import pytest

from assay.tasks._draft import build_task
from assay_schemas import TaskInputError


def _fields(check: dict[str, object]) -> dict[str, object]:
    return {"task_id": "t9", "prompt": "p", "reference_checks": [check]}


def test_an_unclosed_pattern_fails_the_submit() -> None:
    check = {"kind": "contains", "name": "mentions", "path": "a.md", "pattern": "(unclosed"}
    with pytest.raises(
        TaskInputError, match=r"task t9: reference_checks\[0\] \('mentions'\).*missing \)"
    ):
        build_task(_fields(check), [])


def test_a_backreference_fails_the_submit_because_re2_cannot_run_it() -> None:
    # What passes submit is what the judge's linear-time engine can run.
    check = {"kind": "contains", "name": "twice", "path": "a.md", "pattern": r"(a)\1"}
    with pytest.raises(TaskInputError, match=r"'twice'.*not a valid RE2 regex"):
        build_task(_fields(check), [])


def test_a_catastrophic_pattern_is_accepted_and_runs_in_linear_time() -> None:
    check = {"kind": "contains", "name": "as", "path": "a.md", "pattern": "(a+)+$"}
    assert build_task(_fields(check), []).reference_checks[0].name == "as"


def test_a_number_pattern_without_a_group_fails_the_submit() -> None:
    check = {
        "kind": "number_near", "name": "total", "path": "a.md", "pattern": r"\d+",
        "expected": 1.0, "tolerance": 0.1,
    }  # fmt: skip
    with pytest.raises(TaskInputError, match=r"'total'.*needs a group"):
        build_task(_fields(check), [])


def test_valid_patterns_pass() -> None:
    check = {"kind": "contains", "name": "ok", "path": "a.md", "pattern": "(closed)"}
    assert build_task(_fields(check), []).reference_checks[0].name == "ok"
