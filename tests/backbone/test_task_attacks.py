"""Hostile task input is refused at submit, naming the task and the check."""

from __future__ import annotations

import pytest

from assay.tasks._draft import build_task
from assay_schemas import TaskInputError


def _fields(check: dict[str, object]) -> dict[str, object]:
    return {"task_id": "t9", "prompt": "p", "reference_checks": [check]}


def test_an_unclosed_pattern_fails_the_submit() -> None:
    check = {"kind": "contains", "name": "mentions", "path": "a.md", "pattern": "(unclosed"}
    with pytest.raises(TaskInputError, match=r"task t9: reference_checks\[0\] \('mentions'\)"):
        build_task(_fields(check), [])


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
