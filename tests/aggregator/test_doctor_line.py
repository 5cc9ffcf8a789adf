"""Issue #53 item 1: the terminal report names `assay doctor` only under failures a check
of this machine can explain (a sandbox that could not start), never under, say, a web
cache a run could not read."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from assay_report.terminal import print_problems
from assay_schemas import Cause, Problems

DOCTOR = "assay doctor"


def _printed(*causes: Cause) -> str:
    out = io.StringIO()
    print_problems(Problems(causes=causes), Console(file=out, width=200), doctor=DOCTOR)
    return out.getvalue()


def _cause(stage: str, error_class: str) -> Cause:
    return Cause(stage=stage, error_class=error_class, first_message="it failed", count=1)


def test_a_sandbox_that_could_not_start_names_the_doctor() -> None:
    text = _printed(_cause("sandbox", "SandboxBackendUnavailable"))
    assert f"run `{DOCTOR}`" in text


@pytest.mark.parametrize(
    ("stage", "error_class"),
    [("agent", "WebCacheUnreadable"), ("seal", "SandboxManagerGone"), ("judge", "OverTime")],
)
def test_failures_no_machine_check_explains_do_not_name_the_doctor(
    stage: str, error_class: str
) -> None:
    text = _printed(_cause(stage, error_class))
    assert error_class in text, "the cause itself is still shown"
    assert DOCTOR not in text
